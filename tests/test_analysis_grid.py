"""The grid reading of runs: per-run figures and what-if replays checked against the run
that made the change. On recorded traces (CPU what-if fixtures and the H200 case study)."""

from pathlib import Path

import pytest

from workbench.analysis import Change, WhatIfOptions, diagnose
from workbench.analysis.grid import active_window_ns, cell_metrics, check_prediction, phase_spread
from workbench.analysis.utilisation import steady_window_ns
from workbench.trace import load
from workbench.trace.container import Trace

DATA = Path(__file__).parent / "data" / "whatif"
H200 = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "h200_2e22"


def test_phase_spread_leaves_out_each_workers_first_partition():
    rows = []
    # worker 0: a slow first partition, then steady; worker 1 steady throughout
    for k, (worker, ms) in enumerate([(0, 500), (1, 100), (0, 100), (1, 110), (0, 120), (1, 100)]):
        start = k * 1_000_000_000
        rows.append((f"worker/{worker}", "ntt_msm_h", start, start + ms * 1_000_000, k, worker, None))
    spread = phase_spread(Trace.from_rows(rows), "ntt_msm_h")
    assert spread is not None and spread.count == 6
    assert spread.spread == pytest.approx(5.0)
    # without partition 0 (worker 0's first) and partition 1 (worker 1's first)
    assert spread.steady_spread == pytest.approx(120 / 100)
    assert spread.median_ms == pytest.approx(105)


def test_cell_metrics_of_a_recorded_cpu_run():
    trace = load(DATA / "w2.wbtrace")
    m = cell_metrics(trace)
    assert m.partitions == len(trace.select(name="finish"))
    assert m.throughput_per_min > 0
    assert set(m.phases) == {"ntt_msm_h", "batch_add", "tail_msm"}
    assert m.mutex_ceiling_per_min >= m.throughput_per_min
    start, end = active_window_ns(trace)
    holds = trace.select(name="hold", track_prefix="mutex/")
    assert start == min(h.start_ns for h in holds) and end == max(h.end_ns for h in holds)
    assert m.kernel_busy is None  # a CPU run has no device records
    assert m.findings and m.headline


def test_check_prediction_compares_the_replay_with_the_run_that_made_the_change():
    base, measured = load(DATA / "w1.wbtrace"), load(DATA / "w2.wbtrace")
    check = check_prediction(base, Change(gpu_workers=2), measured)
    assert check.failed is None
    assert check.measured_per_min == pytest.approx(cell_metrics(measured).throughput_per_min)
    assert check.error == pytest.approx(check.predicted_per_min / check.measured_per_min - 1)
    assert abs(check.replay_error) < 0.1


def test_check_prediction_reports_a_replay_it_cannot_make():
    trace = load(DATA / "w1.wbtrace")
    check = check_prediction(trace, Change(copies_at_link=True), trace)  # no link speed known
    assert check.predicted_per_min is None and check.error is None and check.failed


# The case study as recorded now, and the four main runs of a sitting with the earlier (slower)
# kernels: the production symptom and the replays hold in both.
EARLIER = H200.with_name("h200_2e22_earlier_kernels")
SITTINGS = (H200, EARLIER)
IDS = ["now", "earlier_kernels"]


def _kernel_ms_inside(trace, phase):
    """Per span of `phase`, the device's kernel time recorded inside it (ms)."""
    import numpy as np

    spans = list(trace.iter_spans())
    kernels = np.array([(s.start_ns, s.end_ns) for s in spans if "/stream/" in s.track])
    out = []
    for s in spans:
        if s.name == phase:
            inside = (kernels[:, 0] >= s.start_ns) & (kernels[:, 1] <= s.end_ns)
            out.append(float((kernels[inside, 1] - kernels[inside, 0]).sum()) / 1e6)
    return out


@pytest.mark.parametrize("data", SITTINGS, ids=IDS)
def test_the_h200_loaded_pageable_run_shows_the_copy_symptom(data):
    """The recorded case study, host loaded by 14 streaming threads: pageable copies far below
    the link, ntt_msm_h swinging 2x while the kernels of the other phases stay constant;
    zerocopy copies near the link."""
    trace = load(data / "pageable_t14_w2_load14.wbtrace")
    pageable = cell_metrics(trace)
    zerocopy = cell_metrics(load(data / "zerocopy_t14_w2_load14.wbtrace"))
    assert pageable.copy_gbps_median < 2 < 25 < zerocopy.copy_gbps_median
    assert pageable.phases["ntt_msm_h"].steady_spread >= 2.0
    # tail_msm's span varies with the load too in the recent sitting (CV 19%: its host-side
    # work), but the device's kernels inside it do not.
    tail_kernels = _kernel_ms_inside(trace, "tail_msm")
    assert len(tail_kernels) == 40 and max(tail_kernels) < 1.05 * min(tail_kernels)
    assert pageable.findings[0] == "copy_bound"
    assert zerocopy.throughput_per_min > 1.4 * pageable.throughput_per_min
    sentence = diagnose(trace).findings[0].sentence
    assert "ntt_msm_h swings 2." in sentence and "GB/s" in sentence
    assert "host memory was loaded beside the run by 14 streaming threads" in sentence


def test_the_earlier_h200_zerocopy_run_kept_the_kernels_busy_in_steady_state():
    trace = load(EARLIER / "zerocopy_t14_w2.wbtrace")
    m = cell_metrics(trace)
    assert m.kernel_busy_steady >= 0.85 > m.kernel_busy  # the fill and drain are outside it
    assert m.mutex_held_steady > 0.99
    assert m.device_copy_gbps_median > 45
    assert m.phases["ntt_msm_h"].spread < 1.3
    assert m.findings[0] == "gpu_bound"
    verdict = diagnose(trace)
    assert "ntt_msm_h is the largest" in verdict.findings[0].sentence  # just ahead of tail_msm
    assert verdict.findings[0].numbers["steady_busy"] == pytest.approx(m.kernel_busy_steady)


def test_with_faster_kernels_the_zerocopy_hold_is_a_quarter_host_work_and_the_verdict_says_so():
    """The recent sitting: the kernels got faster, the host's work inside the hold did not, so
    the mutex is held back to back but the device computes about three quarters of it. The
    verdict's share of the hold that is not GPU compute (over every hold) agrees with the grid's
    steady-state kernel busy over mutex held (device records over the steady window)."""
    trace = load(H200 / "zerocopy_t14_w2.wbtrace")
    m = cell_metrics(trace)
    assert m.mutex_held_steady > 0.99 and m.device_copy_gbps_median > 45
    assert 0.6 < m.kernel_busy_steady < 0.85
    first = diagnose(trace).findings[0]
    assert first.id == "lock_serialised"
    assert first.numbers["not_compute_share"] == pytest.approx(1 - m.kernel_busy_steady / m.mutex_held_steady,
                                                               abs=0.02)


@pytest.mark.parametrize("data", SITTINGS, ids=IDS)
def test_h200_copies_at_link_speed_predict_zerocopy(data):
    # Measured: -5.4% now, +1.9% with the earlier kernels.
    base = load(data / "pageable_t14_w2.wbtrace")
    check = check_prediction(base, Change(copies_at_link=True), load(data / "zerocopy_t14_w2.wbtrace"),
                             WhatIfOptions(link_gbps=base.meta["link_gbps"]))
    assert check.failed is None and abs(check.error) < 0.1


def test_h200_lock_scope_and_worker_replays_land_within_five_percent_at_the_runs_synthesis_speed():
    """Each replay against the run that made the change, with synthesis at that run's speed:
    runs of the grid drift in synthesis speed (0.78-0.82x of the base here) and the compute-scope
    and three-worker runs were starved by it. One worker exposes prep_msm at the barrier,
    including the wait before prep starts (about 23 ms after the pickup, recorded): a replay that
    started prep at the pickup missed the one-worker run by 15%."""
    base = load(H200 / "zerocopy_t14_w2.wbtrace")
    for change, cell in ((Change(lock_scope="compute"), "zerocopy_t14_w2_compute"),
                         (Change(gpu_workers=1), "zerocopy_t14_w1"),
                         (Change(gpu_workers=3), "zerocopy_t14_w3")):
        check = check_prediction(base, change, load(H200 / f"{cell}.wbtrace"))
        assert abs(check.error_same_synthesis) < 0.05, (cell, check.error_same_synthesis)
    one = check_prediction(base, Change(gpu_workers=1), load(H200 / "zerocopy_t14_w1.wbtrace"))
    assert abs(one.error) < 0.08  # measured +5.9% as the runs were, synthesis drift included


def test_steady_window_starts_after_every_workers_first_hold_and_ends_before_the_last():
    rows = []
    for k in range(8):  # workers alternate: holds 0..7, worker k % 2
        rows.append(("mutex/gpu0", "hold", k * 100, k * 100 + 90, k, k % 2, None))
    assert steady_window_ns(Trace.from_rows(rows)) == (190, 600)
    assert steady_window_ns(Trace.from_rows(rows[:4])) is None  # two holds a worker: no steady state
