"""Flow arrows on the Gantt: lock hand-offs, partition hand-offs, launches and the flows a
foreign trace recorded itself.

Derived hand-offs (analysis/handoffs.py) join two spans: the arrow runs from the end of the
first span's bar to the start of the second's. A foreign trace's own flow events (kept as
instants with `flow` s/t/f and `flow_id` by the importers) join the lanes of their steps in
order. Arrows are capped so a trace of millions of launches stays a readable chart.

Contract: `flow_segments(trace, bars, lane_y, origin_ns) -> dict of columns`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import numpy as np

from workbench.analysis.handoffs import LAUNCH, handoffs
from workbench.trace.container import Trace
from workbench.viz.bars import Bars
from workbench.viz.lanes import base_lane

MAX_ARROWS = 2_000
COLUMNS = ("x0", "y0", "x1", "y1", "kind", "label", "lane0", "lane1")  # lanes: to follow a relayout


def flow_segments(
    trace: Trace, bars: Bars, lane_y: Mapping[str, int], origin_ns: int,
) -> dict[str, list[Any]]:
    """Arrow columns, for bars built one per span in the trace's order (a whole trace)."""
    out: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    if len(bars) != len(trace.spans):
        return out  # an aggregated overview has no bar per span to join
    for h in handoffs(trace)[:MAX_ARROWS]:
        a, b = bars.lane[h.source], bars.lane[h.target]
        if a in lane_y and b in lane_y:
            _add(out, float(bars.right[h.source]), a, float(bars.left[h.target]), b, h.kind, h.label, lane_y)
    for steps in _recorded(trace, origin_ns, lane_y).values():
        for (x0, lane0, kind, label), (x1, lane1, _, _) in pairwise(steps):
            if len(out["x0"]) >= 2 * MAX_ARROWS:
                return out
            _add(out, x0, lane0, x1, lane1, kind, label, lane_y)
    return out


def _add(
    out: dict[str, list[Any]], x0: float, lane0: str, x1: float, lane1: str, kind: str, label: str,
    lane_y: Mapping[str, int],
) -> None:
    values = (x0, lane_y[lane0], x1, lane_y[lane1], kind, label, lane0, lane1)
    for column, value in zip(COLUMNS, values, strict=True):
        out[column].append(value)


def _recorded(
    trace: Trace, origin_ns: int, lane_y: Mapping[str, int],
) -> dict[Any, list[tuple[float, str, str, str]]]:
    """A foreign trace's own flows: their steps in time order, keyed by flow id."""
    flows: dict[Any, list[tuple[float, str, str, str]]] = defaultdict(list)
    inst, text = trace.instants, trace.strings.values
    for i in np.flatnonzero([a is not None and "flow_id" in a for a in inst.attrs]).tolist():
        attrs = inst.attrs[i] or {}
        if attrs.get("derived") or attrs.get("cat") == LAUNCH:
            # Our own export's hand-offs read back, and launch flows, which the correlation ids
            # of the call and its kernel already join above.
            continue
        lane, _ = base_lane(text[inst.track[i]], text[inst.name[i]], int(inst.worker[i]), None)
        if lane not in lane_y:
            continue
        key = (str(attrs.get("cat", "")), str(attrs["flow_id"]))
        at = (int(inst.ts_ns[i]) - origin_ns) / 1e9
        flows[key].append((at, lane, str(attrs.get("cat") or "flow"), text[inst.name[i]]))
    for steps in flows.values():
        steps.sort(key=lambda s: s[0])
    return flows
