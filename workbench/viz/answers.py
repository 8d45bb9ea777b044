"""What the Gantt's range statistics and search answer, over every span of a trace.

A report's page answers both itself (js/stats.js, js/search.js over the store of every span
it carries). A notebook's page holds only the spans in view (levels.py re-queries them), so
its kernel answers instead, from here, over all the bars; the page draws the answer with the
same code as a report's (js/common.js: wb.rangeHtml, wb.matchesText), so both read alike.

Pure numpy: no Bokeh, no printing. The answers are plain dicts (sent to the page as JSON):

- `range_stats(bars, x0, x1, hidden)`: spans overlapping [x0, x1] outside the hidden lanes;
  times clipped to the range; a lane is busy where any of its spans is (their union); copies
  and bytes those of the copies that overlap; waits and kinds their clipped time.
- `search(bars, words, query, centre, width, jump)`: how many spans match, the first, and with
  `jump` the next match after `centre` and the range that shows it.

The matching rule mirrors js/common.js (wb.matcher, wb.words): a span's words hold the query,
numbers match whole ("partition 3" is not partition 31).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from workbench.analysis.intervals import Intervals
from workbench.viz.bars import Bars


def range_stats(bars: Bars, x0: float, x1: float, hidden: Iterable[str] = ()) -> dict[str, Any]:
    x0, x1 = min(x0, x1), max(x0, x1)
    picked = np.flatnonzero((bars.right >= x0) & (bars.left <= x1))
    lane = bars.lane[picked].astype(str)  # strings for the spans in the range only
    shut = set(hidden)
    if shut:
        kept = ~np.isin(lane, sorted(shut))
        picked, lane = picked[kept], lane[kept]
    a = np.maximum(bars.left[picked], x0)
    b = np.minimum(bars.right[picked], x1)
    lanes, code = np.unique(lane, return_inverse=True)
    counts = np.bincount(code, minlength=len(lanes))
    # Each lane's busy time is the union of its bars, as in every utilisation figure: the
    # interval sets of the analysis, in nanoseconds.
    a_ns, b_ns = np.rint(a * 1e9).astype(np.int64), np.rint(b * 1e9).astype(np.int64)
    covered = [Intervals.of(a_ns[code == k], b_ns[code == k]).total() / 1e9 for k in range(len(lanes))]
    width = x1 - x0
    family = bars.family[picked].astype(str)
    copy = family == "copy"
    wait = family == "wait"
    kinds, kind_code = np.unique(bars.kind[picked].astype(str), return_inverse=True)
    kind_count = np.bincount(kind_code, minlength=len(kinds))
    kind_time = np.bincount(kind_code, weights=b - a, minlength=len(kinds))
    waits: dict[str, float] = {}
    for phase, seconds in zip(bars.phase[picked][wait].tolist(), (b - a)[wait].tolist(), strict=True):
        waits[str(phase)] = waits.get(str(phase), 0.0) + seconds
    return {
        "x0": x0, "x1": x1, "spans": len(picked),
        "copies": int(copy.sum()), "bytes": float(bars.bytes[picked][copy].sum()),
        "copy_time": float((bars.right[picked] - bars.left[picked])[copy].sum()),
        "busy": {str(k): float(c / width) if width > 0 else 0.0 for k, c in zip(lanes, covered, strict=True)},
        "lanes": {str(k): int(n) for k, n in zip(lanes, counts, strict=True)},
        "waits": waits,
        "kinds": {str(k): [int(n), float(t)] for k, n, t in zip(kinds, kind_count, kind_time, strict=True)},
    }


def words(bars: Bars, pipeline: bool) -> list[str]:
    """Each span's searchable words, as js/common.js (wb.words) builds them."""
    out = []
    for phase, lane, partition, worker, detail in zip(
            bars.phase.tolist(), bars.lane.tolist(), bars.partition.tolist(), bars.worker.tolist(),
            bars.detail.tolist(), strict=True):
        w = f"{phase} | {lane}"
        if partition >= 0:
            w += f" | partition {partition} | p{partition}" if pipeline else f" | unit {partition}"
        if worker >= 0:
            w += f" | worker {worker}"
        out.append(f"{w} | {detail or ''}".lower())
    return out


def matcher(query: str) -> Callable[[str], bool] | None:
    q = (query or "").strip().lower()
    if not q:
        return None
    pattern = r"\s+".join(re.escape(part) for part in q.split())
    if q[0].isdigit():
        pattern = r"(?<!\d)" + pattern
    if q[-1].isdigit():
        pattern += r"(?!\d)"
    found = re.compile(pattern).search
    return lambda text: found(text) is not None


def search(
    bars: Bars, said: list[str], query: str, centre: float, width: float, jump: bool,
) -> dict[str, Any] | None:
    """`said`: `words(bars, ...)`. None for an empty query; else the count, the first match's
    start, and with `jump` the next match after `centre` (or the first) and the range to show."""
    match = matcher(query)
    if match is None:
        return None
    hits = np.array([i for i, text in enumerate(said) if match(text)], dtype=np.int64)
    out: dict[str, Any] = {"count": len(hits)}
    if not len(hits):
        return out
    hits = hits[np.argsort(bars.left[hits], kind="stable")]
    out["first"] = float(bars.left[hits[0]])
    if jump:
        later = hits[bars.left[hits] > centre + width * 1e-6]
        j = int(later[0] if len(later) else hits[0])
        span = float(bars.right[j] - bars.left[j])
        w = max(min(width, span * 40), span * 1.5, 1e-6)
        c = float(bars.left[j] + bars.right[j]) / 2
        out.update(showing=str(bars.phase[j]), at=float(bars.left[j]), start=c - w / 2, end=c + w / 2)
    return out
