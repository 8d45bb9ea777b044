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


SITTINGS = (H200, H200.with_name("h200_2e22_repeat"))


@pytest.mark.parametrize("data", SITTINGS, ids=["first", "repeat"])
def test_the_h200_loaded_pageable_run_shows_the_copy_symptom(data):
    """The recorded case study, host loaded by 14 streaming threads: pageable copies far below
    the link, ntt_msm_h swinging 2x while tail_msm stays flat; zerocopy copies near the link."""
    pageable = cell_metrics(load(data / "pageable_t14_w2_load14.wbtrace"))
    zerocopy = cell_metrics(load(data / "zerocopy_t14_w2_load14.wbtrace"))
    assert pageable.copy_gbps_median < 2 < 25 < zerocopy.copy_gbps_median
    assert pageable.phases["ntt_msm_h"].steady_spread >= 2.0
    assert pageable.phases["tail_msm"].cv < 0.1
    assert pageable.findings[0] == "copy_bound"
    assert zerocopy.throughput_per_min > 1.4 * pageable.throughput_per_min
    sentence = diagnose(load(data / "pageable_t14_w2_load14.wbtrace")).findings[0].sentence
    assert "while tail_msm stays constant" in sentence
    assert "host memory was loaded beside the run by 14 streaming threads" in sentence


@pytest.mark.parametrize("data", SITTINGS, ids=["first", "repeat"])
def test_the_h200_zerocopy_run_keeps_the_kernels_busy_in_steady_state(data):
    trace = load(data / "zerocopy_t14_w2.wbtrace")
    m = cell_metrics(trace)
    assert m.kernel_busy_steady >= 0.85 > m.kernel_busy  # the fill and drain are outside it
    assert m.mutex_held_steady > 0.99
    assert m.device_copy_gbps_median > 45
    assert m.phases["ntt_msm_h"].spread < 1.3
    assert m.findings[0] == "gpu_bound"
    verdict = diagnose(trace)
    assert "ntt_msm_h is the largest" in verdict.findings[0].sentence  # just ahead of tail_msm
    assert verdict.findings[0].numbers["steady_busy"] == pytest.approx(m.kernel_busy_steady)


@pytest.mark.parametrize("data", SITTINGS, ids=["first", "repeat"])
def test_h200_copies_at_link_speed_predict_zerocopy(data):
    base = load(data / "pageable_t14_w2.wbtrace")
    check = check_prediction(base, Change(copies_at_link=True), load(data / "zerocopy_t14_w2.wbtrace"),
                             WhatIfOptions(link_gbps=base.meta["link_gbps"]))
    assert check.failed is None and abs(check.error) < 0.05


def test_h200_lock_scope_and_worker_replays_land_within_five_percent():
    base = load(H200 / "zerocopy_t14_w2.wbtrace")
    for change, cell in ((Change(lock_scope="compute"), "zerocopy_t14_w2_compute"),
                         (Change(gpu_workers=1), "zerocopy_t14_w1"),
                         (Change(gpu_workers=3), "zerocopy_t14_w3")):
        check = check_prediction(base, change, load(H200 / f"{cell}.wbtrace"))
        assert abs(check.error) < 0.05, (cell, check.error)


def test_steady_window_starts_after_every_workers_first_hold_and_ends_before_the_last():
    rows = []
    for k in range(8):  # workers alternate: holds 0..7, worker k % 2
        rows.append(("mutex/gpu0", "hold", k * 100, k * 100 + 90, k, k % 2, None))
    assert steady_window_ns(Trace.from_rows(rows)) == (190, 600)
    assert steady_window_ns(Trace.from_rows(rows[:4])) is None  # two holds a worker: no steady state
