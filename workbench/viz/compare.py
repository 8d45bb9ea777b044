"""Two runs one above the other on one time scale, with their summaries side by side.

Each run's clock starts at its own `run_start` (after the one-off setup), and both Gantts
share one x range, so equal lengths on screen are equal times and zooming one zooms both.
"""

from __future__ import annotations

from html import escape
from typing import Any

from bokeh.layouts import column
from bokeh.models import Range1d
from bokeh.models.layouts import LayoutDOM
from bokeh.models.widgets import Div

from workbench.analysis.summary import RunSummary, summarize
from workbench.trace.container import Trace
from workbench.viz.bars import run_start_of
from workbench.viz.gantt import DEFAULT_MAX_BARS
from workbench.viz.tables import CSS, side_by_side, summary_html, table
from workbench.viz.timeline import gantt_figure


def phase_deltas(a: RunSummary, b: RunSummary) -> str:
    """Median of every phase both runs have, and B's median as a multiple of A's."""
    medians_b = {p.phase: p.median_ms for p in b.phases}
    rows: list[list[Any]] = [
        [p.phase, p.median_ms, medians_b[p.phase],
         f"{medians_b[p.phase] / p.median_ms:.2f}×" if p.median_ms > 0 else "-"]
        for p in a.phases if p.phase in medians_b
    ]
    rows.append(["throughput /min", a.throughput_per_min, b.throughput_per_min,
                 f"{b.throughput_per_min / a.throughput_per_min:.2f}×" if a.throughput_per_min else "-"])
    return table(["phase", "A median ms", "B median ms", "B / A"], rows, "B against A")


def summaries_html(a: Trace, b: Trace, labels: tuple[str, str]) -> str:
    sa, sb = summarize(a), summarize(b)
    return f"<style>{CSS}</style>" + side_by_side([
        f"<b>{escape(f'A: {labels[0]}')}</b>{summary_html(sa)}",
        f"<b>{escape(f'B: {labels[1]}')}</b>{summary_html(sb)}",
        phase_deltas(sa, sb),
    ])


def compare_figure(
    a: Trace, b: Trace, labels: tuple[str, str] = ("run A", "run B"),
    max_bars: int = DEFAULT_MAX_BARS, with_summaries: bool = True,
) -> LayoutDOM:
    shared = Range1d(start=0, end=1)
    parts: list[Any] = []
    if with_summaries:
        parts.append(Div(text=summaries_html(a, b, labels), sizing_mode="stretch_width"))
    ends = []
    for trace, label, name in ((a, labels[0], "compare_a"), (b, labels[1], "compare_b")):
        origin = run_start_of(trace)
        parts.append(gantt_figure(trace, max_bars=max_bars, title=label, origin_ns=origin,
                                  x_range=shared, name=name))
        ends.append((trace.time_range()[1] - origin) / 1e9)
    shared.start, shared.end = 0.0, max(max(ends) * 1.02, 1e-3)
    return column(*parts, sizing_mode="stretch_width")
