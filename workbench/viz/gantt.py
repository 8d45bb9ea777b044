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
from bokeh.models.annotations import Arrow, Legend, LegendItem, VeeHead
from bokeh.models.renderers import GlyphRenderer
from bokeh.plotting import figure

from workbench.trace.container import Trace
from workbench.viz.bars import Bars
from workbench.viz.flows import COLUMNS as FLOW_COLUMNS
from workbench.viz.flows import flow_segments
from workbench.viz.lanes import lane_sort_key
from workbench.viz.palette import PHASE_COLORS, SETUP, legend_order, phase_color
from workbench.viz.scripts import script

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
# What a static chart's details and range statistics read besides (interact.py); the live view
# streams without them.
ASKED_COLUMNS = ("role", "family", "bytes")
TOOLTIPS = [
    ("phase", "@phase"), ("within", "@depth{parents}"), ("lane", "@lane"), ("partition", "@partition"),
    ("worker", "@worker"), ("start", "@left{0.0000} s"), ("duration", "@duration_ms{0.000} ms"),
    ("", "@detail"),
]


def _js(name: str) -> str:
    return script(name, shared=False)


def wire(columns: dict[str, Any]) -> dict[str, Any]:
    """Columns as a live source takes them: numbers as arrays (sent as binary buffers), text as
    arrays of fixed-width strings, which Bokeh's serializer hands to JSON as one list (a list
    or an object array it encodes element by element, and a Python viewer decodes likewise)."""
    return {k: v.astype(str) if isinstance(v, np.ndarray) and v.dtype == object else v
            for k, v in columns.items()}


def source_name(prefix: str, depth: int) -> str:
    """Data sources are named so tests and scripts in the page can find them."""
    return f"{prefix}_bars_{depth}"


class GanttView:
    def __init__(
        self, lanes: list[str] | None = None, title: str = "", x_range: Any = None,
        name: str = "gantt", width: int | None = None, kinds: Sequence[str] = (), asked: bool = False,
    ) -> None:
        """`kinds`: those expected (a live run's phases), whose renderers are made now, before
        the run, rather than while it streams. `asked`: the bars carry what interrogating them
        needs (ASKED_COLUMNS)."""
        self.name = name
        self._columns = BAR_COLUMNS + (ASKED_COLUMNS if asked else ())
        self.lanes: list[str] = []
        self._lane_index: dict[str, int] = {}
        self._busy: dict[str, float] = {}  # time per kind seen so far: the legend's order
        self._swatches: dict[str, Any] = {}
        self._items: dict[str, LegendItem] = {}
        self.sources = [
            ColumnDataSource({c: [] for c in self._columns}, name=source_name(name, d))
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
        self._kind_filter = CustomJSFilter(args={"legend": self.legend}, code=_js("shown_kinds"))
        # A selected bar (a click, a box) is outlined; the others stay as they were.
        looks: dict[str, Any] = {
            "selection_fill_color": "color", "selection_fill_alpha": "alpha",
            "selection_line_color": "#000000", "selection_line_width": 1.5,
            "nonselection_fill_color": "color", "nonselection_fill_alpha": "alpha",
            "nonselection_line_color": None}
        bars: list[Any] = [
            fig.quad(left="left", right="right", top="top", bottom="bottom", source=source,
                     view=CDSView(filter=self._kind_filter), fill_color="color", fill_alpha="alpha",
                     line_color=None, name=f"{name}|bars|{d}", **looks)
            for d, source in enumerate(self.sources)
        ]
        self.bar_renderers = bars
        self.hover = HoverTool(
            renderers=bars, tooltips=TOOLTIPS, name=f"{name}_span_hover",
            formatters={"@depth": CustomJSHover(args={"sources": self.sources}, code=_js("parents"))},
            filters={"@depth": CustomJS(args={"sources": self.sources}, code=_js("innermost"))},
        )
        fig.add_tools(self.hover)
        # Hand-offs and recorded flows, thin and under the hover of the bars they join.
        self.flow_source = ColumnDataSource({c: [] for c in FLOW_COLUMNS}, name=f"{name}_flows")
        arrows = fig.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=self.flow_source,
                             line_color="#555555", line_alpha=0.55, line_width=1, name=f"{name}|flows")
        # Heads only (the segment above is the body, and carries the hover).
        head = VeeHead(size=6, fill_color="#555555", line_color=None, fill_alpha=0.7)
        heads = Arrow(x_start="x0", y_start="y0", x_end="x1", y_end="y1", source=self.flow_source, end=head)
        heads.update(line_alpha=0.0)
        fig.add_layout(heads)
        self.flow_renderers: list[Any] = [arrows, heads]
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

    def legend_layout(self) -> dict[str, Any]:
        """What a page's script needs to lay the legend out again when it changes the figure's
        height (js/groups.js, as `_lay_out_legend` does here): the legend, its style sheet, the
        height the figure was made with, and the sizes the layout works in."""
        return {"legend": self.legend, "sheet": self._legend_css, "height": int(self.figure.height or 0),
                "margin": FRAME_MARGIN_PX, "row": LEGEND_ROW_PX, "columns": LEGEND_COLUMNS}

    def columns(self, bars: Bars) -> list[dict[str, Any]]:
        """Bars split by depth into the columns each data source takes."""
        self.add_lanes(sorted(set(bars.lane.tolist()) - set(self._lane_index), key=lane_sort_key))
        y = np.array([self._lane_index[lane] for lane in bars.lane.tolist()], dtype=np.float64)
        level = np.minimum(bars.depth, DEPTHS - 1)
        half = np.asarray(HALF_HEIGHT)[level]
        out: list[dict[str, Any]] = []
        for d in range(DEPTHS):
            m = level == d
            out.append({c: getattr(bars, c)[m] for c in self._columns[len(BAR_COLUMNS):]})
            out[-1].update({
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
            left, right = data["left"], data["right"]
            for i in rows:
                new, old = changes[phases[i]][0], kinds[i]
                seconds = float(right[i]) - float(left[i])
                moved[new] = moved.get(new, 0.0) + seconds
                self._busy[old] = self._busy.get(old, 0.0) - seconds
            count += len(rows)
            colors = list(data["color"])
            for i in rows:
                kinds[i], colors[i] = changes[phases[i]]
            # The two columns whole, not a patch: a live source's text is fixed-width (wire),
            # and a longer name patched in would be cut to the old width.
            data.update(wire({"kind": np.array(kinds, dtype=object),
                              "color": np.array(colors, dtype=object)}))
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

    def fill(self, bars: Bars) -> None:
        """Replace the bars drawn and nothing else (a detail view following its range)."""
        for source, data in zip(self.sources, self.columns(bars), strict=True):
            source.data = data

    def bar_count(self) -> int:
        return sum(len(s.data["left"]) for s in self.sources)
