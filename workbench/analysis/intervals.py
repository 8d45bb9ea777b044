"""Interval sets: sorted, disjoint [start, end) pairs as two int64 arrays.

Utilisation, idle attribution and overlap questions all reduce to unions, intersections and
differences of time intervals; keeping them as arrays keeps those answers vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Intervals:
    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def empty(cls) -> Intervals:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64))

    @classmethod
    def of(cls, starts: np.ndarray | list[int], ends: np.ndarray | list[int]) -> Intervals:
        """The union of possibly overlapping, unsorted intervals (empty ones dropped)."""
        s = np.asarray(starts, dtype=np.int64)
        e = np.asarray(ends, dtype=np.int64)
        keep = e > s
        s, e = s[keep], e[keep]
        if not len(s):
            return cls.empty()
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        running_end = np.maximum.accumulate(e)
        # A block starts where an interval begins after everything before it has ended.
        new_block = np.empty(len(s), dtype=bool)
        new_block[0] = True
        new_block[1:] = s[1:] > running_end[:-1]
        block_ends = np.append(running_end[np.flatnonzero(new_block)[1:] - 1], running_end[-1])
        return cls(s[new_block], block_ends)

    def __len__(self) -> int:
        return len(self.starts)

    def total(self) -> int:
        return int((self.ends - self.starts).sum())

    def union(self, other: Intervals) -> Intervals:
        return Intervals.of(
            np.concatenate([self.starts, other.starts]), np.concatenate([self.ends, other.ends])
        )

    def complement(self, lo: int, hi: int) -> Intervals:
        """What of [lo, hi) this set does not cover."""
        clipped = self.clip(lo, hi)
        starts = np.concatenate([[lo], clipped.ends])
        ends = np.concatenate([clipped.starts, [hi]])
        return Intervals.of(starts, ends)

    def intersect(self, other: Intervals) -> Intervals:
        if not len(self) or not len(other):
            return Intervals.empty()
        # Both sets are sorted and disjoint, so each interval of self meets a run of consecutive
        # intervals of other, found by binary search; the pairs number at most len(self) +
        # len(other), and in pair order the pieces come out sorted.
        first = np.searchsorted(other.ends, self.starts, side="right")
        count = np.maximum(np.searchsorted(other.starts, self.ends, side="left") - first, 0)
        mine = np.repeat(np.arange(len(self)), count)
        theirs = np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
        starts = np.maximum(self.starts[mine], other.starts[theirs])
        ends = np.minimum(self.ends[mine], other.ends[theirs])
        return Intervals.of(starts, ends)

    def subtract(self, other: Intervals) -> Intervals:
        if not len(self) or not len(other):
            return self
        lo = int(self.starts[0])
        hi = int(self.ends[-1])
        return self.intersect(other.complement(lo, hi))

    def clip(self, lo: int, hi: int) -> Intervals:
        s = np.clip(self.starts, lo, hi)
        e = np.clip(self.ends, lo, hi)
        keep = e > s
        return Intervals(s[keep], e[keep])

    def contains(self, times: np.ndarray) -> np.ndarray:
        """Whether each time lies in the set ([start, end): an end is outside)."""
        at = np.searchsorted(self.starts, times, side="right") - 1
        ok = at >= 0
        result = np.zeros(len(times), dtype=bool)
        result[ok] = times[ok] < self.ends[at[ok]]
        return result

    def overlap_with(self, start: int, end: int) -> int:
        """How much of [start, end) the set covers."""
        return self.clip(start, end).total()


def concurrency_ns(
    starts: np.ndarray, ends: np.ndarray, other_starts: np.ndarray, other_ends: np.ndarray,
) -> np.ndarray:
    """For each interval i, the time integral of how many `other` intervals were running
    during it (divide by its length for the mean count). Linear in the number of intervals:
    it integrates the running count as a step function instead of pairing every two."""
    if not len(other_starts) or not len(starts):
        return np.zeros(len(starts), dtype=np.float64)
    times = np.concatenate([other_starts, other_ends]).astype(np.int64)
    steps = np.concatenate([np.ones(len(other_starts)), -np.ones(len(other_ends))])
    order = np.argsort(times, kind="stable")
    times, steps = times[order], steps[order]
    count_after = np.cumsum(steps)  # running count just after each boundary
    # Integral up to each boundary: count between boundaries times their distance.
    integral = np.concatenate([[0.0], np.cumsum(count_after[:-1] * np.diff(times))])

    def integral_at(t: np.ndarray) -> np.ndarray:
        at = np.searchsorted(times, t, side="right") - 1
        out = np.zeros(len(t), dtype=np.float64)
        ok = at >= 0
        out[ok] = integral[at[ok]] + count_after[at[ok]] * (t[ok] - times[at[ok]])
        return out

    return integral_at(np.asarray(ends, dtype=np.int64)) - integral_at(np.asarray(starts, dtype=np.int64))


def covered_ns(s: Intervals, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How much of each [start, end) the set covers, for many intervals at once (a running
    integral of the set, looked up at both ends)."""
    if not len(s) or not len(starts):
        return np.zeros(len(starts), dtype=np.float64)
    cum = np.concatenate([[0], np.cumsum(s.ends - s.starts)])

    def upto(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(s.starts, t, side="right")  # intervals starting at or before t
        last = np.maximum(k - 1, 0)
        beyond = np.where(k > 0, np.clip(s.ends[last] - t, 0, None), 0)
        return cum[k] - beyond

    done = upto(np.asarray(ends, dtype=np.int64)) - upto(np.asarray(starts, dtype=np.int64))
    return done.astype(np.float64)
