"""nsys SQLite exports, built to the documented schema: a capture of a workbench run reads
back onto the workbench's tracks; missing tables and columns are named, not fatal."""

import sqlite3

import pytest
from nsys_fixture import SCHEMA, export_like_nsys

from workbench.analysis import summarize
from workbench.config import RunConfig
from workbench.importers import ImportFailed, load_any, load_nsys
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend


@pytest.fixture(scope="module")
def run_trace():
    config = RunConfig(backend="cpu", log2_constraints=6, partitions=6, gpu_workers=2, synth_threads=2)
    return Pipeline(config, CpuBackend()).run().trace


def _by_key(trace):
    return {(s.track, s.name, s.start_ns): s for s in trace.iter_spans()}


def test_a_capture_of_a_workbench_run_reads_back_onto_its_tracks(run_trace, tmp_path):
    first = run_trace.time_range()[0]
    path = export_like_nsys(run_trace, tmp_path / "run.sqlite",
                            kernels=[(first + 100, first + 900, "ntt_kernel")],
                            copies=[(first + 50, first + 90, 4096, 1)])
    imported = load_any(path)
    original, got = _by_key(run_trace), _by_key(imported)
    workbench_spans = [k for k in original if not k[0].startswith("run")]
    # Every span of the run is there, on its track, with its times and worker.
    for key in workbench_spans:
        assert (got[key].end_ns, got[key].worker) == (original[key].end_ns, original[key].worker), key
    # Partitions are inferred (NVTX carries no ids) and numbered in the order synthesis
    # started, which may differ from the order they were claimed; but every span of one
    # partition gets the same number, and no two partitions share one.
    labels = {(original[k].partition, got[k].partition) for k in workbench_spans}
    assert len(labels) == len({a for a, _ in labels}) == len({b for _, b in labels}) == 6
    a, b = summarize(run_trace), summarize(imported)
    assert b.partitions_done == 6
    assert [p.count for p in b.phases] == [p.count for p in a.phases]
    assert b.mutex == a.mutex
    assert imported.thread_names == run_trace.thread_names
    (kernel,) = imported.select(track_prefix="gpu0/stream/")
    assert (kernel.track, kernel.name, kernel.duration_ns) == ("gpu0/stream/7", "ntt_kernel", 800)
    (copy,) = imported.select(track="gpu0/copy")
    assert copy.name == "h2d" and copy.attrs == {"stream": 13, "bytes": 4096, "src_kind": "pinned",
                                                 "dst_kind": "device"}
    (call,) = imported.select(name="pthread_mutex_lock")
    assert call.track == "os/worker/0"
    assert "missing" not in imported.meta["import"]


def test_without_thread_names_roles_come_from_the_ranges(run_trace, tmp_path):
    path = export_like_nsys(run_trace, tmp_path / "anon.sqlite", thread_names=False, inline_text=True,
                            tables=tuple(t for t in SCHEMA if t != "ThreadNames"))
    imported = load_nsys(path)
    assert "table ThreadNames (threads named by id)" in imported.meta["import"]["missing"]
    b = summarize(imported)
    assert b.partitions_done == 6
    # Without names, workers are numbered in the order they started work.
    def holds(summary):
        return sorted((m.holds, m.held_ms, m.waited_ms) for m in summary.mutex)
    assert holds(b) == holds(summarize(run_trace))
    tracks = set(imported.tracks())
    assert {"worker/0", "worker/1", "worker/0/prep", "worker/1/prep", "mutex/gpu0"} <= tracks
    # Prep threads pair with their worker: their barrier waits end together.
    for span in imported.select(name="prep_msm"):
        assert span.track == f"worker/{span.worker}/prep"


def test_prep_threads_pair_with_their_workers_when_their_barrier_ends_are_recorded_late(run_trace, tmp_path):
    # A thread released by the barrier records its range's end when it next runs: on a busy
    # host that is microseconds to milliseconds after its party's. Delay every prep thread's
    # barrier ends by 2.5-40 us (a different one each), and let the prep thread that started
    # later open a range first (so the order threads started in says nothing): the pairing
    # must still follow the barrier.
    path = export_like_nsys(run_trace, tmp_path / "late.sqlite", thread_names=False, inline_text=True,
                            tables=tuple(t for t in SCHEMA if t != "ThreadNames"))
    with sqlite3.connect(path) as conn:
        firsts = conn.execute("SELECT globalTid, MIN(start) FROM NVTX_EVENTS WHERE text = 'prep_msm' "
                              "GROUP BY globalTid ORDER BY 2").fetchall()
        preps = [tid for tid, _ in firsts]
        rows = conn.execute("SELECT rowid, globalTid FROM NVTX_EVENTS WHERE text = 'barrier_wait'").fetchall()
        late = [(2_500 + 7_500 * (k % 6), rowid) for k, (rowid, tid) in enumerate(rows) if tid in preps]
        conn.executemany("UPDATE NVTX_EVENTS SET end = end + ? WHERE rowid = ?", late)
        conn.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                     "SELECT start, start + 10, eventType, 'warm_up', ?, domainId FROM NVTX_EVENTS "
                     "WHERE globalTid = ? ORDER BY start LIMIT 1", (preps[1], preps[0]))
        conn.execute("UPDATE NVTX_EVENTS SET start = start - 1000, end = end - 1000 WHERE text = 'warm_up'")
    assert len(preps) == 2 and late
    imported = load_nsys(path)
    # Workers are numbered by when they started: map the run's numbers to the import's.
    worker_of_start = {s.start_ns: s.worker for s in imported.iter_spans() if s.track.startswith("worker/")}
    renumber = {s.worker: worker_of_start[s.start_ns] for s in run_trace.iter_spans()
                if s.track == f"worker/{s.worker}" and s.start_ns in worker_of_start}
    served = {s.start_ns: renumber[s.worker] for s in run_trace.select(name="prep_msm")}
    spans = imported.select(name="prep_msm")
    assert len(spans) == 6 and len(set(renumber.values())) == 2
    for span in spans:
        assert (span.track, span.worker) == (f"worker/{served[span.start_ns]}/prep", served[span.start_ns])


def test_missing_tables_and_columns_are_named_not_fatal(run_trace, tmp_path):
    path = export_like_nsys(
        run_trace, tmp_path / "old.sqlite", tables=("StringIds", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL"),
        drop_columns={"NVTX_EVENTS": ("domainId",), "CUPTI_ACTIVITY_KIND_KERNEL": ("shortName",)},
        kernels=[(5, 10, "k")])
    imported = load_nsys(path)
    missing = imported.meta["import"]["missing"]
    assert "table CUPTI_ACTIVITY_KIND_MEMCPY (no memory copy records)" in missing
    assert "table OSRT_API (no OS runtime calls)" in missing
    assert "column NVTX_EVENTS.domainId" in missing
    assert "column CUPTI_ACTIVITY_KIND_KERNEL.shortName" in missing
    (kernel,) = imported.select(track_prefix="gpu0/")
    assert kernel.name == "k(args)"  # the demangled name stands in for the short one
    assert summarize(imported).partitions_done == 6


def test_ranges_of_other_domains_are_kept_on_their_thread_and_broken_rows_skipped(run_trace, tmp_path):
    path = export_like_nsys(run_trace, tmp_path / "mixed.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                     "VALUES (1, 2, 59, 'other', 5, 99)")
        conn.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                     "VALUES (5, 3, 59, 'backwards', 5, 7)")
        conn.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                     "VALUES (5, NULL, 59, 'open', 5, 7)")
        conn.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                     "VALUES (5, 6, 61, 'payload', 5, 7)")
    imported = load_nsys(path)
    assert imported.meta["import"]["skipped"] == {
        "NVTX_EVENTS row ending before it starts": 1, "NVTX range never closed": 1, "NVTX event type 61": 1}
    # A range of another domain (here one never registered by name) stays on its own thread;
    # globalTid 5 is of process 0, beside the run's process, so the track names both ids.
    (other,) = imported.select(name="other")
    assert (other.track, other.attrs) == ("thread/0.5", {"domain": "#99"})
    assert summarize(imported).partitions_done == 6


def test_another_domains_ranges_on_a_pipeline_thread_stay_off_the_pipelines_tracks(run_trace, tmp_path):
    path = export_like_nsys(run_trace, tmp_path / "library.sqlite")
    with sqlite3.connect(path) as conn:
        (worker_thread,) = conn.execute("SELECT globalTid FROM OSRT_API").fetchone()  # worker/0's thread
        conn.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, domainId) "
                     "VALUES (0, 75, 'library', 8)")
        conn.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                     "VALUES (?, ?, 59, 'gemm', ?, 8)", (*run_trace.time_range(), worker_thread))
    imported = load_nsys(path)
    (gemm,) = imported.select(name="gemm")
    own = f"thread/{worker_thread & 0xFFFFFF}"
    assert (gemm.track, gemm.attrs) == (own, {"domain": "library"})
    assert imported.thread_names[own] == imported.thread_names["worker/0"]
    a, b = summarize(run_trace), summarize(imported)
    assert [p.count for p in b.phases] == [p.count for p in a.phases] and b.mutex == a.mutex


def test_files_that_are_not_exports_are_refused(tmp_path):
    empty = tmp_path / "empty.sqlite"
    with sqlite3.connect(empty) as conn:
        conn.execute("CREATE TABLE notes (x INT)")
    with pytest.raises(ImportFailed, match=r"no NVTX_EVENTS, .* table \(tables: notes\)"):
        load_nsys(empty)
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"SQLite format 3\x00" + b"\x00garbage" * 100)
    with pytest.raises(ImportFailed, match="not a readable"):
        load_any(broken)
