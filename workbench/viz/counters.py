"""Counter lanes: sampled values (PCIe throughput, GPU utilisation) under the Gantt.

All series share one figure and one data source, so samples of a series that appears
mid-run stream in like any other. Byte rates are shown in GB/s and utilisations in percent,
memory in GB and clocks in GHz, which puts the usual counters on comparable scales (a PCIe
Gen5 link tops out near 64 GB/s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

from workbench.trace.container import Trace
from workbench.trace.recorder import CounterRow
from workbench.viz.palette import phase_color

COLUMNS = ("t", "value", "series", "color")


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


class CounterView:
    def __init__(self, x_range: Any = None, name: str = "counters") -> None:
        self.source = ColumnDataSource({c: [] for c in COLUMNS}, name=f"{name}_samples")
        fig = figure(
            title="counters (each series in the unit its legend names)", height=180,
            sizing_mode="stretch_width", tools="xpan,xwheel_zoom,reset", x_range=x_range,
            toolbar_location="above",
        )
        fig.scatter("t", "value", source=self.source, color="color", size=4,
                    legend_field="series")
        legend = fig.legend[0]
        legend.location = "top_left"
        legend.label_text_font_size = "11px"
        fig.center.remove(legend)
        fig.add_layout(legend, "right")  # beside the samples, as the Gantt's, not over them
        fig.add_tools(HoverTool(tooltips=[("series", "@series"), ("t", "@t{0.000} s"),
                                          ("value", "@value{0.00}")]))
        fig.visible = False  # until a sample arrives: most CPU runs have none
        self.figure = fig

    def columns(self, rows: Sequence[CounterRow], origin_ns: int) -> dict[str, Any]:
        groups: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for track, name, ts, value in rows:
            groups.setdefault((track, name), []).append((ts, value))
        t: list[np.ndarray] = []
        values: list[np.ndarray] = []
        series: list[str] = []
        for (track, name), samples in groups.items():
            data = np.array(samples, dtype=np.float64)
            scaled_values, unit = scaled(name, data[:, 1])
            t.append((data[:, 0] - origin_ns) / 1e9)
            values.append(scaled_values)
            label = f"{track} {name}" + (f" ({unit})" if unit else "")
            series += [label] * len(samples)
        colors = [phase_color(s) for s in series]
        return {
            "t": np.concatenate(t) if t else np.array([]),
            "value": np.concatenate(values) if values else np.array([]),
            "series": series, "color": colors,
        }

    def set(self, trace: Trace, origin_ns: int) -> None:
        text = trace.strings.values
        c = trace.counters
        rows = [
            (text[track], text[name], int(ts), float(v))
            for track, name, ts, v in zip(c.track.tolist(), c.name.tolist(), c.ts_ns.tolist(),
                                          c.value.tolist(), strict=True)
        ]
        self.source.data = self.columns(rows, origin_ns)
        self.figure.visible = bool(rows)

    def stream(self, rows: Sequence[CounterRow], origin_ns: int) -> None:
        if rows:
            self.source.stream(self.columns(rows, origin_ns))
            self.figure.visible = True
