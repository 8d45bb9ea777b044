"""Gantt bars from spans: lanes, phases, nesting depth, hover text, levels of detail."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from workbench.config import RunConfig
from workbench.pipeline.run import run_pipeline
from workbench.trace.container import Trace
from workbench.viz.aggregate import busy_per_bin, detail_window, overview
from workbench.viz.bars import BarBuilder, Bars, describe, origin_of, trace_bars
from workbench.viz.lanes import base_lane, expected_lanes, lane_sort_key, nesting_depth, readable
from workbench.viz.palette import PHASE_COLORS, phase_color, phase_order

LOCKED = {"ntt_msm_h", "barrier_wait", "batch_add", "tail_msm"}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "srs-cache"))
        for scope in ("coarse", "compute"):
            config = RunConfig(backend="cpu", partitions=3, log2_constraints=6, lock_scope=scope,
                               memory_mode="pinned")
            out[scope] = run_pipeline(config).trace
    return out


def key(bars: Bars) -> list[tuple]:
    return sorted(zip(bars.lane.tolist(), bars.phase.tolist(), bars.depth.tolist(),
                      bars.left.round(9).tolist(), strict=True))


def test_every_span_becomes_one_bar(traces):
    for trace in traces.values():
        assert len(trace_bars(trace)) == len(trace.spans)


def test_phases_under_the_lock_are_drawn_inside_the_hold(traces):
    bars = trace_bars(traces["coarse"])
    for lane, phase, depth in zip(bars.lane, bars.phase, bars.depth, strict=True):
        if phase == "mutex_hold":
            assert lane.endswith("mutex hold") and depth == 0
        elif phase in LOCKED:
            assert lane.endswith("mutex hold") and depth == 1, (lane, phase)
        elif phase == "h2d_copy":  # coarse scope: the copy holds the lock
            assert lane.endswith("mutex hold") and depth == 2
        elif phase in ("b_g2_msm", "finish"):
            assert lane.startswith("worker") and lane.count(" ") == 1 and depth == 0
        elif phase == "mutex_wait":
            assert lane.endswith("mutex wait")
        elif phase == "prep_msm":
            assert lane.endswith("prep")


def test_compute_scope_puts_the_upload_on_the_cpu_lane(traces):
    bars = trace_bars(traces["compute"])
    uploads = bars.take(bars.phase == "upload")
    copies = bars.take(bars.phase == "h2d_copy")
    assert len(uploads) == 3 and all(lane.count(" ") == 1 for lane in uploads.lane)
    assert set(copies.depth.tolist()) == {1}
    assert not any(lane.endswith("hold") for lane in copies.lane)


@pytest.mark.parametrize("batch", [1, 5, 1000])
def test_live_batches_give_the_same_bars_as_the_whole_trace(traces, batch):
    for trace in traces.values():
        rows = [(s.track, s.name, s.start_ns, s.end_ns, s.partition, s.worker, s.attrs or None)
                for s in trace.iter_spans()]
        builder = BarBuilder(origin_of(trace), nesting=False)
        live = Bars.concat([builder.build(Trace.from_rows(rows[i:i + batch]))
                            for i in range(0, len(rows), batch)])
        assert key(live) == key(trace_bars(trace))


def test_copy_hover_gives_bytes_and_bandwidth():
    assert describe({"bytes": 2_000_000, "vector": "a", "source": "pinned"}, 1_000_000) == (
        "2.00 MB at 2.00 GB/s (vector a, from pinned memory)")
    assert "emulated" in describe({"bytes": 10, "emulated": True}, 10)
    assert describe({"error": "RuntimeError: x"}, 5) == "error: RuntimeError: x"
    assert describe(None, 5) == ""


def test_details_are_said_in_words_with_units():
    # A mutex wait and a barrier wait as the recorders write them (trace/mutex.py, barrier.py).
    assert describe({"gap_ns": 405_352}, 0) == "the lock lay free 0.405 ms before this wait ended"
    assert describe({"party": "prep", "arrival": 0}, 0) == "prep side, arrived first"
    assert describe({"party": "gpu", "arrival": 1}, 0) == "gpu side, arrived second"
    # Keys nobody named: their unit read from the suffix, never `key=value`.
    text = describe({"queue_ns": 2_500_000, "peak_bytes": 3e9, "retries": 1200}, 0)
    assert text == "queue 2.5 ms, peak 3.00 GB, retries 1,200" and "=" not in text
    # One of a thing is one thing (the details said "1 transforms").
    assert describe({"transforms": 1, "points": 256}, 0) == "1 transform, 256 points"
    assert describe({"workers": 1, "count": 1, "g2_points": 1}, 0) == "1 worker, 1 of them, 1 G2 point"


def test_nesting_depth_counts_enclosing_spans_on_a_lane():
    lanes = np.array(["a"] * 5 + ["b"], dtype=object)
    start = np.array([0, 1, 2, 10, 10, 1])
    end = np.array([9, 8, 3, 20, 10, 8])  # the last of lane a is an instant-long span inside [10, 20]
    assert nesting_depth(lanes, start, end).tolist() == [0, 1, 2, 0, 1, 0]


def test_lanes_are_ordered_by_role():
    lanes = ["worker 1 prep", "gpu0 copy", "synth 10", "run", "synth 2", "worker 0 mutex hold",
             "worker 0", "custom", "gpu0 stream 3"]
    assert sorted(lanes, key=lane_sort_key) == [
        "run", "synth 2", "synth 10", "worker 0", "worker 0 mutex hold", "worker 1 prep",
        "gpu0 copy", "gpu0 stream 3", "custom"]
    assert expected_lanes(1, 1) == ["run", "synth 0", "worker 0", "worker 0 prep",
                                    "worker 0 mutex wait", "worker 0 mutex hold"]


def test_colours_are_stable_and_known_phases_keep_theirs():
    assert phase_color("ntt_msm_h") == PHASE_COLORS["ntt_msm_h"]
    assert phase_color("my_kernel") == phase_color("my_kernel")
    assert phase_order({"finish", "zzz", "synthesis"}) == ["synthesis", "finish", "zzz"]


def test_busy_time_per_bin_is_exact_for_disjoint_spans():
    start, end = np.array([0.0, 2.5, 7.0]), np.array([1.5, 4.0, 7.5])
    busy = busy_per_bin(start, end, np.array([0.0, 2.0, 4.0, 6.0, 8.0]))
    assert busy.tolist() == pytest.approx([1.5, 1.5, 0.0, 0.5])


def test_overview_stands_for_every_span(traces):
    bars = trace_bars(traces["coarse"])
    tiled = Bars.concat([_shifted(bars, k * float(bars.right.max())) for k in range(40)])
    summary = overview(tiled, budget=400)
    assert len(summary.bars) <= 400 * 1.2
    assert summary.spans == len(tiled)
    # Aggregation keeps busy time: per lane and depth it adds up to the spans' total.
    for lane in set(tiled.lane.tolist()):
        mask = (tiled.lane == lane) & (tiled.depth == 0)
        agg = (summary.bars.lane == lane) & (summary.bars.depth == 0)
        assert summary.bars.duration_ms[agg].sum() == pytest.approx(tiled.duration_ms[mask].sum(), rel=1e-6)
    window, cut = detail_window(tiled, 100)
    assert len(window) == 100 and (window.left < cut).all()


def _shifted(bars: Bars, by: float) -> Bars:
    out = bars.take(slice(None))
    out.left, out.right = bars.left + by, bars.right + by
    return out


def test_device_tracks_get_lanes_and_kernel_names_get_readable_labels():
    assert base_lane("gpu0/stream/14", "k", -1, None)[0] == "gpu0 stream 14"
    assert base_lane("gpu0/memset", "k", -1, None)[0] == "gpu0 memset"
    mangled = ("_ZN3cub43CUB_300102_SM_750_800_860_890_900_1000_12006detail4scan16DeviceScanKernel"
               "INS0_10policy_hubIjjN4cuda3std3__4plusIvEEE10PolicyEPjSC_")
    assert readable(mangled) == "cub::DeviceScanKernel"
    assert readable("x" * 50) == "x" * 33 + "..."
    trace = Trace.from_rows([("gpu0/stream/7", mangled, 0, 10, -1, -1, None)])
    bars = trace_bars(trace)
    assert bars.phase.tolist() == ["cub::DeviceScanKernel"] and bars.detail[0] == mangled


def test_the_host_load_has_a_readable_lane():
    from workbench.model.tracks import HOST_LOAD_TRACK
    from workbench.viz.lanes import base_lane

    assert base_lane(HOST_LOAD_TRACK, "host_load", -1, None) == ("host load", False)
