"""A real nsys export of a CUDA program (tests/data/nsys/README.md): every span on the track
grammar with its role; every expected figure is counted here with SQL over the file itself."""

import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from workbench.importers import load_any
from workbench.model import roles
from workbench.model import tracks as tr

EXPORT = Path(__file__).parent / "data" / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"

# What the CUDA runtime documents of the calls this program makes: which block the caller
# until the GPU has caught up (a plain cudaMemcpy and cudaFree do), which launch work.
BLOCKING = {"cudaDeviceSynchronize", "cudaMemcpy", "cudaFree"}
LAUNCHING = {"cudaLaunchKernel"}
OTHER_CALLS = {"cudaMalloc", "cuModuleGetLoadingMode"}
COND_WAITS = {"sem_timedwait", "sem_wait", "pthread_cond_wait", "pthread_cond_timedwait"}
LOCK_WAITS = {"pthread_mutex_lock"}
DIRECTIONS = {"HTOD": "h2d", "DTOH": "d2h", "DTOD": "d2d", "PTOP": "p2p"}


def _sql(query):
    with sqlite3.connect(f"file:{EXPORT}?mode=ro", uri=True) as conn:
        return conn.execute(query).fetchall()


def _names(table, where="1"):
    return Counter(dict(_sql(f"SELECT s.value, count(*) FROM {table} t JOIN StringIds s ON s.id = t.nameId "
                             f"WHERE {where} GROUP BY s.value")))


@pytest.fixture(scope="module")
def trace():
    return load_any(EXPORT)


def _spans(trace, kind):
    return [s for s in trace.iter_spans() if tr.parse(s.track).kind == kind]


def test_device_work_matches_the_tables(trace):
    kernels = _spans(trace, tr.KERNELS)
    expected = Counter({tr.stream_track(d, s): n for d, s, n in _sql(
        "SELECT deviceId, streamId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1, 2")})
    assert Counter(k.track for k in kernels) == expected and sum(expected.values()) > 1000
    rows = _sql("SELECT k.start, k.end, s.value, correlationId, gridX, gridY, gridZ, blockX, blockY, blockZ "
                "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName")
    assert sorted((k.start_ns, k.end_ns, k.name, k.attrs["correlation"], *k.attrs["grid"], *k.attrs["block"])
                  for k in kernels) == sorted(rows)

    copies = _spans(trace, tr.COPIES)
    by_kind = _sql("SELECT o.name, count(*), sum(bytes), lower(sk.label), lower(dk.label) "
                   "FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEMCPY_OPER o ON o.id = m.copyKind "
                   "JOIN ENUM_CUDA_MEM_KIND sk ON sk.id = srcKind "
                   "JOIN ENUM_CUDA_MEM_KIND dk ON dk.id = dstKind GROUP BY 1, 4, 5")
    assert len(by_kind) == 2  # host to device from pageable memory, and back
    for oper, n, total, src, dst in by_kind:
        mine = [c for c in copies if c.name == DIRECTIONS[oper.removeprefix("CUDA_MEMCPY_KIND_")]
                and (c.attrs["src_kind"], c.attrs["dst_kind"]) == (src, dst)]
        assert (len(mine), sum(c.attrs["bytes"] for c in mine)) == (n, total)
    assert len(copies) == _sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0]
    assert {c.track for c in copies} == {tr.copy_track(d) for (d,) in _sql(
        "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY")}

    # The capture has no memset table; the import says so rather than inventing one.
    assert not _sql("SELECT name FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_MEMSET'")
    assert "table CUPTI_ACTIVITY_KIND_MEMSET (no memset records)" in trace.meta["import"]["missing"]
    (gpu,) = _sql("SELECT g.name FROM TARGET_INFO_GPU g WHERE g.id = (SELECT deviceId FROM "
                  "CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)")
    assert trace.meta["devices"] == {"0": gpu[0]}


def test_host_calls_match_the_tables_by_name(trace):
    cuda = Counter(s.name for s in _spans(trace, tr.CUDA_API))
    sync_records = Counter({
        name.removeprefix("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_").lower().replace("unknown", "synchronize"): n
        for name, n in _sql("SELECT e.name, count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s "
                            "JOIN ENUM_CUPTI_SYNC_TYPE e ON e.id = s.syncType GROUP BY 1")})
    assert cuda == _names("CUPTI_ACTIVITY_KIND_RUNTIME") + sync_records
    assert sync_records == {"event_synchronize": 1312}
    # Rows of the process itself (thread id 0) are the profiler's markers, kept as instants.
    os_calls = Counter(s.name for s in _spans(trace, tr.OS_API))
    assert os_calls == _names("OSRT_API", "t.globalTid & 16777215 != 0")
    markers = Counter(trace.strings.values[i] for i in trace.instants.name.tolist())
    assert markers == _names("OSRT_API", "t.globalTid & 16777215 = 0")
    assert sum(markers.values()) == 3


def test_roles_count_what_the_tables_hold(trace):
    runtime = _names("CUPTI_ACTIVITY_KIND_RUNTIME")
    osrt = _names("OSRT_API", "t.globalTid & 16777215 != 0")

    def base(name):
        return re.sub(r"_v\d+$", "", name)

    assert {base(n) for n in runtime} <= BLOCKING | LAUNCHING | OTHER_CALLS  # every call is accounted for
    (n_sync_records,) = _sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")[0]
    expected = {
        "kernel": _sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0],
        "copy": _sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0],
        "sync": sum(n for name, n in runtime.items() if base(name) in BLOCKING) + n_sync_records,
        "launch": sum(n for name, n in runtime.items() if base(name) in LAUNCHING),
        "runtime": sum(n for name, n in runtime.items() if base(name) in OTHER_CALLS),
        "cond_wait": sum(n for name, n in osrt.items() if name in COND_WAITS),
        "os_call": sum(n for name, n in osrt.items() if name not in COND_WAITS | LOCK_WAITS),
    }
    assert roles.role_counts(trace) == expected
    assert expected["cond_wait"] == 12 and expected["sync"] > 2900


def test_tracks_parse_and_every_call_has_a_thread_of_its_process(trace):
    kinds = {tr.parse(t).kind for t in trace.tracks()}
    assert kinds == {tr.KERNELS, tr.COPIES, tr.CUDA_API, tr.OS_API}
    for track in trace.tracks():
        assert tr.build(tr.parse(track)) == track
    # One process: threads are named by their own id.
    threads = {tid for (tid,) in _sql(
        "SELECT DISTINCT globalTid & 16777215 FROM OSRT_API WHERE globalTid & 16777215 != 0 UNION "
        "SELECT DISTINCT globalTid & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    callers = set()
    for track in trace.tracks():
        parsed = tr.parse(track)
        if parsed.kind in (tr.CUDA_API, tr.OS_API):
            assert parsed.caller.kind == tr.THREAD
            callers.add(int(parsed.caller.name))
    assert callers == threads
    names = dict(_sql("SELECT t.globalTid & 16777215, s.value FROM ThreadNames t "
                      "JOIN StringIds s ON s.id = t.nameId"))
    assert trace.thread_names == {tr.thread_track(t): names[t] for t in threads if t in names}


def test_synchronisation_records_sit_on_the_thread_that_called(trace):
    callers = dict(_sql("SELECT s.correlationId, r.globalTid & 16777215 "
                        "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s "
                        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"))
    records = [s for s in trace.iter_spans() if s.name == "event_synchronize"]
    assert len(records) == len(callers)
    for record in records:
        assert record.track == tr.cuda_track(tr.thread_track(callers[record.attrs["correlation"]]))
    assert "sync_callers" not in trace.meta["import"]
    assert trace.meta["import"]["skipped"] == {}


@pytest.mark.parametrize(("name", "decoy"), [("x#y.sqlite", "x"), ("a%41.sqlite", "aA.sqlite"),
                                             ("q?mode=rwc.sqlite", "q")])
def test_the_file_named_is_the_file_read(tmp_path, monkeypatch, name, decoy):
    """`#`, `%` and `?` in a name belong to the name, not to the SQLite URI it is opened by."""
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(EXPORT, name)
    with sqlite3.connect(decoy) as conn:  # another export's skeleton, with one kernel in it
        conn.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT)")
        conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 2)")
    conn.close()
    (kernels,) = _sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0]
    for path in (Path(name), tmp_path / name):
        assert roles.role_counts(load_any(path))["kernel"] == kernels
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, decoy])
