"""The Gantt chart: one lane per thread role, one bar per span, coloured by kind.

Bars live in one data source per nesting depth, so a phase recorded inside another (a copy
inside ntt_msm_h, ntt_msm_h inside a mutex hold) is always drawn thinner and on top, even
when the live view receives it before the span around it. Each kind (legend entry, see
palette.py) has a swatch, a renderer with no data that the legend draws and a click hides;
one filter on the bars' renderers leaves out the kinds whose swatch is hidden. Three bar
renderers, not three per kind: the browser filters each source once per update.

The legend sits right of the plot in as many columns as its height needs (two at most,
then it scrolls), so no entry is ever out of reach. Hovering shows one tooltip: the innermost
span under the pointer, with the spans it lies in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from bokeh.layouts import column
from bokeh.models import (
    CDSView,
    ColumnDataSource,
    CustomJS,
    CustomJSFilter,
    CustomJSHover,
    FixedTicker,
    HoverTool,
    InlineStyleSheet,
    Quad,
    Range1d,
)
from bokeh.models.annotations import Legend, LegendItem
from bokeh.models.layouts import LayoutDOM
from bokeh.models.renderers import GlyphRenderer
from bokeh.plotting import figure

from workbench.trace.container import Trace
from workbench.viz.aggregate import detail_window, overview
from workbench.viz.bars import Bars, origin_of, trace_bars
from workbench.viz.counters import counter_figures
from workbench.viz.flows import COLUMNS as FLOW_COLUMNS
from workbench.viz.flows import flow_segments
from workbench.viz.lanes import lane_sort_key
from workbench.viz.palette import PHASE_COLORS, SETUP, legend_order, phase_color

DEPTHS = 3  # deeper spans share the innermost level
PHASE_KINDS = frozenset({*PHASE_COLORS, SETUP})  # the pipeline's own: never re-ranked
HALF_HEIGHT = (0.42, 0.3, 0.18)
LANE_PX = 24
FRAME_MARGIN_PX = 100  # title, toolbar and time axis: the figure's height less its plot's
LEGEND_ROW_PX = 15
LEGEND_COLUMNS = 2  # beyond these the legend scrolls rather than squeezing the plot
# Past this many bars a report aggregates (see aggregate.py); browsers stay fluid below it.
DEFAULT_MAX_BARS = 20_000
BAR_COLUMNS = (
    "left", "right", "top", "bottom", "color", "alpha", "phase", "kind", "lane", "partition", "worker",
    "duration_ms", "detail", "depth",
)
TOOLTIPS = [
    ("phase", "@phase"), ("within", "@depth{parents}"), ("lane", "@lane"), ("partition", "@partition"),
    ("worker", "@worker"), ("start", "@left{0.0000} s"), ("duration", "@duration_ms{0.000} ms"),
    ("", "@detail"),
]
# The spans around the hovered one: the bars of shallower depths on its lane that enclose it.
PARENTS_JS = """
const s = sources[value].data, i = special_vars.index;
const lane = s.lane[i], left = s.left[i], right = s.right[i];
const found = [];
for (let d = value - 1; d >= 0; d--) {
  const p = sources[d].data;
  for (let j = 0; j < p.left.length; j++) {
    if (p.lane[j] === lane && p.left[j] <= left && p.right[j] >= right) {
      found.push(p.phase[j] + " (" + Number(p.duration_ms[j]).toFixed(3) + " ms)");
      break;
    }
  }
}
return found.length ? found.reverse().join(" \u203a ") : "nothing (outermost)";
"""
# The bars of the kinds whose legend entry is not hidden (all of them, null, while none is).
SHOWN_KINDS_JS = """
const hidden = new Set();
for (const item of legend.items)
  if (item.renderers.some(r => !r.visible))
    for (const label of item.get_labels_list_from_label_prop()) hidden.add(label);
if (hidden.size === 0) return null;
const kind = source.data.kind ?? [];
const shown = [];
for (let i = 0; i < kind.length; i++) if (!hidden.has(kind[i])) shown.push(i);
return shown;
"""
# One tooltip, not one per depth: a bar's tooltip gives way to a deeper bar under the pointer.
INNERMOST_JS = """
const d = sources.indexOf(cb_data.data_source);
const lane = cb_data.row.lane, x = cb_data.vars.x;
for (let k = d + 1; k >= 1 && k < sources.length; k++) {
  const p = sources[k].data;
  for (let j = 0; j < p.left.length; j++) {
    if (p.lane[j] === lane && p.left[j] <= x && x <= p.right[j]) return false;
  }
}
return true;
"""


def wire(columns: dict[str, Any]) -> dict[str, Any]:
    """Columns as a live source takes them: numbers as arrays (sent as binary buffers, and a
    live view keeps a few thousand bars, so appending copies little), text as lists (an object
    array is sent element by element anyway, and a list column grows in place)."""
    return {k: v.tolist() if isinstance(v, np.ndarray) and v.dtype == object else v
            for k, v in columns.items()}


def source_name(prefix: str, depth: int) -> str:
    """Data sources are named so tests and scripts in the page can find them."""
    return f"{prefix}_bars_{depth}"


class GanttView:
    def __init__(
        self, lanes: list[str] | None = None, title: str = "", x_range: Any = None,
        name: str = "gantt", width: int | None = None, kinds: Sequence[str] = (),
    ) -> None:
        """`kinds`: those expected (a live run's phases), whose renderers are made now, before
        the run, rather than while it streams."""
        self.name = name
        self.lanes: list[str] = []
        self._lane_index: dict[str, int] = {}
        self._busy: dict[str, float] = {}  # time per kind seen so far: the legend's order
        self._swatches: dict[str, Any] = {}
        self._items: dict[str, LegendItem] = {}
        self.sources = [
            ColumnDataSource({c: [] for c in BAR_COLUMNS}, name=source_name(name, d))
            for d in range(DEPTHS)
        ]
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
        self._legend_css = InlineStyleSheet(css="")
        legend_style: dict[str, Any] = {"glyph_height": 12, "label_height": 12, "spacing": 2, "padding": 6}
        self.legend = Legend(items=[], location="top_left", label_text_font_size="11px",
                             click_policy="hide", name=f"{name}_legend", stylesheets=[self._legend_css],
                             **legend_style)
        fig.add_layout(self.legend, "right")
        self._kind_filter = CustomJSFilter(args={"legend": self.legend}, code=SHOWN_KINDS_JS)
        bars: list[Any] = [
            fig.quad(left="left", right="right", top="top", bottom="bottom", source=source,
                     view=CDSView(filter=self._kind_filter), fill_color="color", fill_alpha="alpha",
                     line_color=None, name=f"{name}|bars|{d}")
            for d, source in enumerate(self.sources)
        ]
        self.hover = HoverTool(
            renderers=bars, tooltips=TOOLTIPS, name=f"{name}_span_hover",
            formatters={"@depth": CustomJSHover(args={"sources": self.sources}, code=PARENTS_JS)},
            filters={"@depth": CustomJS(args={"sources": self.sources}, code=INNERMOST_JS)},
        )
        fig.add_tools(self.hover)
        # Hand-offs and recorded flows, thin and under the hover of the bars they join.
        self.flow_source = ColumnDataSource({c: [] for c in FLOW_COLUMNS}, name=f"{name}_flows")
        arrows = fig.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=self.flow_source,
                             line_color="#555555", line_alpha=0.55, line_width=1)
        fig.add_tools(HoverTool(renderers=[arrows], tooltips=[("flow", "@kind"), ("", "@label")],
                                name=f"{name}_flow_hover"))
        self.figure = fig
        self._swatches = {kind: self._new_swatch(kind, phase_color(kind)) for kind in kinds}
        self._join_swatches()
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
        self._lay_out_legend()

    def _lay_out_legend(self) -> None:
        """Rows that fit beside the plot, in up to two columns; past that the legend scrolls."""
        room = max(int(self.figure.height or 0) - FRAME_MARGIN_PX, 3 * LEGEND_ROW_PX)
        entries = max(sum(bool(item.visible) for item in self._items.values()), 1)
        fits = max(room // LEGEND_ROW_PX - 1, 1)
        self.legend.nrows = max(fits, -(-entries // LEGEND_COLUMNS))
        self._legend_css.css = f":host {{ max-height: {room}px; overflow-y: auto; }}"

    def columns(self, bars: Bars) -> list[dict[str, Any]]:
        """Bars split by depth into the columns each data source takes."""
        self.add_lanes(sorted(set(bars.lane.tolist()) - set(self._lane_index), key=lane_sort_key))
        y = np.array([self._lane_index[lane] for lane in bars.lane.tolist()], dtype=np.float64)
        level = np.minimum(bars.depth, DEPTHS - 1)
        half = np.asarray(HALF_HEIGHT)[level]
        out = []
        for d in range(DEPTHS):
            m = level == d
            out.append({
                "left": bars.left[m], "right": bars.right[m], "top": y[m] - half[m],
                "bottom": y[m] + half[m], "color": bars.color[m], "alpha": bars.alpha[m],
                "phase": bars.phase[m], "kind": bars.kind[m], "lane": bars.lane[m],
                "partition": bars.partition[m], "worker": bars.worker[m],
                "duration_ms": bars.duration_ms[m], "detail": bars.detail[m],
                "depth": np.full(int(m.sum()), d, dtype=np.int64),
            })
        return out

    def _legend(self, bars: Bars) -> None:
        """Kinds seen so far: a kind first seen shows its legend entry (made hidden beforehand
        for the kinds a run is known to draw) or gets its renderers and entry now.

        Showing an entry is a plain property change; adding models to a figure in a live
        document costs a walk of the whole document, so it is done in one assignment, in order:
        pipeline phases first, then the rest by the time they took."""
        kinds, first, codes = np.unique(bars.kind.astype(str), return_index=True, return_inverse=True)
        busy = np.bincount(codes.ravel(), weights=bars.right - bars.left, minlength=len(kinds))
        fresh = False
        for kind, i, seconds in zip(kinds.tolist(), first.tolist(), busy.tolist(), strict=True):
            self._busy[kind] = self._busy.get(kind, 0.0) + seconds
            if kind not in self._swatches:
                self._swatches[kind] = self._new_swatch(kind, str(bars.color[i]))
                fresh = True
        if fresh:
            self._join_swatches()
        shown = [self._items[k] for k in kinds.tolist() if not self._items[k].visible]
        for item in shown:
            item.visible = True
        if fresh or shown:
            self._lay_out_legend()

    def _join_swatches(self) -> None:
        for kind, swatch in self._swatches.items():
            if kind not in self._items:
                self._items[kind] = LegendItem(label=kind, renderers=[swatch], visible=False)
        order = legend_order({k: self._busy.get(k, 0.0) for k in self._swatches})
        self.legend.items = [self._items[k] for k in order]
        ours = {id(r) for r in self._swatches.values()}
        self.figure.renderers = [r for r in self.figure.renderers if id(r) not in ours] + list(
            self._swatches.values())

    def _new_swatch(self, kind: str, color: str) -> Any:
        # One row drawn nowhere: a legend draws no glyph for a renderer without data.
        glyph = Quad(left=np.nan, right=np.nan, top=np.nan, bottom=np.nan, fill_color=color, line_color=None)
        swatch = GlyphRenderer(data_source=ColumnDataSource({"x": [0]}), glyph=glyph,
                               name=f"{self.name}|{kind}")
        # Hiding or showing a kind asks the bars' views to filter again.
        refilter = CustomJS(args={"filter": self._kind_filter}, code="filter.change.emit();")
        swatch.js_on_change("visible", refilter)
        return swatch

    def set(self, bars: Bars) -> None:
        """Replace everything drawn (static figures)."""
        for source, data in zip(self.sources, self.columns(bars), strict=True):
            source.data = data
        self._busy.clear()
        for item in self._items.values():
            item.visible = False
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
                source.stream(wire(data))
        self._legend(bars)

    def relabel(self, changes: dict[str, tuple[str, str]]) -> int:
        """Move the drawn bars of these kernel or host names to a new legend entry and colour
        (phase -> (kind, colour): a live view's names re-ranked by time); one patch per source.
        Returns how many bars moved."""
        moved: dict[str, float] = {}
        count = 0
        for source in self.sources:
            data = source.data
            phases, kinds = list(data["phase"]), list(data["kind"])
            rows = [i for i, (p, k) in enumerate(zip(phases, kinds, strict=True))
                    if p in changes and k != changes[p][0] and k not in PHASE_KINDS]
            if not rows:
                continue
            source.patch({"kind": [(i, changes[phases[i]][0]) for i in rows],
                          "color": [(i, changes[phases[i]][1]) for i in rows]})
            left, right = data["left"], data["right"]
            for i in rows:
                new, old = changes[phases[i]][0], kinds[i]
                seconds = float(right[i]) - float(left[i])
                moved[new] = moved.get(new, 0.0) + seconds
                self._busy[old] = self._busy.get(old, 0.0) - seconds
            count += len(rows)
        for kind, seconds in moved.items():
            if kind not in self._swatches:
                color = next(c for k, c in changes.values() if k == kind)
                self._swatches[kind] = self._new_swatch(kind, color)
            self._busy[kind] = self._busy.get(kind, 0.0) + seconds
        if moved:
            self._join_swatches()
            for kind in moved:
                self._items[kind].visible = True
            still = {str(k) for source in self.sources for k in source.data["kind"]}
            for kind, item in self._items.items():
                if item.visible and kind not in still:
                    item.visible = False
            self._lay_out_legend()
        return count

    def bar_count(self) -> int:
        return sum(len(s.data["left"]) for s in self.sources)


def gantt_figure(
    trace: Trace, max_bars: int = DEFAULT_MAX_BARS, title: str | None = None,
    origin_ns: int | None = None, x_range: Any = None, name: str = "gantt", bars: Bars | None = None,
    label: str = "",
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
    heading = title or "Gantt: one lane per thread role, coloured by kind"
    if label and not title:
        heading = f"{label}: {heading}"
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
    parts += counter_figures(trace, origin, parts[0].x_range)
    return column(*parts, sizing_mode="stretch_width")
