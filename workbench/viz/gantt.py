"""The Gantt chart: one lane per thread role, one bar per span, coloured by phase.

Bars live in one data source per nesting depth, so a phase recorded inside another (a copy
inside ntt_msm_h, ntt_msm_h inside a mutex hold) is always drawn thinner and on top, even
when the live view receives it before the span around it. The legend reads from a source of
its own holding one row per phase seen, so phases appearing mid-run join the legend.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, Range1d
from bokeh.models.annotations import Legend, LegendItem
from bokeh.models.layouts import LayoutDOM
from bokeh.plotting import figure

from workbench.trace.container import Trace
from workbench.viz.aggregate import detail_window, overview
from workbench.viz.bars import Bars, origin_of, trace_bars
from workbench.viz.counters import CounterView
from workbench.viz.flows import COLUMNS as FLOW_COLUMNS
from workbench.viz.flows import flow_segments
from workbench.viz.lanes import lane_sort_key
from workbench.viz.palette import phase_color, phase_order

DEPTHS = 3  # deeper spans share the innermost level
HALF_HEIGHT = (0.42, 0.3, 0.18)
LANE_PX = 24
# Past this many bars a report aggregates (see aggregate.py); browsers stay fluid below it.
DEFAULT_MAX_BARS = 20_000
BAR_COLUMNS = (
    "left", "right", "top", "bottom", "color", "alpha", "phase", "lane", "partition", "worker",
    "duration_ms", "detail",
)
TOOLTIPS = [
    ("lane", "@lane"), ("phase", "@phase"), ("partition", "@partition"), ("worker", "@worker"),
    ("start", "@left{0.0000} s"), ("duration", "@duration_ms{0.000} ms"), ("", "@detail"),
]


def source_name(prefix: str, depth: int) -> str:
    """Data sources are named so tests and scripts in the page can find them."""
    return f"{prefix}_bars_{depth}"


class GanttView:
    def __init__(
        self, lanes: list[str] | None = None, title: str = "", x_range: Any = None,
        name: str = "gantt", width: int | None = None,
    ) -> None:
        self.name = name
        self.lanes: list[str] = []
        self._lane_index: dict[str, int] = {}
        self._phases: set[str] = set()
        self.sources = [
            ColumnDataSource({c: [] for c in BAR_COLUMNS}, name=source_name(name, d))
            for d in range(DEPTHS)
        ]
        self.legend_source = ColumnDataSource({"phase": [], "color": []}, name=f"{name}_legend")
        options: dict[str, Any] = {"width": width} if width else {"sizing_mode": "stretch_width"}
        fig = figure(
            title=title, height=120, x_range=x_range or Range1d(start=0, end=1),
            y_range=Range1d(start=0.5, end=-0.5),
            tools="xpan,xwheel_zoom,box_zoom,reset,save", active_scroll="xwheel_zoom",
            x_axis_label="seconds since the run's start", toolbar_location="above", **options,
        )
        fig.ygrid.grid_line_color = None
        fig.yaxis.ticker = FixedTicker(ticks=[])
        fig.yaxis.major_label_text_font_size = "11px"
        bars: list[Any] = [
            fig.quad(left="left", right="right", top="top", bottom="bottom", source=source,
                     fill_color="color", fill_alpha="alpha", line_color=None)
            for source in self.sources
        ]
        nothing: Any = fig.quad(left=np.nan, right=np.nan, top=np.nan, bottom=np.nan,
                           source=self.legend_source, fill_color="color", line_color=None)
        legend = Legend(items=[LegendItem(label={"field": "phase"}, renderers=[nothing])],
                        location="top_left", label_text_font_size="11px", glyph_height=14,
                        spacing=0, click_policy="none")
        fig.add_layout(legend, "right")
        fig.add_tools(HoverTool(renderers=bars, tooltips=TOOLTIPS, name=f"{name}_span_hover"))
        # Hand-offs and recorded flows, thin and under the hover of the bars they join.
        self.flow_source = ColumnDataSource({c: [] for c in FLOW_COLUMNS}, name=f"{name}_flows")
        arrows = fig.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=self.flow_source,
                             line_color="#555555", line_alpha=0.55, line_width=1)
        fig.add_tools(HoverTool(renderers=[arrows], tooltips=[("flow", "@kind"), ("", "@label")],
                                name=f"{name}_flow_hover"))
        self.figure = fig
        # Both ranges are Range1d; the figure types them as any Range.
        self.x_range: Any = fig.x_range
        self.y_range: Any = fig.y_range
        self.add_lanes(lanes or [])

    def add_lanes(self, lanes: list[str]) -> None:
        """New lanes go below the existing ones: moving a lane would move bars already sent."""
        new = [lane for lane in lanes if lane not in self._lane_index]
        if not new:
            return
        for lane in new:
            self._lane_index[lane] = len(self.lanes)
            self.lanes.append(lane)
        n = len(self.lanes)
        self.figure.yaxis.ticker = FixedTicker(ticks=list(range(n)))
        self.figure.yaxis.major_label_overrides = dict(enumerate(self.lanes))
        self.y_range.start, self.y_range.end = n - 0.5, -0.5
        self.figure.height = 70 + LANE_PX * n

    def columns(self, bars: Bars) -> list[dict[str, Any]]:
        """Bars split by depth into the columns each data source takes."""
        self.add_lanes(sorted(set(bars.lane.tolist()) - set(self._lane_index), key=lane_sort_key))
        y = np.array([self._lane_index[lane] for lane in bars.lane.tolist()], dtype=np.float64)
        level = np.minimum(bars.depth, DEPTHS - 1)
        half = np.asarray(HALF_HEIGHT)[level]
        colors = np.array([phase_color(p) for p in bars.phase.tolist()], dtype=object)
        out = []
        for d in range(DEPTHS):
            m = level == d
            out.append({
                "left": bars.left[m], "right": bars.right[m], "top": y[m] - half[m],
                "bottom": y[m] + half[m], "color": colors[m], "alpha": bars.alpha[m],
                "phase": bars.phase[m], "lane": bars.lane[m], "partition": bars.partition[m],
                "worker": bars.worker[m], "duration_ms": bars.duration_ms[m], "detail": bars.detail[m],
            })
        return out

    def _legend(self, bars: Bars) -> None:
        """Phases seen so far, in pipeline order: the legend is rewritten (a few rows) rather
        than streamed, so a phase first seen late still takes its place in the order."""
        fresh = set(bars.phase.tolist()) - self._phases
        if fresh:
            self._phases |= fresh
            ordered = phase_order(self._phases)
            self.legend_source.data = {"phase": ordered, "color": [phase_color(p) for p in ordered]}

    def set(self, bars: Bars) -> None:
        """Replace everything drawn (static figures)."""
        for source, data in zip(self.sources, self.columns(bars), strict=True):
            source.data = data
        self._phases.clear()
        self.legend_source.data = {"phase": [], "color": []}
        self._legend(bars)
        if len(bars):
            self.x_range.start = min(0.0, float(bars.left.min()))
            self.x_range.end = float(bars.right.max()) * 1.02

    def set_flows(self, trace: Trace, bars: Bars, origin_ns: int) -> int:
        """Draw the trace's hand-offs and recorded flows between the bars; returns how many."""
        data = flow_segments(trace, bars, self._lane_index, origin_ns)
        self.flow_source.data = data
        return len(data["x0"])

    def stream(self, bars: Bars) -> None:
        """Append bars (live view): one message per non-empty depth, not one per bar."""
        if not len(bars):
            return
        for source, data in zip(self.sources, self.columns(bars), strict=True):
            if len(data["left"]):
                source.stream(data)
        self._legend(bars)

    def bar_count(self) -> int:
        return sum(len(s.data["left"]) for s in self.sources)


def gantt_figure(
    trace: Trace, max_bars: int = DEFAULT_MAX_BARS, title: str | None = None,
    origin_ns: int | None = None, x_range: Any = None, name: str = "gantt", bars: Bars | None = None,
) -> LayoutDOM:
    """The Gantt of a whole trace (with its counter lanes when it has any).

    `bars`, when given, must have been built with the same origin. Beyond `max_bars` spans
    the chart becomes an aggregated overview of the whole run plus a span-by-span detail
    window of its first stretch; titles say so, nothing is left out.
    """
    origin = origin_of(trace) if origin_ns is None else origin_ns
    if bars is None:
        bars = trace_bars(trace, origin)
    lanes = sorted(set(bars.lane.tolist()), key=lane_sort_key)
    heading = title or "Gantt: one lane per thread role, coloured by phase"
    parts: list[Any] = []
    if len(bars) <= max_bars:
        view = GanttView(lanes, f"{heading} ({len(bars):,} spans)", x_range=x_range, name=name)
        view.set(bars)
        view.set_flows(trace, bars, origin)
        parts.append(view.figure)
    else:
        summary = overview(bars, max_bars // 2)
        view = GanttView(lanes, x_range=x_range, name=f"{name}_overview", title=(
            f"{heading}: overview of all {len(bars):,} spans in {summary.bin_s * 1e3:.1f} ms bins "
            "(colour: busiest phase; opacity: how busy; hover for counts)"))
        view.set(summary.bars)
        detail_bars, cut = detail_window(bars, max_bars // 2)
        detail = GanttView(lanes, name=name, title=(
            f"detail: the {len(detail_bars):,} spans starting in the first {cut:.3f} s "
            f"(zoom the overview for the rest)"))
        detail.set(detail_bars)
        parts += [view.figure, detail.figure]
    if len(trace.counters):
        counters = CounterView(x_range=parts[0].x_range)
        counters.set(trace, origin)
        parts.append(counters.figure)
    return column(*parts, sizing_mode="stretch_width")
