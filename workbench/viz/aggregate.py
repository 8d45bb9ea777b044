"""Levels of detail for traces too large to draw bar by bar.

A browser draws some tens of thousands of bars comfortably; a long run records millions.
Rather than drop any, the overview bins time per lane and depth: each bin becomes one bar
coloured by the phase that was busiest in it, as opaque as the bin was busy, and its hover
says how many spans it stands for and how their time splits by phase. Beside the overview,
a detail window shows the first stretch of the run span by span.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.viz.bars import Bars, factorize

MIN_ALPHA = 0.2  # a bin that was barely busy must still be visible


@dataclass(frozen=True)
class Overview:
    bars: Bars
    bin_s: float
    spans: int  # how many spans the overview stands for


def busy_per_bin(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time covered by the intervals within each bin, for intervals that do not overlap.

    The covered time up to an edge is the sum over started intervals of (edge - start) less
    the sum over ended ones of (edge - end); with sorted starts and ends and their running
    sums that is two searches per edge.
    """
    starts, ends = np.sort(start), np.sort(end)
    start_sums = np.concatenate([[0.0], np.cumsum(starts)])
    end_sums = np.concatenate([[0.0], np.cumsum(ends)])
    n_started = np.searchsorted(starts, edges, side="left")
    n_ended = np.searchsorted(ends, edges, side="left")
    covered = (n_started * edges - start_sums[n_started]) - (n_ended * edges - end_sums[n_ended])
    return np.diff(covered)


def overview(bars: Bars, budget: int) -> Overview:
    """At most about `budget` bars standing for all of `bars`."""
    if not len(bars):
        return Overview(bars, 0.0, 0)
    t_min, t_max = float(bars.left.min()), float(bars.right.max())
    lanes, lane_code = factorize(bars.lane)
    phases, phase_code = factorize(bars.phase)
    first_of_phase = np.unique(phase_code, return_index=True)[1]  # factorize numbers by first sight
    kinds, colors = bars.kind[first_of_phase], bars.color[first_of_phase]
    depths = int(bars.depth.max()) + 1
    groups, group_code = factorize(lane_code * depths + bars.depth)  # one group per lane and depth
    n_bins = max(20, budget // max(len(groups), 1))
    bin_s = max((t_max - t_min) / n_bins, 1e-9)
    edges = t_min + bin_s * np.arange(n_bins + 1)
    busy = np.zeros((len(groups), len(phases), n_bins))
    key = group_code * len(phases) + phase_code
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    for part in np.split(order, cuts):
        g, p = divmod(int(key[part[0]]), len(phases))
        busy[g, p] = busy_per_bin(bars.left[part], bars.right[part], edges)
    counts = np.zeros((len(groups), n_bins), dtype=np.int64)
    first_bin = np.clip(((bars.left - t_min) / bin_s).astype(np.int64), 0, n_bins - 1)
    np.add.at(counts, (group_code, first_bin), 1)
    out: list[Bars] = []
    for g, group in enumerate(groups):
        total = busy[g].sum(axis=0)
        used = np.flatnonzero((total > 0) | (counts[g] > 0))
        if not len(used):
            continue
        dominant = busy[g][:, used].argmax(axis=0)
        detail = [_bin_detail(counts[g, b], busy[g, :, b], phases, bin_s) for b in used.tolist()]
        n = len(used)
        out.append(Bars(
            lane=np.full(n, lanes[group // depths], dtype=object),
            phase=np.array(phases, dtype=object)[dominant],
            left=edges[used], right=edges[used + 1],
            depth=np.full(n, group % depths, dtype=np.int64),
            partition=np.full(n, -1, dtype=np.int64), worker=np.full(n, -1, dtype=np.int64),
            duration_ms=total[used] * 1e3, detail=np.array(detail, dtype=object),
            alpha=np.clip(total[used] / bin_s, MIN_ALPHA, 1.0),
            kind=kinds[dominant], color=colors[dominant], role=np.full(n, "", dtype=object),
            family=np.full(n, "work", dtype=object), bytes=np.zeros(n),
        ))
    return Overview(Bars.concat(out), bin_s, len(bars))


def _bin_detail(count: int, busy: np.ndarray, phases: list[str], bin_s: float) -> str:
    order = np.argsort(busy)[::-1][:3]
    parts = [f"{phases[i]} {busy[i] * 1e3:.1f} ms" for i in order.tolist() if busy[i] > 0]
    share = busy.sum() / bin_s
    head = f"{count} spans start here; busy {min(share, 1.0):.0%} of {bin_s * 1e3:.1f} ms: "
    return head + ", ".join(parts)


def detail_window(bars: Bars, budget: int) -> tuple[Bars, float]:
    """The spans that start in the first stretch of the run holding at most `budget` spans,
    and where that stretch ends (seconds)."""
    if len(bars) <= budget:
        return bars, float(bars.right.max()) if len(bars) else 0.0
    order = np.argsort(bars.left, kind="stable")
    cut = float(bars.left[order[budget]])
    return bars.take(order[:budget]), cut
