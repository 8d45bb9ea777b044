"""The Bokeh figures: Gantt (with its levels of detail), counters, distributions, compare."""

from __future__ import annotations

import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from bokeh.models import ColumnDataSource, Div, HoverTool, Legend
from bokeh.plotting import figure

from workbench.config import RunConfig
from workbench.pipeline.run import run_pipeline
from workbench.trace.container import Trace
from workbench.viz.bars import trace_bars
from workbench.viz.compare import compare_figure
from workbench.viz.counters import scaled
from workbench.viz.distributions import POINTS_PER_PHASE, DistributionView
from workbench.viz.gantt import GanttView
from workbench.viz.timeline import gantt_figure


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Trace:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "srs-cache"))
        return run_pipeline(RunConfig(backend="cpu", partitions=4, log2_constraints=6)).trace


def tiled(trace: Trace, times: int, counters: bool = False) -> Trace:
    """The trace repeated back to back: a long run with the structure of a real one."""
    period = trace.time_range()[1] - trace.time_range()[0]
    spans = [(s.track, s.name, s.start_ns + k * period, s.end_ns + k * period, s.partition, s.worker,
              s.attrs or None) for k in range(times) for s in trace.iter_spans()]
    samples = []
    if counters:
        first = trace.time_range()[0]
        samples = [("nvml/gpu0", "pcie_rx_bytes_s", first + i * 1_000_000, 25e9) for i in range(50)]
        samples += [("nvml/gpu0", "utilization_gpu", first + i * 1_000_000, 80.0) for i in range(50)]
    return Trace.from_rows(spans, counters=samples, config=trace.config, meta=trace.meta)


def sources(layout) -> dict[str, ColumnDataSource]:
    return {s.name: s for s in layout.select({"type": ColumnDataSource}) if s.name}


def bar_rows(layout, prefix: str = "gantt") -> int:
    found = sources(layout)
    return sum(len(found[f"{prefix}_bars_{d}"].data["left"]) for d in range(3))


def test_gantt_has_a_bar_per_span_a_lane_per_role_and_a_legend(trace):
    layout = gantt_figure(trace)
    assert bar_rows(layout) == len(trace.spans)
    fig = layout.children[0]
    legend = [item.label.value for item in fig.select({"type": Legend, "name": "gantt_legend"})[0].items]
    assert {"synthesis", "mutex_hold", "mutex_wait", "ntt_msm_h", "h2d_copy", "batch_add"} <= set(legend)
    labels = list(fig.yaxis[0].major_label_overrides.values())
    assert labels[:3] == ["run", "synth 0", "synth 1"] and "worker 1 mutex hold" in labels
    # The span hover, not the flow arrows' (a figure has both; select gives no order).
    (hover,) = [h for h in fig.select({"type": HoverTool}) if h.name and h.name.endswith("_span_hover")]
    assert {"partition", "worker", "phase", "duration"} <= {name for name, _ in hover.tooltips}


def test_big_traces_get_an_overview_and_a_detail_window_not_a_cut(trace):
    big = tiled(trace, 30)
    layout = gantt_figure(big, max_bars=400)
    overview_fig, detail_fig = layout.children[:2]
    assert f"all {len(big.spans):,} spans" in overview_fig.title.text
    assert bar_rows(layout, "gantt_overview") <= 480
    assert bar_rows(layout, "gantt") == 200
    assert "detail" in detail_fig.title.text


def test_counter_samples_get_a_figure_per_unit_on_the_gantt_time_axis(trace):
    layout = gantt_figure(tiled(trace, 1, counters=True))
    found = sources(layout)
    rates, shares = found["counters_samples_gb_per_s"].data, found["counters_samples_percent"].data
    assert set(rates["series"]) == {"nvml/gpu0 pcie_rx_bytes_s"} and set(rates["value"]) == {25.0}
    assert set(shares["series"]) == {"nvml/gpu0 utilization_gpu"} and set(shares["value"]) == {80.0}
    gantt, *counters = [c for c in layout.children if isinstance(c, figure)]  # then the controls
    assert [f.yaxis[0].axis_label for f in counters] == ["percent", "GB/s"]
    assert all(f.x_range is gantt.x_range for f in counters)
    assert scaled("x", __import__("numpy").array([3.0]))[1] == ""


def test_streaming_appends_and_adds_lanes_below(trace):
    view = GanttView(["run"])
    bars = trace_bars(trace)
    half = len(bars) // 2
    view.stream(bars.take(slice(0, half)))
    view.stream(bars.take(slice(half, None)))
    assert view.bar_count() == len(bars)
    assert view.lanes[0] == "run" and len(view.lanes) == len(set(bars.lane.tolist()) | {"run"})


def test_distributions_show_every_phase_and_sample_only_the_points(trace):
    view = DistributionView()
    bars = trace_bars(tiled(trace, 3))
    view.set(bars)
    boxes = view.boxes.data
    assert set(boxes["phase"]) == set(bars.phase.tolist())
    counts = dict(zip(boxes["phase"], boxes["n"], strict=True))
    assert counts["synthesis"] == 12
    factors = list(view.figure.y_range.factors)
    assert factors[-1] == "synthesis"  # the top row: pipeline order reads downwards
    many = bars.take(bars.phase == "synthesis")
    for _ in range(POINTS_PER_PHASE // len(many) + 2):
        view.stream(many)
    assert view.points.data["phase"].count("synthesis") == POINTS_PER_PHASE
    counts = dict(zip(view.boxes.data["phase"], view.boxes.data["n"], strict=True))
    assert counts["synthesis"] > POINTS_PER_PHASE


def test_compare_puts_two_runs_on_one_time_scale(trace):
    other = tiled(trace, 2)
    layout = compare_figure(trace, other, ("one", "two"))
    figures = [c for c in layout.children if not isinstance(c, Div)]
    first, second = (f.children[0] for f in figures)
    assert first.x_range is second.x_range
    assert first.x_range.end > (other.time_range()[1] - other.time_range()[0]) / 1e9 * 0.9
    summary = layout.children[0].text
    assert "A: one" in summary and "B: two" in summary and "B / A" in summary


def test_every_figure_of_a_run_carries_the_runs_name(tmp_path):
    """Distribution figures once carried no run name: two of them side by side (02, 03) could not
    be told apart. A loaded file is named by its file, a panel's run by its number."""
    from workbench.notebook import load
    from workbench.trace import save
    from workbench.trace.recorder import Recorder
    from workbench.viz.distributions import distribution_figure
    from workbench.viz.live import LiveView

    path = save(run_pipeline(RunConfig(backend="cpu", partitions=2, log2_constraints=5)).trace,
                tmp_path / "pageable_run.wbtrace")
    loaded = load(path)
    assert distribution_figure(loaded).title.text.startswith("pageable_run.wbtrace: ")
    assert distribution_figure(loaded, label="before").title.text.startswith("before: ")
    assert gantt_figure(loaded, label="before").children[0].title.text.startswith("before: ")
    live = LiveView(Recorder(), label="run 3")
    assert live.distributions.title.text.startswith("run 3: ")
