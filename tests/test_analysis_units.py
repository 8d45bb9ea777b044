"""The analysis building blocks on small hand-made traces, and interval arithmetic against
brute force."""

import numpy as np
import pytest
from golden import case
from hypothesis import given, settings
from hypothesis import strategies as st

import workbench.analysis as analysis
from workbench.analysis.distribution import Distribution, correlation
from workbench.analysis.intervals import Intervals, concurrency_ns
from workbench.analysis.locks import barrier_reports, mutex_reports
from workbench.analysis.phases import phase_report
from workbench.analysis.transfers import copy_rates, transfer_report
from workbench.trace.container import Trace

pairs = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=12).map(
    lambda xs: ([s for s, _ in xs], [s + d for s, d in xs]))


def _cover(starts, ends):
    covered = np.zeros(100, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        covered[s:e] = True
    return covered


def _as_array(intervals):
    return _cover(intervals.starts.tolist(), intervals.ends.tolist())


@settings(max_examples=150, deadline=None)
@given(pairs, pairs)
def test_interval_algebra_matches_brute_force(a, b):
    x, y = Intervals.of(*a), Intervals.of(*b)
    ca, cb = _cover(*a), _cover(*b)
    assert (_as_array(x) == ca).all()
    assert (np.diff(x.starts) > 0).all() and (x.starts[1:] > x.ends[:-1]).all()
    assert (_as_array(x.union(y)) == (ca | cb)).all()
    assert (_as_array(x.intersect(y)) == (ca & cb)).all()
    assert (_as_array(x.subtract(y)) == (ca & ~cb)).all()
    assert (_as_array(x.complement(10, 70)) == (~ca & (np.arange(100) >= 10) & (np.arange(100) < 70))).all()
    assert x.total() == ca.sum()
    times = np.arange(100)
    assert (x.contains(times) == ca).all()


@settings(max_examples=100, deadline=None)
@given(pairs, pairs)
def test_concurrency_is_the_summed_overlap(a, b):
    starts, ends = np.array(a[0], dtype=np.int64), np.array(a[1], dtype=np.int64)
    got = concurrency_ns(starts, ends, np.array(b[0], dtype=np.int64), np.array(b[1], dtype=np.int64))
    want = [sum(max(0, min(e, oe) - max(s, os)) for os, oe in zip(*b, strict=True))
            for s, e in zip(*a, strict=True)]
    assert got.tolist() == pytest.approx(want)


def test_distribution_and_correlation():
    d = Distribution.of([100, 100, 100, 400])
    assert (d.count, d.min_ms, d.median_ms, d.max_ms, d.swing) == (4, 100, 100, 400, 4)
    assert d.cv == pytest.approx(np.std([100, 100, 100, 400]) / 175)
    assert Distribution.of([]).count == 0
    assert correlation(np.array([1, 2, 3]), np.array([2, 4, 6])) == pytest.approx(1)
    assert correlation(np.array([1, 1, 1]), np.array([2, 4, 6])) is None


MS = 1_000_000


def _lock_trace():
    """Worker 1 asks while worker 0 holds (a hand-off 1 ms later); worker 0 comes back to a
    free mutex after an idle gap; the barrier makes the GPU thread wait for prep once."""
    spans = [
        ("mutex/gpu0", "wait", 0, 0, 0, 0, None),
        ("mutex/gpu0", "hold", 0, 10 * MS, 0, 0, None),
        ("mutex/gpu0", "wait", 2 * MS, 11 * MS, 1, 1, None),
        ("mutex/gpu0", "hold", 11 * MS, 20 * MS, 1, 1, None),
        ("mutex/gpu0", "wait", 25 * MS, 25 * MS, 2, 0, None),
        ("mutex/gpu0", "hold", 25 * MS, 30 * MS, 2, 0, None),
        ("barrier/worker0", "wait", 4 * MS, 7 * MS, 0, 0, {"party": "gpu"}),
        ("barrier/worker0", "wait", 7 * MS, 7 * MS, 0, 0, {"party": "prep"}),
        ("barrier/worker0", "wait", 27 * MS, 28 * MS, 2, 0, {"party": "prep"}),
        ("barrier/worker0", "wait", 28 * MS, 28 * MS, 2, 0, {"party": "gpu"}),
    ]
    instants = [("run", "run_start", 0, -1, -1, None), ("run", "run_end", 40 * MS, -1, -1, None)]
    return Trace.from_rows(spans, instants)


def test_mutex_gaps_ceiling_and_waits():
    (m,) = mutex_reports(_lock_trace())
    assert m.handoff_gaps.count == 1 and m.handoff_gaps.total_ms == pytest.approx(1)
    assert m.idle_gaps.count == 1 and m.idle_gaps.total_ms == pytest.approx(5)
    assert m.held_fraction == pytest.approx(24 / 40)
    assert m.ceiling_per_min == pytest.approx(60_000 / 8)
    assert m.achieved_per_min == pytest.approx(3 / 40 * 60_000)
    assert [w.waits.max_ms for w in m.workers] == [0, 9]
    assert m.longest_waits == (2,)


def test_barrier_rounds_say_who_waited_for_whom():
    (b,) = barrier_reports(_lock_trace())
    assert b.rounds == 2 and b.prep_last == 1 and b.gpu_last == 1
    assert b.gpu_waited.total_ms == pytest.approx(3) and b.prep_waited.total_ms == pytest.approx(1)
    assert b.gpu_wait_spans == (6,)


def test_lock_phase_shares_sum_to_one_when_the_hold_is_their_sum():
    report = phase_report(case("copy_bound"))
    lock_phases = ("ntt_msm_h", "barrier_wait", "batch_add", "tail_msm")
    shares = [report.get(p).hold_variance_share for p in lock_phases]
    assert sum(s or 0 for s in shares) == pytest.approx(1, abs=0.01)
    assert report.get("ntt_msm_h").hold_variance_share > 0.95
    assert set(report.constant) >= {"batch_add", "tail_msm", "b_g2_msm"}
    assert "ntt_msm_h" in report.variable
    # Copies are slower when more synthesis threads run beside them.
    assert report.get("h2d_copy").synth_correlation > 0.9


def test_link_speed_comes_from_the_caller_then_the_runs_probe_then_the_device():
    trace = case("balanced")  # pinned device copies at 50 GB/s
    assert transfer_report(trace, link_gbps=64).link.source == "given"
    measured = transfer_report(trace).link
    assert measured.gbps == pytest.approx(50, rel=1e-3) and "timed on the device" in measured.source
    # The run's own probe wins over copies seen during the run (bounce-buffer chunks of
    # pageable copies under host load ran well below the link).
    trace.meta["link_gbps"] = 54.0
    probed = transfer_report(trace).link
    assert probed.gbps == 54.0 and probed.source == "measured by the run"
    plain = case("prep_bound")
    assert transfer_report(plain).link is None
    plain.meta["link_gbps"] = 55.0
    assert transfer_report(plain).link.source == "measured by the run"
    # Copy sizes for logs that carry none are spread over a partition's copies.
    for span_attrs in plain.spans.attrs:
        if span_attrs and "bytes" in span_attrs:
            del span_attrs["bytes"]
    assert transfer_report(plain).rates is None
    assert transfer_report(plain, copy_bytes=12.5e9).bytes_total == pytest.approx(12.5e9 * 12)


def test_the_public_surface():
    for name in analysis.__all__:
        assert getattr(analysis, name) is not None
    assert {"diagnose", "diff", "predict", "utilisation", "idle_report", "phase_report", "transfer_report",
            "mutex_reports", "barrier_reports", "summarize"} <= set(analysis.__all__)


def test_copies_timed_on_the_device_give_the_link_and_the_hidden_staging():
    spans = []
    for p, (source, host_ms, device_ms) in enumerate([("pinned", 20, 20), ("pageable", 100, 25),
                                                      ("pageable", 60, 25)]):
        spans.append(("worker/0", "h2d_copy", p * 200 * MS, (p * 200 + host_ms) * MS, p, 0,
                      {"bytes": 1_000_000_000, "source": source, "device_ms": float(device_ms)}))
    report = transfer_report(Trace.from_rows(spans))
    assert report.link.gbps == pytest.approx(50) and report.link.source.endswith("timed on the device")
    assert report.hidden_staging_ms == pytest.approx(75 + 35)
    assert report.device_rates.count == 3 and report.device_rates.max == pytest.approx(50)
    assert report.rates.median == pytest.approx(1e9 / 60e6)
    rows = copy_rates(Trace.from_rows(spans))
    assert [(r.source, r.host_ms, r.device_ms) for r in rows] == [
        ("pinned", 20, 20), ("pageable", 100, 25), ("pageable", 60, 25)]
    assert rows[1].gbps == pytest.approx(10)


def test_verdict_notes_synthesis_threads_sharing_the_interpreter_lock():
    from workbench.analysis import diagnose
    from workbench.config import RunConfig
    from workbench.pipeline.run import run_pipeline

    many = run_pipeline(RunConfig(backend="cpu", log2_constraints=8, partitions=2, synth_threads=4)).trace
    few = run_pipeline(RunConfig(backend="cpu", log2_constraints=8, partitions=2, synth_threads=2)).trace
    procs = run_pipeline(RunConfig(backend="cpu", log2_constraints=8, partitions=2, synth_threads=4,
                                   synthesis="processes")).trace
    assert any("take turns on its lock" in n for n in diagnose(many).notes)
    assert not any("take turns on its lock" in n for n in diagnose(few).notes)
    assert not any("take turns on its lock" in n for n in diagnose(procs).notes)
