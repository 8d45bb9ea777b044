"""Constant versus variable: what a repeated unit of work spends its time on, and which part
of it makes one instance slower than another.

A unit is, first found first: spans of role unit (a profiler step, an iteration a mapping
file names); else the host range of one name repeated most (at least five instances, the
largest total time); else the pipeline's partitions (from the first to the last span a
consumer thread recorded for it). Each instance's time is split among, first that holds:
a kernel runs (any GPU); a copy or memset runs; the instance's thread waits in a
synchronisation call; it waits on a lock, condition or barrier; other host time. The parts
add up to the instance's length, so each part's share of the variance of the lengths
(its covariance with the length over the length's variance) adds up to one: the part with
the largest share carries the variation.

Contract: `unit_report(trace) -> UnitReport | None` (None: no repeated unit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from workbench.analysis.distribution import Distribution
from workbench.analysis.host_threads import span_threads
from workbench.analysis.intervals import Intervals, covered_ns
from workbench.analysis.phases import CONSTANT_CV
from workbench.model import roles as rl
from workbench.model import tracks as tr
from workbench.trace.container import Trace

MIN_UNITS = 3  # declared units (role unit)
MIN_REPEATS = 5  # host ranges of one name, to count as a repeated unit
CANDIDATES = 20  # names tried, most total time first
COMPONENTS = ("kernels", "copies", "sync waits", "lock waits", "other host time")
_NUMBERED = re.compile(r"[#_ ]?\d+$")


@dataclass(frozen=True)
class Component:
    name: str
    durations: Distribution
    variance_share: float | None  # None when every instance takes as long
    constant: bool


@dataclass(frozen=True)
class UnitReport:
    name: str
    source: str  # "role unit", "repeated host range", "partitions"
    durations: Distribution
    components: tuple[Component, ...]  # in COMPONENTS order
    fastest: int  # span index
    slowest: int

    @property
    def constant(self) -> bool:
        return self.durations.cv < CONSTANT_CV

    @property
    def carrier(self) -> Component | None:
        """The part that carries most of the variation."""
        shared = [c for c in self.components if c.variance_share is not None]
        return max(shared, key=lambda c: c.variance_share or 0.0, default=None)

    @property
    def decomposed(self) -> bool:
        """Whether the split finds more than host time: on a trace with no GPU, sync or lock
        records every instance is all host time and the split says nothing."""
        return any(c.durations.total_ms > 0 for c in self.components[:-1])

    def get(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)


def unit_report(trace: Trace) -> UnitReport | None:
    if not len(trace.spans):
        return None
    codes = rl.span_roles(trace)
    thread, names = span_threads(trace)
    found = _units(trace, codes, thread, names)
    if found is None:
        return None
    name, source, starts, ends, owner, first = found
    kernels = _of(trace, codes == rl.CODE["kernel"])
    copies = _of(trace, np.isin(codes, [rl.CODE["copy"], rl.CODE["memset"]])).subtract(kernels)
    device = kernels.union(copies)
    parts = np.zeros((len(COMPONENTS), len(starts)))
    parts[0] = covered_ns(kernels, starts, ends)
    parts[1] = covered_ns(copies, starts, ends)
    sync = codes == rl.CODE["sync"]
    locks = np.isin(codes, [rl.CODE[r] for r in rl.WAIT_ROLES])
    for t in np.unique(owner).tolist():
        mine = owner == t
        on = thread == t
        waits = _of(trace, sync & on).subtract(device)
        parts[2, mine] = covered_ns(waits, starts[mine], ends[mine])
        held = _of(trace, locks & on).subtract(device).subtract(waits)
        parts[3, mine] = covered_ns(held, starts[mine], ends[mine])
    lengths = (ends - starts).astype(np.float64)
    parts[4] = np.clip(lengths - parts[:4].sum(axis=0), 0, None)
    variance = float(lengths.var())
    dists = [Distribution.of_ns(parts[k]) for k in range(len(COMPONENTS))]
    components = tuple(
        Component(label, dists[k],
                  float(np.mean((parts[k] - parts[k].mean()) * (lengths - lengths.mean()))) / variance
                  if variance > 0 else None,
                  dists[k].cv < CONSTANT_CV)
        for k, label in enumerate(COMPONENTS)
    )
    return UnitReport(name, source, Distribution.of_ns(lengths), components,
                      fastest=int(first[int(np.argmin(lengths))]),
                      slowest=int(first[int(np.argmax(lengths))]))


def _units(trace: Trace, codes: np.ndarray, thread: np.ndarray, names: tuple[str, ...]
           ) -> tuple[str, str, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    spans, text = trace.spans, trace.strings.values
    declared = np.flatnonzero(codes == rl.CODE["unit"])
    if len(declared):
        base = np.array([_NUMBERED.sub("", text[spans.name[i]]) or text[spans.name[i]] for i in declared])
        kinds, counts = np.unique(base, return_counts=True)
        if counts.max() >= MIN_UNITS:
            name = str(kinds[int(np.argmax(counts))])
            idx = declared[base == name]
            return name, "role unit", spans.start_ns[idx], spans.end_ns[idx], thread[idx], idx
    host = np.flatnonzero(codes == rl.CODE["host"])
    if len(host):
        ids, inverse, counts = np.unique(spans.name[host], return_inverse=True, return_counts=True)
        total = np.zeros(len(ids))
        np.add.at(total, inverse, (spans.end_ns[host] - spans.start_ns[host]).astype(np.float64))
        for k in np.argsort(-total, kind="stable")[:CANDIDATES].tolist():
            if counts[k] < MIN_REPEATS:
                continue
            idx = _outermost(trace, host[inverse == k], thread)
            if len(idx) >= MIN_REPEATS:
                name = text[int(ids[k])]
                return name, "repeated host range", spans.start_ns[idx], spans.end_ns[idx], thread[idx], idx
    return _partitions(trace, thread, names)


def _outermost(trace: Trace, idx: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """The instances not inside another of the same name on the same thread: a recursive
    function's calls are one unit each time it is entered from outside, not one per level."""
    spans = trace.spans
    order = np.lexsort((-spans.end_ns[idx], spans.start_ns[idx], thread[idx]))
    idx = idx[order]
    keep, last_thread, reach = [], None, -1
    for i in idx.tolist():
        t = int(thread[i])
        if t != last_thread:
            last_thread, reach = t, -1
        if spans.start_ns[i] >= reach:
            keep.append(i)
        reach = max(reach, int(spans.end_ns[i]))
    return np.array(keep, dtype=np.int64)


def _partitions(trace: Trace, thread: np.ndarray, names: tuple[str, ...]
                ) -> tuple[str, str, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Each partition from the first to the last span its consumer thread recorded for it
    (its own phases, its calls, its waits for and holds of the lock)."""
    spans = trace.spans
    consumers = [k for k, n in enumerate(names) if tr.parse(n).kind == tr.WORKER]
    on = np.isin(thread, consumers) & (spans.partition >= 0)
    index = np.flatnonzero(on)
    if not len(index):
        return None
    parts = spans.partition[index]
    order = np.argsort(parts, kind="stable")
    index, parts = index[order], parts[order]
    heads = np.flatnonzero(np.concatenate([[True], parts[1:] != parts[:-1]]))
    if len(heads) < MIN_REPEATS:
        return None
    starts = np.minimum.reduceat(spans.start_ns[index], heads)
    ends = np.maximum.reduceat(spans.end_ns[index], heads)
    first = index[heads]
    return "partition", "partitions", starts, ends, thread[first], first


def _of(trace: Trace, mask: np.ndarray) -> Intervals:
    return Intervals.of(trace.spans.start_ns[mask], trace.spans.end_ns[mask])
