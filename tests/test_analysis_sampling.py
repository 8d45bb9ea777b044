"""A recording that sampled its kernels (`workbench record --cuda-mode sampled`): the GPU's busy
and idle time judged inside the sampling windows, never across the time between them, where
kernels ran unrecorded and only their launches (host calls) are in the trace."""

from __future__ import annotations

import pytest

from workbench.analysis.device_idle import device_idle
from workbench.analysis.sampling import judged_windows
from workbench.analysis.utilisation import utilisation
from workbench.analysis.verdict import diagnose
from workbench.clock import FakeClock
from workbench.model import tracks as tr
from workbench.trace.container import Trace
from workbench.trace.recorder import Recorder, SpanRow

US = 1000
LAUNCH_EVERY, LAUNCH_TAKES, KERNEL_TAKES = 20 * US, 3 * US, 5 * US
WINDOWS = [(10_000 * US, 12_000 * US), (20_000 * US, 22_000 * US), (30_000 * US, 32_000 * US)]


def sampled_trace(windows: bool = True) -> Trace:
    """A launch-bound loop: a launch every 20 us for 40 ms, each kernel 5 us on the GPU, 2 us
    after its launch returns; kernel records only for launches made inside a window."""
    recorder = Recorder(FakeClock(), nvtx=False)
    rows: list[SpanRow] = []
    for n, at in enumerate(range(0, 40_000 * US, LAUNCH_EVERY)):
        end = at + LAUNCH_TAKES
        rows.append((tr.cuda_track(tr.thread_track(11)), "cudaLaunchKernel_v7000", at, end, -1, -1,
                     {"kernel": "tiny", "correlation": n}))
        if any(a <= at and end <= b for a, b in WINDOWS):
            rows.append((tr.stream_track(0, 7), "tiny", end + 2 * US, end + 2 * US + KERNEL_TAKES, -1, -1,
                         {"correlation": n}))
    if windows:
        rows += [(tr.SAMPLED_TRACK, "window", a, b, -1, -1, {"number": k})
                 for k, (a, b) in enumerate(WINDOWS)]
    recorder.add_spans(rows)
    return Trace.from_recorder(recorder)


def test_idle_judged_inside_the_windows_only() -> None:
    trace = sampled_trace()
    judged = judged_windows(trace)
    assert judged is not None and len(judged) == 3
    (d,) = device_idle(trace)
    # In a window the GPU runs 5 us of every 20: busy a quarter of the judged time, from the
    # first kernel of each window to the end of its last.
    assert d.sampled_windows == 3
    assert d.busy_ms / d.window_ms == pytest.approx(KERNEL_TAKES / LAUNCH_EVERY, rel=0.02)
    assert d.window_ms == pytest.approx(3 * 2.0, rel=0.02)
    assert d.before_first_ms == 0 and d.after_last_ms == 0
    # Idle while the launching thread is in its launch calls (3 us of each 20) or in work of its
    # own the trace does not hold.
    causes = {c.cause: c.ms for c in d.causes}
    assert set(causes) == {"launch", "nothing"}
    assert causes["launch"] / d.window_ms == pytest.approx(LAUNCH_TAKES / LAUNCH_EVERY, rel=0.05)
    (u,) = utilisation(trace)
    assert u.kernel_busy == pytest.approx(KERNEL_TAKES / LAUNCH_EVERY, rel=0.02)
    verdict = diagnose(trace)
    assert "sampled in 3 windows" in verdict.headline and "75%" in verdict.headline


def test_without_its_windows_the_same_trace_looks_idle() -> None:
    """What the windows prevent: the GPU judged over the whole trace, as if unrecorded kernels
    had not run (why the windows must be in the trace)."""
    (d,) = device_idle(sampled_trace(windows=False))
    assert d.sampled_windows == 0 and d.busy_ms / d.window_ms < 0.05
    assert judged_windows(sampled_trace(windows=False)) is None


def test_host_timed_launches_alone_are_no_gpu_time() -> None:
    """`--cuda-mode launches`: launches and no kernel record: nothing is said of the GPU's idle
    time, and the launches stay host calls, whichever launch call the shim timed (the
    runtime's own entry of a `<<<...>>>` launch and the old launch calls among them)."""
    calls = ("cudaLaunchKernel_v7000", "__cudaLaunchKernel_v13000", "cudaLaunch_v3020", "cuLaunchGrid",
             "cuLaunchKernelEx")
    recorder = Recorder(FakeClock(), nvtx=False)
    recorder.add_spans([(tr.cuda_track(tr.thread_track(11)), calls[n % len(calls)], at, at + LAUNCH_TAKES,
                         -1, -1, {"kernel": "tiny", "correlation": n})
                        for n, at in enumerate(range(0, 1000 * US, LAUNCH_EVERY))])
    host_function = (tr.cuda_track(tr.thread_track(11)), "cudaLaunchHostFunc_v10000", 0, 10, -1, -1, None)
    recorder.add_spans([host_function])
    trace = Trace.from_recorder(recorder)
    assert device_idle(trace) == ()
    verdict = diagnose(trace)
    assert verdict.roles == {"launch": 50, "runtime": 1}  # a host function queued is no GPU work
    assert "No GPU kernels in the trace" in verdict.headline
    assert utilisation(trace) == ()
