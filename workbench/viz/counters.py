"""Counter lanes: sampled values (PCIe throughput, GPU utilisation) under the Gantt.

One small figure per unit (percent, GB/s, GB, GHz), each with its unit on its axis and all
sharing the Gantt's time axis: a utilisation in percent and a memory size in GB on one axis
would squash one of them flat. Byte rates are shown in GB/s, memory in GB and clocks in GHz.
A unit's figure appears when its first sample arrives, so series that begin mid-run stream
in like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from bokeh.models import Column, ColumnDataSource, HoverTool, Spacer
from bokeh.plotting import figure

from workbench.trace.container import Trace
from workbench.trace.recorder import CounterRow
from workbench.viz.palette import series_color

COLUMNS = ("t", "value", "series", "color")
UNITS = ("%", "GB/s", "GB", "GHz", "")  # the order the figures stack in
SLUGS = {"%": "percent", "GB/s": "gb_per_s", "GB": "gb", "GHz": "ghz", "": "value"}
AXIS_LABELS = {"%": "percent", "GB/s": "GB/s", "GB": "GB", "GHz": "GHz", "": "value"}
FIGURE_HEIGHT = 130


def scaled(name: str, values: np.ndarray) -> tuple[np.ndarray, str]:
    """Values in a unit that keeps the usual counters within a few hundred of each other."""
    if name.endswith("_bytes_s"):
        return values / 1e9, "GB/s"
    if name.endswith("_bytes"):
        return values / 1e9, "GB"
    if name.endswith("_mhz"):
        return values / 1e3, "GHz"
    if "util" in name or name.endswith("_percent"):
        return values, "%"
    return values, ""


def split_by_unit(rows: Sequence[CounterRow], origin_ns: int) -> dict[str, dict[str, list[Any]]]:
    """Samples grouped by unit, each group in the columns its figure's source takes."""
    groups: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for track, name, ts, value in rows:
        groups.setdefault((track, name), []).append((ts, value))
    out: dict[str, dict[str, list[Any]]] = {}
    for (track, name), samples in groups.items():
        data = np.array(samples, dtype=np.float64)
        values, unit = scaled(name, data[:, 1])
        columns = out.setdefault(unit, {c: [] for c in COLUMNS})
        label = f"{track} {name}"
        columns["t"] += ((data[:, 0] - origin_ns) / 1e9).tolist()
        columns["value"] += values.tolist()
        columns["series"] += [label] * len(samples)
    return out


class CounterView:
    """The counter figures of a trace or a live run, one per unit, in `layout`."""

    def __init__(self, x_range: Any = None, name: str = "counters") -> None:
        self.name = name
        self.x_range = x_range
        self.figures: dict[str, Any] = {}
        self.sources: dict[str, ColumnDataSource] = {}
        self._series: dict[str, list[str]] = {}
        # Until a sample arrives (most CPU runs have none) a hidden spacer: a column of nothing
        # makes Bokeh warn (EMPTY_LAYOUT) whenever the document is checked.
        self.layout = Column(children=[Spacer(height=0)], sizing_mode="stretch_width")
        self.layout.visible = False

    def _figure(self, unit: str) -> ColumnDataSource:
        if unit in self.sources:
            return self.sources[unit]
        source = ColumnDataSource({c: [] for c in COLUMNS}, name=f"{self.name}_samples_{SLUGS[unit]}")
        fig = figure(
            title=f"counters in {AXIS_LABELS[unit]}", height=FIGURE_HEIGHT, sizing_mode="stretch_width",
            tools="xpan,xwheel_zoom,reset", x_range=self.x_range, toolbar_location="above",
            y_axis_label=AXIS_LABELS[unit], name=f"{self.name}_{SLUGS[unit]}",
        )
        if self.x_range is None:
            self.x_range = fig.x_range  # the next unit's figure follows the first's
        fig.scatter("t", "value", source=source, color="color", size=4, legend_field="series")
        legend = fig.legend[0]
        legend.location = "top_left"
        legend.label_text_font_size = "11px"
        fig.center.remove(legend)
        fig.add_layout(legend, "right")  # beside the samples, as the Gantt's, not over them
        fig.add_tools(HoverTool(tooltips=[("series", "@series"), ("t", "@t{0.000} s"),
                                          ("value", f"@value{{0.00}} {unit}".rstrip())]))
        self.figures[unit], self.sources[unit] = fig, source
        order = [u for u in UNITS if u in self.figures]
        self.layout.children = [self.figures[u] for u in order]
        return source

    def _colored(self, unit: str, data: dict[str, list[Any]]) -> dict[str, Any]:
        known = self._series.setdefault(unit, [])
        for label in dict.fromkeys(data["series"]):
            if label not in known:
                known.append(label)
        data["color"] = [series_color(known.index(s)) for s in data["series"]]
        return data

    def set(self, trace: Trace, origin_ns: int) -> None:
        for unit, data in split_by_unit(counter_rows(trace), origin_ns).items():
            self._figure(unit).data = self._colored(unit, data)
        self.layout.visible = bool(self.figures)

    def stream(self, rows: Sequence[CounterRow], origin_ns: int) -> None:
        for unit, data in split_by_unit(rows, origin_ns).items():
            self._figure(unit).stream(dict(self._colored(unit, data)))
        if rows:
            self.layout.visible = True


def counter_rows(trace: Trace) -> list[CounterRow]:
    text = trace.strings.values
    c = trace.counters
    return [
        (text[track], text[name], int(ts), float(v))
        for track, name, ts, v in zip(c.track.tolist(), c.name.tolist(), c.ts_ns.tolist(),
                                      c.value.tolist(), strict=True)
    ]


def counter_figures(trace: Trace, origin_ns: int, x_range: Any) -> list[Any]:
    """A trace's counter figures, one per unit, on the time axis `x_range` (none without samples)."""
    if not len(trace.counters):
        return []
    view = CounterView(x_range=x_range)
    view.set(trace, origin_ns)
    return [view.figures[u] for u in UNITS if u in view.figures]
