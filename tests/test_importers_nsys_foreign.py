"""nsys tables the real capture lacks (NVTX in other domains, driver calls, memsets, several
synchronisation kinds, contended locks), in synthetic exports on the real schema
(tests/nsys_fixture.py); the expected figures are counted here with SQL over each file."""

import sqlite3
from collections import Counter

import pytest
from nsys_fixture import APP, GPU_NAMES, foreign_export

from workbench.importers import load_nsys
from workbench.model import roles
from workbench.model import tracks as tr

# What the CUDA and POSIX documentation says of the calls the fixture makes.
BLOCKING = {"cudaStreamSynchronize_v3020", "cuCtxSynchronize"}
LAUNCHING = {"cudaLaunchKernel_v7000", "cuLaunchKernel"}
LOCKS, WAITS = {"pthread_mutex_lock"}, {"pthread_cond_wait", "sem_wait"}
# CUPTI's synchronisation types (ENUM_CUPTI_SYNC_TYPE) and what each waited for.
SYNC_TYPES = {1: "event_synchronize", 2: "stream_wait_event", 3: "stream_synchronize",
              4: "context_synchronize"}


def _sql(path, query):
    with sqlite3.connect(path) as conn:
        return conn.execute(query).fetchall()


def _calls(path, table):
    return Counter(dict(_sql(path, f"SELECT s.value, count(*) FROM {table} t "
                                   "JOIN StringIds s ON s.id = t.nameId GROUP BY 1")))


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    path = foreign_export(tmp_path_factory.mktemp("nsys") / "two_processes.sqlite")
    return path, load_nsys(path)


def test_every_role_counts_what_the_tables_hold(export):
    path, trace = export
    calls = _calls(path, "CUPTI_ACTIVITY_KIND_RUNTIME") + _calls(path, "CUPTI_ACTIVITY_KIND_DRIVER")
    osrt = _calls(path, "OSRT_API")
    count = {t: _sql(path, f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{t}")[0][0]
             for t in ("KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION")}
    stream_waits = _sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION "
                              "WHERE syncType = 2")[0][0]
    expected = {
        "kernel": count["KERNEL"], "copy": count["MEMCPY"], "memset": count["MEMSET"],
        # A stream's wait on an event (syncType 2) holds no host thread: a runtime call.
        "sync": sum(calls[n] for n in BLOCKING) + count["SYNCHRONIZATION"] - stream_waits,
        "launch": sum(calls[n] for n in LAUNCHING),
        "runtime": sum(n for name, n in calls.items() if name not in BLOCKING | LAUNCHING) + stream_waits,
        "lock_wait": sum(osrt[n] for n in LOCKS), "cond_wait": sum(osrt[n] for n in WAITS),
        "os_call": sum(n for name, n in osrt.items() if name not in LOCKS | WAITS),
        "host": _sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)")[0][0],
    }
    assert roles.role_counts(trace) == expected
    assert all(expected.values())


def test_threads_of_two_processes_are_named_by_both_ids(export):
    path, trace = export
    kinds = Counter(tr.parse(t).kind for t in trace.tracks())
    assert set(kinds) == {tr.KERNELS, tr.COPIES, tr.MEMSETS, tr.THREAD, tr.CUDA_API, tr.OS_API}
    ids = "SELECT globalTid >> 24 & 16777215, globalTid & 16777215 FROM"
    threads = {f"{pid}.{tid}" for pid, tid in _sql(
        path, f"{ids} OSRT_API UNION {ids} CUPTI_ACTIVITY_KIND_RUNTIME UNION "
              f"{ids} CUPTI_ACTIVITY_KIND_DRIVER")}
    threads.add(f"{APP}.{APP}")  # the synchronisation record no call carries goes to the main thread
    callers = {tr.parse(t).caller for t in trace.tracks() if tr.parse(t).kind in (tr.CUDA_API, tr.OS_API)}
    assert {c.kind for c in callers} == {tr.THREAD} and {c.name for c in callers} == threads
    names = {f"{pid}.{tid}": name for pid, tid, name in _sql(
        path, "SELECT globalTid >> 24 & 16777215, globalTid & 16777215, s.value FROM ThreadNames t "
              "JOIN StringIds s ON s.id = t.nameId")}
    assert trace.thread_names == {tr.thread_track(t): names[t] for t in threads | {f"{APP}.{APP}"}}
    assert trace.meta["processes"] == {str(pid): name for pid, name in _sql(
        path, "SELECT pid, name FROM PROCESSES WHERE pid IN (300, 400)")}
    assert trace.meta["devices"] == {str(k): v for k, v in GPU_NAMES.items()}


def test_one_process_names_threads_by_their_id(tmp_path):
    path = foreign_export(tmp_path / "one.sqlite", processes=(APP,))
    trace = load_nsys(path)
    tids = {str(t) for (t,) in _sql(path, "SELECT globalTid & 16777215 FROM OSRT_API UNION "
                                          "SELECT globalTid & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    callers = {tr.parse(t).caller.name for t in trace.tracks()
               if tr.parse(t).kind in (tr.OS_API, tr.CUDA_API)}
    assert callers == tids | {str(APP)}  # and the main thread, for the record no call carries
    assert set(trace.thread_names) == {tr.thread_track(t) for t in callers}


def test_nvtx_ranges_of_foreign_domains_stay_on_their_thread(export):
    path, trace = export
    domains = dict(_sql(path, "SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75"))
    rows = _sql(path, "SELECT coalesce(n.text, s.value), n.start, n.end, n.domainId, "
                      "n.globalTid >> 24 & 16777215, n.globalTid & 16777215 FROM NVTX_EVENTS n "
                      "LEFT JOIN StringIds s ON s.id = n.textId WHERE eventType IN (59, 60)")
    expected = sorted((tr.thread_track(f"{pid}.{tid}"), name, start, end, domains.get(domain, "default"))
                      for name, start, end, domain, pid, tid in rows)
    got = sorted((s.track, s.name, s.start_ns, s.end_ns, s.attrs["domain"]) for s in trace.iter_spans()
                 if tr.parse(s.track).kind == tr.THREAD)
    assert got == expected and {g[-1] for g in got} == {"app", "default"}
    (mark,) = list(trace.iter_instants())
    assert (mark.name, mark.attrs) == ("checkpoint", {"domain": "app"})
    assert trace.meta["import"]["nvtx_foreign_domains"] == ["app", "default"]


def test_synchronisation_records_say_what_was_synchronised_and_who_waited(export):
    path, trace = export
    callers = {c: f"{pid}.{tid}" for c, pid, tid in _sql(
        path, "SELECT correlationId, globalTid >> 24 & 16777215, globalTid & 16777215 FROM (SELECT * "
              "FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL SELECT * FROM CUPTI_ACTIVITY_KIND_DRIVER)")}
    records = _sql(path, "SELECT syncType, correlationId, globalPid >> 24 & 16777215 "
                         "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    spans = {s.attrs["correlation"]: s for s in trace.iter_spans() if s.name in SYNC_TYPES.values()}
    assert len(spans) == len(records)
    for sync_type, correlation, pid in records:
        span = spans[correlation]
        caller = callers.get(correlation, f"{pid}.{pid}")
        assert (span.name, span.track) == (SYNC_TYPES[sync_type], tr.cuda_track(tr.thread_track(caller)))
        want = "runtime" if sync_type == 2 else "sync"  # a stream's wait holds no host thread
        assert roles.default_role(span.track, span.name) == want
    assert trace.meta["import"]["sync_callers"].startswith("1 synchronisation records without their API call")


def test_device_rows_keep_their_attributes(export):
    path, trace = export
    (memset,) = trace.select(track=tr.memset_track(0))
    (row,) = _sql(path, "SELECT start, end, bytes, value, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET")
    assert (memset.start_ns, memset.end_ns, memset.attrs["bytes"], memset.attrs["value"],
            memset.attrs["correlation"]) == row
    assert memset.attrs["memory_kind"] == "device"
    assert {c.name for c in trace.iter_spans() if tr.parse(c.track).kind == tr.COPIES} == {"p2p", "d2d"}
