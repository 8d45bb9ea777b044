"""The grid reading of runs: per-run figures and what-if replays checked against the run
that made the change. On recorded traces (CPU what-if fixtures and the H200 case study)."""

from pathlib import Path

import numpy as np
import pytest

from workbench.analysis import Change
from workbench.analysis.grid import active_window_ns, cell_metrics, check_prediction, phase_spread
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


def test_the_h200_pageable_run_shows_the_copy_symptom():
    """The recorded case study: pageable copies far below the link, ntt_msm_h swinging while
    batch_add and tail_msm stay flat; zerocopy copies near the link."""
    pageable = cell_metrics(load(H200 / "pageable_t14_w2.wbtrace"))
    zerocopy = cell_metrics(load(H200 / "zerocopy_t14_w2.wbtrace"))
    assert pageable.copy_gbps_median < 10 < 40 < zerocopy.copy_gbps_median
    assert pageable.phases["ntt_msm_h"].steady_spread > 1.9
    assert pageable.phases["batch_add"].cv < 0.15 and pageable.phases["tail_msm"].cv < 0.15
    assert pageable.phases["ntt_msm_h"].median_ms > 2 * zerocopy.phases["ntt_msm_h"].median_ms
    assert "copy_bound" in pageable.findings
    assert np.isclose(pageable.link_gbps, zerocopy.link_gbps, rtol=0.1)


def test_h200_replays_at_the_measured_synthesis_speed_land_within_ten_percent():
    """The recorded grid's runs drifted in synthesis speed; replayed with the measured run's
    synthesis, the lock-scope and worker-count changes predict the measured throughput."""
    base = load(H200 / "zerocopy_t14_w2.wbtrace")
    for change, cell in ((Change(lock_scope="compute"), "zerocopy_t14_w2_compute"),
                         (Change(gpu_workers=1), "zerocopy_t14_w1")):
        check = check_prediction(base, change, load(H200 / f"{cell}.wbtrace"))
        assert check.synthesis_ratio > 1.1  # the measured run synthesised faster
        assert abs(check.error) > 0.1  # as recorded, the replay misses by more than 10%
        assert abs(check.error_same_synthesis) < 0.1
