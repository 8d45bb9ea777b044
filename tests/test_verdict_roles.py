"""Each idle cause of any GPU program on a small trace built on the track grammar, with the
expected figures worked out by hand; detectors run only where the trace has their roles."""

import pytest

from workbench.analysis import diagnose
from workbench.analysis.detectors import DETECTORS, Registered, runnable
from workbench.analysis.idle import idle_report
from workbench.analysis.program_findings import PROGRAM_DETECTORS
from workbench.model import tracks as tr
from workbench.render.verdict_text import render_verdict
from workbench.trace.container import Trace

MS = 1_000_000
KERNELS = tr.stream_track(0, 7)
COPIES = tr.copy_track(0)
T1 = tr.thread_track(1)
CUDA1, OS1 = tr.cuda_track(T1), tr.os_track(T1)


def span(track, name, start_ms, end_ms, **attrs):
    return (track, name, int(start_ms * MS), int(end_ms * MS), -1, -1, attrs or None)


def verdict_of(rows, **meta):
    trace = Trace.from_rows(rows, meta=meta)
    return trace, diagnose(trace)


def test_sync_wait():
    # Launch [0,1), kernel [1,41); the thread waits in a sync [2,71); launch [71,72), kernel [72,100).
    # Idle: [0,1) and [71,72) the launcher launching (2 ms), [41,71) waiting in the sync (30 ms).
    _, v = verdict_of([
        span(CUDA1, "cudaLaunchKernel", 0, 1), span(KERNELS, "k", 1, 41),
        span(CUDA1, "cudaDeviceSynchronize", 2, 71),
        span(CUDA1, "cudaLaunchKernel", 71, 72), span(KERNELS, "k", 72, 100),
    ])
    d = v.device[0]
    assert (d.window_ms, d.idle_ms) == (100, 32)
    assert (d.get("sync").ms, d.get("launch").ms) == (30, 2)
    assert v.headline == ("The GPU idles 32% of the 0.10 s trace; the largest cause: 30% while host thread 1 "
                          "waits in cudaDeviceSynchronize.")
    assert v.findings[0].id == "idle_sync" and v.findings[0].numbers["idle_ms"] == 30


def test_cpu_bound_launcher():
    # Ten launches of 2 ms, each followed by its 1 ms kernel: the GPU idles 20 of 30 ms.
    rows = []
    for k in range(10):
        rows += [span(CUDA1, "cudaLaunchKernel", 3 * k, 3 * k + 2), span(KERNELS, "k", 3 * k + 2, 3 * k + 3)]
    _, v = verdict_of(rows)
    launch = v.device[0].get("launch")
    assert launch.ms == 20 and launch.pieces == 10 and launch.share == pytest.approx(2 / 3)
    assert v.device[0].launchers == ("host thread 1",)
    assert v.headline.startswith("The GPU idles 67% of the 30.0 ms trace; the largest cause: 67% while host "
                                 "thread 1, which launches the GPU work, is busy in cudaLaunchKernel")
    assert v.findings[0].id == "idle_launch"


def test_copies_by_kind_against_the_fastest_pinned_copy():
    # A pageable copy of 20 MB in 20 ms (1 GB/s), a pinned one of 10 MB in 1 ms (10 GB/s), kernels after each.
    _, v = verdict_of([
        span(COPIES, "h2d", 0, 20, bytes=20_000_000, src_kind="pageable", dst_kind="device"),
        span(KERNELS, "k", 20, 30),
        span(COPIES, "h2d", 30, 31, bytes=10_000_000, src_kind="pinned", dst_kind="device"),
        span(KERNELS, "k", 31, 40),
    ])
    copy = v.device[0].get("copy")
    assert copy.ms == 21 and copy.share == pytest.approx(21 / 40)
    parts = [(p.what, p.ms) for p in copy.parts]
    assert parts == [("h2d pageable -> device", 20), ("h2d pinned -> device", 1)]
    assert v.copies.link.gbps == pytest.approx(10) and "pinned" in v.copies.link.source
    pageable = v.copies.pageable_h2d
    assert pageable.gbps == pytest.approx(1.0) and v.copies.link_share(pageable) == pytest.approx(0.1)
    f = v.get("pageable_copies")
    assert f.numbers["idle_ms"] == 20 and f.cost == pytest.approx(0.5)
    assert "10% of the 10.0 GB/s link (the fastest pinned copy in the trace)" in f.sentence
    # A link speed given on the command line comes first.
    given = diagnose(Trace.from_rows([span(COPIES, "h2d", 0, 20, bytes=20_000_000, src_kind="pageable",
                                           dst_kind="device"), span(KERNELS, "k", 20, 30)]),
                     _options(link_gbps=4.0))
    assert given.copies.link.source == "given" and given.copies.link_share(given.copies.pageable_h2d) == 0.25


def test_lock_wait_on_the_thread_that_drives_the_gpu():
    # Thread 1 launches at 9 ms and waits on a mutex [10,50) while the GPU idles; thread 2, which
    # never calls CUDA, sits in a condition wait the whole time: it does not hold the GPU back.
    t2 = tr.os_track(tr.thread_track(2))
    _, v = verdict_of([
        span(KERNELS, "k", 0, 10), span(CUDA1, "cudaLaunchKernel", 9, 9.5),
        span(OS1, "pthread_mutex_lock", 10, 50), span(KERNELS, "k", 50, 60),
        span(t2, "pthread_cond_wait", 0, 60),
    ])
    lock = v.device[0].get("lock")
    assert lock.ms == 40
    assert [(p.thread, p.what) for p in lock.parts] == [("host thread 1", "pthread_mutex_lock")]
    assert v.headline.endswith("the largest cause: 67% while host thread 1 waits on pthread_mutex_lock.")
    assert v.locks.waits.total_ms == 100 and v.locks.threads[0].key == "host thread 2"
    contention = v.get("lock_contention")
    assert contention.numbers["idle_ms"] == 40 and contention.numbers["wait_ms"] == 100


def test_foreign_lock_track():
    # A lock of the program's own, recorded on lock/queue: its wait [5,25) names no thread, and
    # counts although thread 1 is known to drive the GPU; its hold does not make the GPU wait.
    queue = tr.lock_track("queue")
    _, v = verdict_of([
        span(CUDA1, "cudaLaunchKernel", 0, 1), span(KERNELS, "k", 1, 5), span(queue, "wait", 5, 25),
        span(queue, "hold", 25, 30), span(CUDA1, "cudaLaunchKernel", 29, 30), span(KERNELS, "k", 30, 40),
    ])
    d = v.device[0]
    assert d.get("lock").ms == 20 and d.get("launch").ms == 2 and d.get("nothing").ms == 4
    assert v.headline.endswith("the largest cause: 50% while a host thread waits on lock queue.")
    assert [g.key for g in v.locks.locks] == ["queue"]


def test_host_work_and_nothing_queued():
    # Kernels [0,10) and [30,40); thread 5 reads [10,25); thread 3 sleeps in poll [10,30), which is no work.
    _, v = verdict_of([
        span(KERNELS, "k", 0, 10), span(KERNELS, "k", 30, 40),
        span(tr.os_track(tr.thread_track(5)), "read", 10, 25),
        span(tr.os_track(tr.thread_track(3)), "poll", 10, 30),
    ])
    d = v.device[0]
    assert (d.get("host").ms, d.get("nothing").ms) == (15, 5)
    assert v.headline == ("The GPU idles 50% of the 40.0 ms trace; the largest cause: 38% while host "
                          "thread 5 is busy in read.")
    # The trace has no launch or sync calls: those causes are named as not judged.
    assert any("launch gaps (no spans of role launch" in n for n in v.notes)
    assert any("synchronisation waits (no spans of role sync)" in n for n in v.notes)


def test_repeated_unit_decomposed():
    # Five profiler steps on thread 1: a 10 ms kernel each, then a sync wait of 5, 10, 20, 40, 80 ms.
    # Lengths 15, 20, 30, 50, 90 ms: mean 41, variance 744, CV sqrt(744)/41; the sync waits carry all of it.
    rows, t = [], 0
    for k, wait in enumerate((5, 10, 20, 40, 80)):
        rows += [span(T1, f"ProfilerStep#{k}", t, t + 10 + wait), span(KERNELS, "k", t, t + 10),
                 span(CUDA1, "cudaStreamSynchronize", t + 10, t + 10 + wait)]
        t += 10 + wait
    _, v = verdict_of(rows)
    u = v.units
    assert (u.name, u.source, u.durations.count) == ("ProfilerStep", "role unit", 5)
    assert u.durations.cv == pytest.approx(744 ** 0.5 / 41)
    assert u.get("kernels").constant and u.get("kernels").durations.median_ms == 10
    assert u.carrier.name == "sync waits" and u.carrier.variance_share == pytest.approx(1.0)
    f = v.get("unit_variation")
    assert f.numbers["lost_ms"] == pytest.approx((41 - 15) * 5)
    said = "sync waits carry 100% of the variation (5.0-80.0 ms an instance); kernels stay constant"
    assert said in f.sentence


def test_repeated_host_range_is_a_unit():
    rows = []
    for k in range(5):
        rows += [span(T1, "iteration", 10 * k, 10 * k + 5 + k), span(KERNELS, "k", 10 * k, 10 * k + 5)]
    u = verdict_of(rows)[1].units
    assert (u.name, u.source, u.durations.count) == ("iteration", "repeated host range", 5)
    assert u.carrier.name == "other host time" and u.get("kernels").durations.total_ms == 25


def test_recursive_range_counts_once_per_entry_and_host_time_alone_says_nothing():
    # fib calls itself: each entry from outside is one instance (3 of them), not one per level,
    # so fib is no repeated unit; "step" repeats 5 times, nests nothing, and holds only host time.
    rows = []
    for k in range(3):
        rows += [span(T1, "fib", 10 * k, 10 * k + 8), span(T1, "fib", 10 * k + 1, 10 * k + 7),
                 span(T1, "fib", 10 * k + 2, 10 * k + 6)]
    rows += [span(T1, "step", 30 + 3 * k, 30 + 3 * k + 0.5 * (k + 1)) for k in range(5)]
    trace, v = verdict_of(rows)
    u = v.units
    assert (u.name, u.durations.count) == ("step", 5) and not u.decomposed
    assert v.get("unit_variation") is None and "step (" not in render_verdict(v, trace)


def test_detectors_declare_roles_and_pipeline_ones_skip_foreign_traces():
    for d in (*DETECTORS, *PROGRAM_DETECTORS):
        assert isinstance(d, Registered) and (d.needs or d.any_of), d.id
    roles = {"kernel": 3, "copy": 1}
    run, skipped = runnable(DETECTORS, roles)
    assert run == () and all("consumer" in lacking for lacking in skipped)
    # On a trace with the pipeline's roles, the program-wide findings give way to the pipeline's.
    pipeline = {"kernel": 1, "copy": 1, "consumer": 5, "lock_hold": 2, "barrier_wait": 2, "producer": 2}
    run, skipped = runnable((*DETECTORS, *PROGRAM_DETECTORS), pipeline)
    assert {d.id for d in run} == {d.id for d in DETECTORS} and not skipped


def test_kernels_alone_are_not_a_pipeline():
    # A worker-less trace: the pipeline idle report must not call the whole window "every worker busy".
    trace, v = verdict_of([span(KERNELS, "k", 0, 10), span(KERNELS, "k", 20, 30)])
    assert all(c.cause != "proof_assembly" for r in idle_report(trace) for c in r.causes)
    text = render_verdict(v, trace)
    for word in ("worker", "partition", "mutex"):
        assert word not in text
    assert v.headline == ("The GPU idles 33% of the 30.0 ms trace; the largest cause: 33% with nothing "
                          "running and no host activity recorded.")


def test_gpu_bound_program():
    # Kernels 90 of 100 ms; the launcher's last 10 ms launch nothing: GPU-bound, said without a pipeline.
    trace, v = verdict_of([span(CUDA1, "cudaLaunchKernel", 0, 0.5), span(KERNELS, "k", 0.5, 90.5),
                           span(CUDA1, "cudaMemGetInfo", 90.5, 100)])
    assert v.get("gpu_bound").numbers["busy"] == pytest.approx(0.9)
    assert v.headline.startswith("The GPU idles 10% of the 0.10 s trace; the largest cause: 10% while host "
                                 "thread 1, which launches the GPU work, is busy in cudaMemGetInfo")
    text = render_verdict(v, trace)
    assert "mutex" not in text and "partition" not in text


def test_a_detector_names_only_real_roles():
    with pytest.raises(ValueError, match="no such role kernels"):
        Registered(lambda ctx: None, "nothing", needs=("kernels",))


def test_no_kernels_says_so():
    _, v = verdict_of([span(OS1, "read", 0, 5)])
    assert v.headline.startswith("No GPU kernels in the trace") and "os_call" in v.headline


def _options(**kw):
    from workbench.analysis import DiagnoseOptions
    return DiagnoseOptions(**kw)


def test_several_gpus_name_the_one_that_idles_most():
    # GPU 0 computes [0,100); GPU 1 computes [0,20) and [60,100), idle [20,60) while thread 1 syncs.
    _, v = verdict_of([
        span(tr.stream_track(0, 1), "k", 0, 100), span(tr.stream_track(1, 1), "k", 0, 20),
        span(CUDA1, "cudaStreamSynchronize", 15, 60), span(tr.stream_track(1, 1), "k", 60, 100),
    ])
    assert [d.gpu for d in v.device] == [0, 1] and v.device[0].idle_ms == 0
    assert v.headline == ("GPU 1 idles 40% of the 0.10 s trace; the largest cause: 40% while host thread 1 "
                          "waits in cudaStreamSynchronize.")
    assert v.findings[0].id == "idle_sync/gpu1" and v.gpus == ()
