"""What a click on a Gantt bar answers, over every span of a trace: the span itself, the spans
it lies within on its lane, and then

- for a pipeline's partition, its whole story (story.py) and the verdict's words about it;
- otherwise its thread's context: the unit of work it fell in, what else ran on its group's
  lanes at that moment, and the call that launched it (a flow ending at it).

A report's page answers a click itself (js/details.js, over the store of every span and the
stories it carries). A notebook's large Gantt holds only the spans in view and carries no
stories, so its kernel answers from here; the page draws either answer with the same code
(js/common.js: wb.detailsHtml), so both read alike.

Pure numpy: no Bokeh, no printing. The answer is a plain dict (sent to the page as JSON):
`phase, lane, left, right, role, detail, partition, worker, pipeline, within` ([phase, ms],
outermost first), and either `steps` (story.py's columns, less the partition) and `notes`, or
`units`, `around` ([phase, lane, ms]) and `launched` ([kind, lane, at]).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from workbench.viz.bars import Bars
from workbench.viz.lanes import lane_group
from workbench.viz.story import STEP_COLUMNS

# What the page shows of a thread's context (js/details.js keeps the same).
UNITS_SHOWN, AROUND_SHOWN = 4, 6
SAME = 1e-9  # seconds: a start the page sent back, or a flow's end at a bar's start

Story = Callable[[int], tuple[dict[str, list[Any]], dict[str, list[Any]]]]


class SpanDetails:
    """Answers clicks on `bars` (one per span, the whole trace). `story(p)`: partition p's
    steps and notes (story.stories for that partition); `flows`: the Gantt's arrow columns."""

    def __init__(self, bars: Bars, pipeline: bool, story: Story, flows: Mapping[str, Any]) -> None:
        self.bars, self.pipeline, self.story, self.flows = bars, pipeline, story, flows
        self.order = np.argsort(bars.left, kind="stable")  # the report's store is in this order
        self.lane, self.phase = bars.lane.astype(str), bars.phase.astype(str)  # once, not per click

    def find(self, asked: Mapping[str, Any]) -> int | None:
        """The bar the page's click named (its lane, phase, start and end as drawn)."""
        b = self.bars
        try:
            left, right = float(asked["left"]), float(asked["right"])
        except (KeyError, TypeError, ValueError):
            return None
        named = (self.lane == str(asked.get("lane"))) & (self.phase == str(asked.get("phase")))
        hit = np.flatnonzero(named & (np.abs(b.left - left) <= SAME) & (np.abs(b.right - right) <= SAME))
        return int(hit[0]) if len(hit) else None

    def answer(self, asked: Mapping[str, Any]) -> dict[str, Any] | None:
        i = self.find(asked)
        return None if i is None else self.of(i)

    def of(self, i: int) -> dict[str, Any]:
        b = self.bars
        lane, left, right, depth = str(self.lane[i]), float(b.left[i]), float(b.right[i]), int(b.depth[i])
        p = int(b.partition[i])
        out: dict[str, Any] = {
            "phase": str(b.phase[i]), "lane": lane, "left": left, "right": right, "role": str(b.role[i]),
            "detail": str(b.detail[i] or ""), "partition": p, "worker": int(b.worker[i]),
            "pipeline": self.pipeline}
        around = self.order[(b.left[self.order] <= right) & (b.right[self.order] >= left)]
        outer = around[(self.lane[around] == lane) & (b.depth[around] < depth)
                       & (b.left[around] <= left) & (b.right[around] >= right)]
        outer = outer[np.argsort(b.depth[outer], kind="stable")]
        out["within"] = [[str(b.phase[j]), float(b.duration_ms[j])] for j in outer.tolist()]
        if self.pipeline and p >= 0:
            steps, notes = self.story(p)
            out["steps"] = {c: list(steps[c]) for c in STEP_COLUMNS if c != "partition"}
            told = zip(notes["partition"], notes["text"], strict=True)
            out["notes"] = [str(t) for q, t in told if int(q) == p]
            return out
        out.update(self.context(i, around))
        return out

    def context(self, i: int, around: np.ndarray) -> dict[str, Any]:
        """A span's thread context, in the order of the spans' starts, as js/details.js tells it."""
        b = self.bars
        lane, depth, mid = str(self.lane[i]), int(b.depth[i]), float(b.left[i] + b.right[i]) / 2
        group = lane_group(lane)
        units: list[list[Any]] = []
        others: list[list[Any]] = []
        at = around[(b.left[around] <= mid) & (b.right[around] >= mid)]
        for j in at.tolist():
            if self.lane[j] == lane and int(b.depth[j]) == depth:
                continue
            said = [str(b.phase[j]), str(self.lane[j]), float(b.duration_ms[j])]
            if str(b.role[j]) == "unit":
                units.append(said)
            elif self.lane[j] != lane and lane_group(str(self.lane[j])) == group:
                others.append(said)
        f = self.flows
        launched = [[str(f["kind"][k]), str(f["lane0"][k]), float(f["x0"][k])] for k in range(len(f["x1"]))
                    if f["lane1"][k] == lane and abs(float(f["x1"][k]) - float(b.left[i])) < SAME]
        return {"units": units[:UNITS_SHOWN], "around": others[:AROUND_SHOWN], "launched": launched}
