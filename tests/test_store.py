import zipfile

import numpy as np
import pytest

from workbench.clock import FakeClock
from workbench.trace import Recorder, Trace, TraceFormatError, load, save, store


def sample_trace():
    clock = FakeClock(10)
    recorder = Recorder(clock=clock, nvtx=False)
    with recorder.span("worker/0", "ntt_msm_h", 3, 0) as span:
        clock.advance(500)
        span.set("bytes", 2**40)
    recorder.add_span("worker/0/prep", "prep_msm", 5, 900, 3, 0, {"ratio": 0.25, "ok": True})
    recorder.add_span("synth/1", "synthesis", 1, 2, 4, -1, {"mode": "pageable", "note": None})
    recorder.add_span("synth/1", "synthesis", 3, 7, 5, -1, {"mode": "zerocopy", "note": [1, "x"]})
    recorder.instant("run", "error", 3, 0, {"message": "boom ✓"})
    recorder.counter("pcie/h2d", "GB/s", 12.5, ts_ns=77)
    recorder.name_track("worker/0", "gpu-worker-0")
    return Trace.from_recorder(recorder, config={"seed": 1}, meta={"outcome": "failed"})


def as_rows(trace):
    return (list(trace.iter_spans()), list(trace.iter_instants()), list(trace.iter_counters()))


def test_round_trip_is_exact(tmp_path):
    trace = sample_trace()
    path = save(trace, tmp_path / "t.wbtrace")
    again = load(path)
    assert as_rows(again) == as_rows(trace)
    assert again.config == trace.config and again.meta == trace.meta
    assert again.thread_names == {"worker/0": "gpu-worker-0"}
    spans = {s.name: s for s in again.iter_spans()}
    assert spans["ntt_msm_h"].attrs["bytes"] == 2**40
    assert isinstance(spans["prep_msm"].attrs["ratio"], float)
    assert spans["prep_msm"].attrs["ok"] is True


def test_many_spans_round_trip(tmp_path):
    recorder = Recorder(nvtx=False)
    rng = np.random.default_rng()
    starts = rng.integers(0, 10**12, 200_000)
    for i, s in enumerate(starts.tolist()):
        recorder.add_span(f"synth/{i % 14}", "synthesis", s, s + i, i, -1, {"bytes": i} if i % 3 else None)
    trace = Trace.from_recorder(recorder)
    again = load(save(trace, tmp_path / "big.wbtrace"))
    assert np.array_equal(again.spans.start_ns, trace.spans.start_ns)
    assert np.array_equal(again.spans.end_ns, trace.spans.end_ns)
    assert again.spans.attrs == [{"bytes": i} if i % 3 else None for i in range(len(starts))]


def test_not_a_trace_missing_and_damaged_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no trace file"):
        load(tmp_path / "missing.wbtrace")
    junk = tmp_path / "junk.wbtrace"
    junk.write_text("hello")
    with pytest.raises(TraceFormatError, match=r"junk\.wbtrace is not a workbench trace"):
        load(junk)
    good = save(sample_trace(), tmp_path / "good.wbtrace")
    truncated = tmp_path / "cut.wbtrace"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(TraceFormatError, match=r"cut\.wbtrace"):
        load(truncated)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(TraceFormatError, match="no readable header"):
        load(other)


def test_newer_version_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "VERSION", store.VERSION + 1)
    path = save(sample_trace(), tmp_path / "new.wbtrace")
    monkeypatch.undo()
    with pytest.raises(TraceFormatError, match="newer workbench"):
        load(path)


def test_inconsistent_columns_are_damage(tmp_path):
    path = save(sample_trace(), tmp_path / "t.wbtrace")
    with zipfile.ZipFile(path) as z:
        entries = {name: z.read(name) for name in z.namelist()}
    np.save(tmp_path / "col.npy", np.array([0, 1, 2, 99, 100], dtype=np.int32))
    entries["spans.track.npy"] = (tmp_path / "col.npy").read_bytes()
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    with pytest.raises(TraceFormatError, match="damaged"):
        load(path)
