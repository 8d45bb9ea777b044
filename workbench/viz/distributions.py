"""Per-phase duration distributions: a box and a strip of points for each phase.

The duration axis is logarithmic, so a box's width reads as a ratio: a phase whose slowest
run is three times its fastest (a copy fighting for memory bandwidth) is visibly wider than
its constant neighbours, whatever their absolute length.

Every phase and every kernel has a row: the pipeline's phases in pipeline order, then the
rest (kernels, copies, host ranges of a foreign trace) by the time they took, longest first.
The axis's range is set from the durations rather than left to Bokeh: a log axis with no data
yet (a live run's first moments) makes the browser warn, twice per figure, on every render.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Range1d
from bokeh.plotting import figure

from workbench.trace.container import Trace
from workbench.viz.bars import Bars, factorize, trace_bars
from workbench.viz.palette import PHASE_COLORS, SETUP_PHASES, phase_color

FLOOR_MS = 1e-3  # a log axis cannot show 0: instant waits sit at 1 µs
POINTS_PER_PHASE = 2_000  # beyond this the strip shows a sample; boxes always use all
TITLE = "duration per phase (log scale: a wide box is a variable phase)"
MARGIN = 1.6
GOLDEN = 0.6180339887498949
STRIP_WIDTH = 0.5  # of a row's height  # the axis reaches this factor past the shortest and longest durations


def spread(k: int) -> float:
    """Where the k-th point of a phase sits across its row: evenly spread, never moving (a
    random jitter in the browser moved every point at each update, and cost a pass over all)."""
    return ((k * GOLDEN) % 1.0 - 0.5) * STRIP_WIDTH


def row_order(totals: dict[str, float]) -> list[str]:
    """Rows top to bottom: pipeline phases in pipeline order, setup phases, then the rest by
    total time, longest first (ties by name)."""
    order = {phase: i for i, phase in enumerate(PHASE_COLORS)}
    return sorted(totals, key=lambda p: (order.get(p, len(order)), p not in SETUP_PHASES, -totals[p], p))


def quantiles(durations: dict[str, np.ndarray], colors: dict[str, str] | None = None) -> dict[str, list[Any]]:
    box: dict[str, list[Any]] = {k: [] for k in ("phase", "q1", "q3", "median", "lo", "hi", "n",
                                                  "ratio", "color")}
    for phase, values in durations.items():
        if not len(values):
            continue
        q1, median, q3 = np.percentile(values, [25, 50, 75])
        lo, hi = float(values.min()), float(values.max())
        box["phase"].append(phase)
        box["q1"].append(max(float(q1), FLOOR_MS))
        box["q3"].append(max(float(q3), FLOOR_MS))
        box["median"].append(max(float(median), FLOOR_MS))
        box["lo"].append(max(lo, FLOOR_MS))
        box["hi"].append(max(hi, FLOOR_MS))
        box["n"].append(len(values))
        box["ratio"].append(hi / lo if lo > 0 else float("nan"))
        box["color"].append((colors or {}).get(phase) or phase_color(phase))
    return box


class DistributionView:
    def __init__(self, name: str = "distributions", label: str = "",
                 points_per_phase: int = POINTS_PER_PHASE) -> None:
        self.points_per_phase = points_per_phase
        self.durations: dict[str, list[np.ndarray]] = {}
        self.colors: dict[str, str] = {}  # each phase in its Gantt colour
        self.totals: dict[str, float] = {}  # milliseconds per phase: the rows' order
        self.counts: dict[str, int] = {}
        self.extent: tuple[float, float] | None = None  # shortest and longest duration seen
        self.points = ColumnDataSource({"phase": [], "ms": [], "color": [], "at": []},
                                         name=f"{name}_points")
        self.boxes = ColumnDataSource(quantiles({}), name=f"{name}_boxes")
        fig = figure(
            title=f"{label}: {TITLE}" if label else TITLE, height=200,
            sizing_mode="stretch_width", x_axis_type="log", y_range=FactorRange(factors=[]),
            x_range=Range1d(start=FLOOR_MS, end=1.0),
            x_axis_label="milliseconds", tools="xpan,xwheel_zoom,reset,save",
            toolbar_location="above",
        )
        fig.hbar(y="phase", left="q1", right="q3", height=0.7, source=self.boxes,
                 fill_color="color", fill_alpha=0.35, line_color="color")
        fig.segment(x0="lo", x1="hi", y0="phase", y1="phase", source=self.boxes, line_color="color")
        fig.scatter(x="median", y="phase", source=self.boxes, marker="dash", size=18,
                    angle=np.pi / 2, line_color="black", line_width=2)
        strip = fig.scatter(x="ms", y="at",
                            source=self.points, color="color", size=3, alpha=0.5)
        fig.add_tools(HoverTool(renderers=[strip], tooltips=[("phase", "@phase"),
                                                             ("duration", "@ms{0.000} ms")]))
        fig.ygrid.grid_line_color = None
        self.figure = fig
        self.y_range: Any = fig.y_range  # a FactorRange (the figure types it as any Range)
        self.x_range: Any = fig.x_range
        self.title: Any = fig.title

    def add(self, bars: Bars) -> dict[str, Any]:
        """Take in new bars; returns the points to draw for them (sampled past the cap)."""
        out: dict[str, list[Any]] = {"phase": [], "ms": [], "color": [], "at": []}
        phases, codes = factorize(bars.phase)
        order = np.argsort(codes, kind="stable")
        cuts = np.flatnonzero(np.diff(codes[order])) + 1
        for part in np.split(order, cuts) if len(order) else []:
            phase = phases[int(codes[part[0]])]
            color = self.colors.setdefault(phase, str(bars.color[part[0]]))
            values = bars.duration_ms[part]
            kept = self.durations.setdefault(phase, [])
            seen = self.counts.get(phase, 0)
            self.counts[phase] = seen + len(values)
            kept.append(values)
            self.totals[phase] = self.totals.get(phase, 0.0) + float(values.sum())
            lo, hi = float(values.min()), float(values.max())
            if self.extent is not None:
                lo, hi = min(self.extent[0], lo), max(self.extent[1], hi)
            self.extent = (lo, hi)
            room = max(self.points_per_phase - seen, 0)
            shown = values[:room] if len(values) > room else values
            out["phase"] += [phase] * len(shown)
            out["ms"] += np.maximum(shown, FLOOR_MS).tolist()
            out["color"] += [color] * len(shown)
            out["at"] += [[phase, spread(k)] for k in range(seen, seen + len(shown))]
        return out

    def _refresh_axes(self) -> None:
        # A categorical axis counts upwards: reversed, the pipeline reads top to bottom.
        factors = row_order(self.totals)[::-1]
        if list(self.y_range.factors) != factors:
            self.y_range.factors = factors
            self.figure.height = 60 + 26 * len(factors)
        if self.extent is not None:
            lo = max(self.extent[0], FLOOR_MS)
            start, end = lo / MARGIN, max(self.extent[1], lo) * MARGIN
            if (self.x_range.start, self.x_range.end) != (start, end):
                self.x_range.start, self.x_range.end = start, end

    def boxes_data(self) -> dict[str, list[Any]]:
        return quantiles({p: np.concatenate(v) for p, v in self.durations.items()}, self.colors)

    def set(self, bars: Bars) -> None:
        self.durations.clear()
        self.totals.clear()
        self.counts.clear()
        self.extent = None
        points = self.add(bars)
        self._refresh_axes()
        self.points.data = points
        self.boxes.data = self.boxes_data()
        sampled = [p for p, n in self.counts.items() if n > self.points_per_phase]
        if sampled:
            self.title.text += f" (points: the first {self.points_per_phase:,} of each phase)"

    def stream(self, bars: Bars, refresh_boxes: bool = True) -> None:
        points = self.add(bars)
        self._refresh_axes()
        if points["ms"]:
            self.points.stream(points)
        if refresh_boxes:
            self.boxes.data = self.boxes_data()


def distribution_figure(trace: Trace, bars: Bars | None = None, label: str | None = None) -> Any:
    """Per-phase distributions of a trace (pass its bars when already built), titled with the
    run's name: `label`, else the name the trace was loaded under."""
    view = DistributionView(label=label if label is not None else str(trace.meta.get("label") or ""))
    view.set(trace_bars(trace) if bars is None else bars)
    return view.figure
