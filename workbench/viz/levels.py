"""Span-level detail at any zoom, for traces too large to draw bar by bar.

The overview (aggregate.py) shows the whole run in bins; the detail view below it draws
spans. It follows its range, so whatever stretch of the run it is zoomed to, the spans
there are drawn: all of them when they fit the budget, else the longest (the others are
narrower than the view can tell apart). Two ways to get the spans:

- a report writes every span into the file once, as a store with its strings coded
  (`store_source`), and a script in the page refills the detail view (js/levels.js);
- a notebook keeps the spans in the kernel and answers each range change from Python
  (`requery`), so the notebook carries no store.

Past `MAX_STORED` spans a report's store keeps the first ones and its detail title says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from bokeh.models import ColumnDataSource, CustomJS

from workbench.viz.bars import Bars, factorize
from workbench.viz.scripts import script

MAX_STORED = 500_000
CODED = ("lane", "phase", "kind", "role", "family", "detail", "color")


def store_source(bars: Bars, name: str, limit: int = MAX_STORED) -> tuple[ColumnDataSource, float | None]:
    """Every bar, sorted by start, strings as codes into the lists kept in the source's tags;
    returns it and, when `limit` cut it short, the time up to which it holds every span."""
    order = np.argsort(bars.left, kind="stable")
    cut = None
    if len(order) > limit:
        cut = float(bars.left[order[limit]])
        order = order[:limit]
    kept = bars.take(order)
    data: dict[str, Any] = {
        "left": kept.left, "right": kept.right, "depth": kept.depth.astype(np.int32),
        "partition": kept.partition.astype(np.int32), "worker": kept.worker.astype(np.int32),
        "bytes": kept.bytes,
    }
    names: dict[str, list[Any]] = {}
    for column in CODED:
        names[column], codes = factorize(getattr(kept, column))
        data[column] = codes.astype(np.int32)
    return ColumnDataSource(data, name=f"{name}_store", tags=[names]), cut


def follow(
    sources: list[ColumnDataSource], x_range: Any, store: ColumnDataSource, budget: int, title: Any,
    name: str, lanes: list[str], pipeline: bool,
) -> None:
    """Refill the detail view's sources from the store whenever its range changes (in the page)."""
    code = CustomJS(args={"store": store, "sources": sources, "x_range": x_range, "budget": budget,
                          "title": title, "name": name, "lanes": lanes, "pipeline": pipeline},
                    code=script("levels"))
    x_range.js_on_change("start", code)
    x_range.js_on_change("end", code)


def in_view(bars: Bars, order: np.ndarray, start: float, end: float, budget: int) -> tuple[Bars, int]:
    """The bars overlapping [start, end] (all, or the `budget` longest) and how many overlap.
    `order`: the bars' indices by start, so the search is one bisection and a scan."""
    stop = int(np.searchsorted(bars.left[order], end, side="right"))
    head = order[:stop]
    picked = head[bars.right[head] >= start]
    total = len(picked)
    if total > budget:
        longest = np.argpartition(-(bars.right[picked] - bars.left[picked]), budget - 1)[:budget]
        picked = np.sort(picked[longest])
    return bars.take(picked), total


def requery(view: Any, bars: Bars, budget: int) -> None:
    """A notebook's detail view: each range change, from the browser, asks the kernel for the
    spans now in view (the widget carries the change back; the page restyles what arrives)."""
    order = np.argsort(bars.left, kind="stable")
    answered: list[tuple[float, float]] = []

    def refill(_attr: str, _old: Any, _new: Any) -> None:
        start, end = float(view.x_range.start), float(view.x_range.end)
        # A range moved by the page arrives as two changes, start then end, and the widget
        # bridge runs each callback twice: answer each range once, and not the one between
        # (its start past its end), so the page gets fewer patches to apply.
        if not start < end or answered[-1:] == [(start, end)]:
            return
        answered[:] = [(start, end)]
        shown, total = in_view(bars, order, start, end, budget)
        view.fill(shown)
        view.figure.title.text = (
            f"detail: the {len(shown):,} longest of the {total:,} spans in view (zoom in for every one)"
            if total > len(shown) else f"detail: all {total:,} spans in view, {start:.3f} s to {end:.3f} s")

    view.x_range.on_change("start", refill)
    view.x_range.on_change("end", refill)
