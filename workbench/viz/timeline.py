"""The Gantt of a whole trace: the chart (gantt.py) at the level of detail its size allows
(aggregate.py, levels.py), its counter lanes, and the controls and panels that interrogate it
(interact.py)."""

from __future__ import annotations

from typing import Any

from bokeh.layouts import column
from bokeh.models import RangeTool
from bokeh.models.layouts import LayoutDOM

from workbench.analysis.role_summary import is_pipeline
from workbench.trace.container import Trace
from workbench.viz.aggregate import detail_window, overview
from workbench.viz.bars import Bars, origin_of, trace_bars
from workbench.viz.counters import counter_figures
from workbench.viz.gantt import DEFAULT_MAX_BARS, GanttView
from workbench.viz.interact import interrogate
from workbench.viz.lanes import lane_sort_key
from workbench.viz.levels import follow, store_source
from workbench.viz.levels import requery as requery_window
from workbench.viz.span_details import SpanDetails
from workbench.viz.story import empty as empty_story
from workbench.viz.story import stories


def gantt_figure(
    trace: Trace, max_bars: int = DEFAULT_MAX_BARS, title: str | None = None,
    origin_ns: int | None = None, x_range: Any = None, name: str = "gantt", bars: Bars | None = None,
    label: str = "", verdict: Any = None, requery: bool = False, interactive: bool = True,
) -> LayoutDOM:
    """The Gantt of a whole trace (with its counter lanes when it has any), and under it the
    controls and panels that interrogate it (interact.py; `interactive=False` leaves them out).

    `bars`, when given, must have been built with the same origin. Beyond `max_bars` spans
    the chart becomes an aggregated overview of the whole run plus a span-by-span detail
    view that follows its range (levels.py): from every span written into the page, or with
    `requery` (a notebook) from the kernel. `verdict` (the analysis's) puts its words about
    each partition in that partition's details (in a notebook, told by the kernel when a bar is
    clicked). Titles say what is drawn; nothing is left out.
    """
    origin = origin_of(trace) if origin_ns is None else origin_ns
    if bars is None:
        bars = trace_bars(trace, origin)
    lanes = sorted(set(bars.lane.tolist()), key=lane_sort_key)
    heading = title or "Gantt: one lane per thread role, coloured by kind"
    if label and not title:
        heading = f"{label}: {heading}"
    store = None
    if len(bars) <= max_bars:
        view = GanttView(lanes, f"{heading} ({len(bars):,} spans)", x_range=x_range, name=name,
                         asked=interactive)
        view.set(bars)
        view.set_flows(trace, bars, origin)
        views = [view]
    else:
        summary = overview(bars, max_bars // 2)
        first = GanttView(lanes, x_range=x_range, name=f"{name}_overview", asked=interactive, title=(
            f"{heading}: overview of all {len(bars):,} spans in {summary.bin_s * 1e3:.1f} ms bins "
            "(colour: busiest phase; opacity: how busy; hover for counts; drag the box to move the detail)"))
        first.set(summary.bars)
        detail_bars, cut = detail_window(bars, max_bars // 2)
        view = GanttView(lanes, name=name, asked=interactive, title=(
            f"detail: the {len(detail_bars):,} spans starting in the first {cut:.3f} s "
            f"(zoom or pan it, or move the overview's box, for the rest)"))
        view.set(detail_bars)
        view.set_flows(trace, bars, origin)
        views = [first, view]
        window = RangeTool(x_range=view.x_range)
        first.figure.add_tools(window)
        if requery:
            requery_window(view, bars, max_bars // 2)
        elif interactive:
            store, kept_to = store_source(bars, name)
            heading_of: Any = view.figure.title  # a Title: the figure was given its text
            follow(view.sources, view.x_range, store, max_bars // 2, heading_of, name, lanes,
                   is_pipeline(trace))
            if kept_to is not None:
                heading_of.text = f"{heading_of.text}; this file keeps every span up to {kept_to:.3f} s"
    parts: list[Any] = [v.figure for v in views]
    if interactive:  # the panels right under the chart, the counters after them
        pipeline = is_pipeline(trace)
        every = bars if requery and len(views) > 1 else None  # the page holds only the spans in view
        clicks = None
        if every is not None:  # so the kernel tells a clicked span's story, and the page holds none
            steps, notes = empty_story()
            told = bars

            def story(p: int) -> tuple[dict[str, Any], dict[str, Any]]:
                return stories(trace, told, origin, verdict, only=[p])

            clicks = SpanDetails(bars, pipeline, story, view.flow_source.data)
        else:
            steps, notes = stories(trace, bars, origin, verdict) if pipeline else empty_story()
        parts += interrogate(views, view, lanes, pipeline, steps, notes, store, every, clicks)
    parts += counter_figures(trace, origin, views[0].figure.x_range)
    return column(*parts, sizing_mode="stretch_width")
