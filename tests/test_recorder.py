import threading

import pytest

from workbench.clock import FakeClock
from workbench.trace import Recorder, Trace


def test_span_scope_records_times_attrs_and_errors():
    clock = FakeClock(0)
    recorder = Recorder(clock=clock, nvtx=False)
    with recorder.span("worker/0", "batch_add", 2, 0, {"bytes": 8}) as span:
        clock.advance(30)
        span.set("points", 4)
    with pytest.raises(ZeroDivisionError), recorder.span("worker/0", "tail_msm", 2, 0):
        clock.advance(5)
        1 / 0  # noqa: B018
    first, second = Trace.from_recorder(recorder).iter_spans()
    assert (first.start_ns, first.end_ns, first.attrs) == (0, 30, {"bytes": 8, "points": 4})
    assert (second.start_ns, second.end_ns) == (30, 35)
    assert second.attrs["error"].startswith("ZeroDivisionError")


def test_concurrent_recording_loses_nothing():
    recorder = Recorder(nvtx=False)

    def work(thread):
        for i in range(5000):
            with recorder.span(f"synth/{thread}", "synthesis", i):
                pass

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    trace = Trace.from_recorder(recorder)
    assert len(trace.spans) == 40_000
    for t in range(8):
        partitions = trace.spans.partition[trace.span_mask(track=f"synth/{t}")]
        assert sorted(partitions.tolist()) == list(range(5000))


def test_drain_returns_only_new_rows():
    recorder = Recorder(nvtx=False)
    recorder.add_span("a", "x", 0, 1)
    spans, _, _, cursor = recorder.drain((0, 0, 0))
    assert len(spans) == 1
    recorder.add_span("a", "y", 1, 2)
    recorder.counter("pcie/h2d", "GB/s", 3.0)
    spans, instants, counters, cursor = recorder.drain(cursor)
    assert [s[1] for s in spans] == ["y"] and len(counters) == 1 and not instants
    assert recorder.drain(cursor)[:3] == ([], [], [])


def test_disabled_recorder_is_silent():
    recorder = Recorder(enabled=False)
    with recorder.span("t", "x"):
        pass
    recorder.instant("t", "i")
    recorder.counter("t", "c", 1)
    assert not (recorder.spans or recorder.instants or recorder.counters)
    assert not recorder.nvtx.available
