"""Interrogating the Gantt: the controls and panels under a static chart, in the page's own
scripts (js/), so a report opened from a file answers by itself. A notebook's large Gantt holds
only the spans in view, so there its kernel answers the range statistics, the search and a
click's details over every span (`answered`, answers.py, span_details.py) and the page draws
the answer as a report's would.

- a click on a bar opens its details: for a pipeline, its partition's whole story (story.py)
  and the verdict's words about it; for a foreign trace, its thread and unit context;
- a box drawn over a time range (the box-select tool) gives what is in it: each lane's busy
  share, the waits, the copies and their bytes, counts by kind;
- a search by partition, phase, worker, lane or kernel name dims what does not match;
- the flow arrows (lock and partition hand-offs, launches) can be switched off;
- lanes come in groups (a GPU worker's, a GPU's, a host thread's) that can be hidden;
- w/s zoom and a/d pan while the pointer is over a chart.

Bars are placed and shaded by transforms of their lane and opacity (js/place.js, js/dim.js),
so hiding lanes or searching redraws without touching the data, and bars that arrive later
(a detail view following its range) are placed the same way.
"""

from __future__ import annotations

from typing import Any

from bokeh.events import MouseEnter, MouseLeave, SelectionGeometry
from bokeh.layouts import row
from bokeh.models import (
    BoxSelectTool,
    ColumnDataSource,
    CustomJS,
    CustomJSTransform,
    InlineStyleSheet,
    TapTool,
)
from bokeh.models.widgets import CheckboxGroup, Div, TextInput, Toggle
from bokeh.transform import transform

from workbench.viz.answers import range_stats, words
from workbench.viz.answers import search as search_spans
from workbench.viz.bars import Bars
from workbench.viz.lanes import lane_group
from workbench.viz.scripts import script
from workbench.viz.span_details import SpanDetails

HINT = ("Click a bar for its details. Box-select (toolbar) over a time range for what is in it. "
        "Over the chart: w/s zoom, a/d pan (shift: further).")
PANEL_CSS = """
:host { font: 12px/1.4 system-ui, sans-serif; }
table.wb-detail { border-collapse: collapse; margin: 4px 0; }
table.wb-detail th, table.wb-detail td { text-align: left; padding: 1px 8px 1px 0; vertical-align: top; }
table.wb-detail th { color: #555; font-weight: 600; }
tr.wb-here td { background: #fff3c4; font-weight: 600; }
.wb-said { color: #8a5a00; margin-top: 2px; }
.wb-details-head { margin: 2px 0 4px; }
"""


def place(view: Any, name: str, lanes: list[str], pipeline: bool) -> None:
    """Draw a view's bars and arrows through the placing and dimming transforms."""
    for renderer, source in zip(view.bar_renderers, view.sources, strict=True):
        args = {"source": source, "name": name, "lanes": lanes}
        top = transform("lane", CustomJSTransform(args={**args, "side": -1}, v_func=script("place")))
        bottom = transform("lane", CustomJSTransform(args={**args, "side": 1}, v_func=script("place")))
        dim = CustomJSTransform(args={**args, "pipeline": pipeline}, v_func=script("dim"))
        alpha = transform("alpha", dim)
        for glyph in (renderer.glyph, renderer.selection_glyph, renderer.nonselection_glyph):
            glyph.update(top=top, bottom=bottom, fill_alpha=alpha)
    args = {"source": view.flow_source, "name": name, "lanes": lanes, "side": 0}
    y0 = transform("lane0", CustomJSTransform(args=args, v_func=script("place")))
    y1 = transform("lane1", CustomJSTransform(args=args, v_func=script("place")))
    segment, heads = view.flow_renderers
    segment.glyph.update(y0=y0, y1=y1)
    heads.update(y_start=y0, y_end=y1)


def interrogate(
    views: list[Any], detail: Any, lanes: list[str], pipeline: bool, steps: dict[str, Any],
    notes: dict[str, Any], store: ColumnDataSource | None = None, every: Bars | None = None,
    clicks: SpanDetails | None = None,
) -> list[Any]:
    """Wire `views` (the overview and detail, or the one chart) and return the widgets that go
    under them. `detail` is the view whose bars are spans (clicks open those). `every`: all the
    bars, kept in the kernel, which then answers the range statistics and the search; `clicks`:
    the kernel's answers to a click (the page then needs no `steps` or `notes`)."""
    remote = every is not None
    name = detail.name
    css = InlineStyleSheet(css=PANEL_CSS)
    details = Div(text=HINT, name=f"{name}_details", sizing_mode="stretch_width", stylesheets=[css])
    stats = Div(text="", name=f"{name}_range", sizing_mode="stretch_width", stylesheets=[css])
    drawn = [s for view in views for s in view.sources]
    for view in views:
        place(view, name, lanes, pipeline)
    group_names = list(dict.fromkeys(lane_group(lane) for lane in lanes))
    sizes = {g: sum(lane_group(lane) == g for lane in lanes) for g in group_names}
    labels = [f"{g} ({sizes[g]} lanes)" if sizes[g] > 1 else g for g in group_names]
    groups = CheckboxGroup(labels=labels, active=list(range(len(labels))), inline=True, name=f"{name}_groups")
    groups.js_on_change("active", CustomJS(code=script("groups"), args={
        "name": name, "lanes": lanes, "labels": labels, "drawn": drawn + [v.flow_source for v in views],
        "groups": [group_names.index(lane_group(lane)) for lane in lanes],
        "figures": [v.figure for v in views], "axes": [v.figure.yaxis[0] for v in views],
        "legends": [v.legend_layout() for v in views]}))

    stories = ColumnDataSource(steps, name=f"{name}_story")
    said = ColumnDataSource(notes, name=f"{name}_notes")
    # A click the kernel answers is asked through this source's tags.
    ask = ColumnDataSource({}, name=f"{name}_ask") if clicks is not None else None
    clicked = CustomJS(code=script("details"), args={
        "sources": detail.sources, "store": store, "stories": stories, "notes": said, "div": details,
        "pipeline": pipeline, "lanes": lanes, "flows": detail.flow_source, "name": name,
        "groups": [group_names.index(lane_group(lane)) for lane in lanes], "remote": ask is not None,
        "ask": ask})
    for source in detail.sources:
        source.selected.js_on_change("indices", clicked)
    detail.figure.add_tools(TapTool(renderers=detail.bar_renderers))

    measured = CustomJS(code=script("stats"), args={
        "store": store, "sources": detail.sources, "div": stats, "name": name, "lanes": lanes,
        "remote": remote})
    for view in views:
        view.figure.add_tools(BoxSelectTool(dimensions="width", renderers=view.bar_renderers))
        view.figure.js_on_event(SelectionGeometry, measured)
        for event, entering in ((MouseEnter, True), (MouseLeave, False)):
            view.figure.js_on_event(event, CustomJS(code=script("keys"),
                                                    args={"x_range": view.x_range, "entering": entering}))

    search = TextInput(placeholder="search: partition 3, ntt, worker 1, a kernel name (Enter: next)",
                       name=f"{name}_search", width=380)
    matches = Div(text="", name=f"{name}_matches", stylesheets=[css])
    for prop, jump in (("value_input", False), ("value", True)):
        search.js_on_change(prop, CustomJS(code=script("search"), args={
            "store": store, "sources": detail.sources, "drawn": drawn, "div": matches, "name": name,
            "pipeline": pipeline, "jump": jump, "x_range": detail.x_range, "remote": remote}))
    arrows = Toggle(label="flow arrows", active=True, name=f"{name}_flows_toggle", width=110)
    shown = [r for view in views for r in view.flow_renderers]
    arrows.js_on_change("active", CustomJS(args={"shown": shown},
                                           code="for (const r of shown) r.visible = cb_obj.active;"))
    if every is not None:
        answered(every, views, detail.x_range, lanes, pipeline, groups, group_names, stats, search, matches,
                 name)
    if clicks is not None and ask is not None:
        tell(clicks, ask, details, name)
    return [row(search, matches, arrows, sizing_mode="stretch_width"), groups, details, stats]


def answered(
    every: Bars, views: list[Any], x_range: Any, lanes: list[str], pipeline: bool, groups: CheckboxGroup,
    group_names: list[str], stats: Div, search: TextInput, matches: Div, name: str,
) -> None:
    """The kernel answers a box over a time range and a search over `every` bar; each answer
    goes to its panel's tags (numbered, so a repeated answer still arrives) and the page draws
    it (js/answered.js). Enter's next match moves the detail view, which then re-queries."""
    said: list[list[str]] = []
    count = [0]

    def send(panel: Div, answer: dict[str, Any]) -> None:
        count[0] += 1
        panel.tags = [{**answer, "seq": count[0]}]

    def measure(event: SelectionGeometry) -> None:
        g: dict[str, Any] = dict(event.geometry or {})
        if g.get("type") != "rect" or not event.final or g.get("x0") is None or g.get("x1") is None:
            return
        x0, x1 = sorted((float(g["x0"]), float(g["x1"])))
        if not x1 > x0:
            return
        shown = {group_names[k] for k in groups.active}
        hidden = [lane for lane in lanes if lane_group(lane) not in shown]
        send(stats, range_stats(every, x0, x1, hidden))

    last: list[Any] = [None]

    def find(jump: bool) -> Any:
        def answer(_attr: str, _old: Any, new: Any) -> None:
            start, end = float(x_range.start), float(x_range.end)
            # The widget bridge runs a callback twice for one change from the page: once is
            # enough (twice, Enter would skip a match).
            asked = (jump, new, start, end)
            if asked == last[0]:
                return
            if not said:
                said.append(words(every, pipeline))
            found = search_spans(every, said[0], str(new or ""), (start + end) / 2, end - start, jump)
            last[0] = asked
            if found is None:
                return
            send(matches, found)
            if "start" in found:
                x_range.update(start=found["start"], end=found["end"])
                last[0] = (jump, new, float(x_range.start), float(x_range.end))
        return answer

    for view in views:
        view.figure.on_event(SelectionGeometry, measure)
    search.on_change("value_input", find(False))
    search.on_change("value", find(True))
    for panel, what in ((stats, "range"), (matches, "matches")):
        panel.js_on_change("tags", CustomJS(code=script("answered"), args={
            "name": name, "lanes": lanes, "what": what}))


def tell(clicks: SpanDetails, ask: ColumnDataSource, details: Div, name: str) -> None:
    """The kernel answers a click the page asked about in `ask`'s tags (js/details.js) with the
    span's details over every span; the answer goes to the details panel's tags, drawn there
    (js/answered.js)."""
    last: list[Any] = [None]

    def answer(_attr: str, _old: Any, new: Any) -> None:
        asked = dict(new[0]) if new and isinstance(new[0], dict) else None
        # The widget bridge runs a callback twice for one change from the page: answer once.
        if asked is None or asked.get("seq") == last[0]:
            return
        last[0] = asked.get("seq")
        found = clicks.answer(asked)
        if found is None:
            where = f"{asked.get('phase')!r} on {asked.get('lane')!r} at {asked.get('left')} s"
            found = {"error": f"no span {where} in this trace"}
        details.tags = [{**found, "seq": asked.get("seq")}]

    ask.on_change("tags", answer)
    details.js_on_change("tags", CustomJS(code=script("answered"), args={
        "name": name, "lanes": [], "what": "details"}))
