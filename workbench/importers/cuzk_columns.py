"""Columns for the cuzk importer: the calls' figures as arrays, and spans built a phase at a time.

A 100 MB daemon log holds a few hundred thousand calls and millions of spans; building them
as rows (a tuple and a dict lookup per figure per span) was most of the import. Here each
figure is read once per call into an array, each phase's spans are one vectorised block over
the calls that have it, and the blocks are interleaved back into each call's order (the order
the row-at-a-time layout gave), so a trace comes out the same, only faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.importers.cuzk_lines import TimingLine
from workbench.trace.container import CounterTable, InstantTable, SpanTable, StringTable, Trace

NS = 1_000_000
Attrs = Sequence[dict[str, Any] | None]


class Figures:
    """Per call, the line of each kind (or None), and figures of those lines as int64 arrays."""

    def __init__(self, calls: Sequence[Any]) -> None:
        self.calls = calls
        self.n = len(calls)
        self._lines: dict[str, list[TimingLine | None]] = {}
        self._cache: dict[tuple[str, str, str], np.ndarray] = {}

    def lines(self, kind: str) -> list[TimingLine | None]:
        found = self._lines.get(kind)
        if found is None:
            found = self._lines[kind] = [c.lines.get(kind) for c in self.calls]
        return found

    def _column(self, what: str, kind: str, key: str) -> np.ndarray:
        found = self._cache.get((what, kind, key))
        if found is not None:
            return found
        lines = self.lines(kind)
        if what == "has":
            found = np.array([line is not None for line in lines], dtype=bool)
        elif what == "get":
            found = np.array([(line.fields.get(key) or 0) if line is not None else 0 for line in lines],
                             dtype=np.int64)
        elif what == "present":
            found = np.array([line is not None and key in line.fields for line in lines], dtype=bool)
        else:
            found = np.array([line.line if line is not None else 0 for line in lines], dtype=np.int64)
        self._cache[(what, kind, key)] = found
        return found

    def has(self, kind: str) -> np.ndarray:
        return self._column("has", kind, "")

    def get(self, kind: str, key: str) -> np.ndarray:
        """The figure, 0 where the line or the key is missing (as Call.get)."""
        return self._column("get", kind, key)

    def present(self, kind: str, key: str) -> np.ndarray:
        return self._column("present", kind, key)

    def line_numbers(self, kind: str) -> np.ndarray:
        return self._column("line", kind, "")


def with_lines(lines: np.ndarray, marked: np.ndarray, extra: dict[str, Any] | None = None) -> Attrs:
    """`{**marker, **extra, "line": n}` for each span: the row layout's merge, in its key order."""
    plain = dict(extra or {})
    mark = {"reconstructed": True, **plain}
    if not marked.any():
        if not plain:
            return [{"line": n} for n in lines.tolist()]
        return [{**plain, "line": n} for n in lines.tolist()]
    return [{**(mark if m else plain), "line": n}
            for n, m in zip(lines.tolist(), marked.tolist(), strict=True)]


def with_each(extras: list[dict[str, Any]], marked: np.ndarray, lines: np.ndarray | None) -> Attrs:
    """As with_lines, with each span's own extra attributes; no line when `lines` is None."""
    out: list[dict[str, Any] | None] = []
    numbers = lines.tolist() if lines is not None else None
    for n, (extra, m) in enumerate(zip(extras, marked.tolist(), strict=True)):
        merged = {"reconstructed": True, **extra} if m else dict(extra)
        if numbers is not None:
            merged["line"] = numbers[n]
        out.append(merged or None)
    return out


@dataclass
class Blocks:
    """Spans (or instants) of n calls, one block per phase, put back in each call's order."""

    n: int
    strings: StringTable
    instants: bool = False  # instants have one time, no end
    masks: list[np.ndarray] = field(default_factory=list)
    starts: list[np.ndarray] = field(default_factory=list)
    ends: list[np.ndarray] = field(default_factory=list)
    tracks: list[np.ndarray] = field(default_factory=list)
    names: list[int] = field(default_factory=list)
    attrs: list[Attrs] = field(default_factory=list)

    def add(self, mask: np.ndarray, track: np.ndarray | str, name: str, start: np.ndarray,
            end: np.ndarray | None, attrs: Attrs | None) -> None:
        """A phase: the calls that have it, its track (one per call, or one for all), times, and
        the attributes of the calls that have it, in call order (None: no attributes)."""
        count = int(mask.sum())
        self.masks.append(mask)
        self.starts.append(start)
        self.ends.append(end if end is not None else start)
        self.tracks.append(np.full(self.n, self.strings.intern(track), dtype=np.int32)
                           if isinstance(track, str) else track)
        self.names.append(self.strings.intern(name))
        if attrs is not None and len(attrs) != count:
            raise AssertionError(f"{name}: {len(attrs)} attributes for {count} spans")
        self.attrs.append(attrs if attrs is not None else [None] * count)

    def assemble(self, partition: np.ndarray, worker: np.ndarray) -> tuple[np.ndarray, ...]:
        """track, name, start, end, partition, worker columns and the attributes, call by call."""
        k = len(self.masks)
        index = np.flatnonzero(np.stack(self.masks, axis=1).ravel())
        call, phase = np.divmod(index, k)
        attrs = np.empty(len(index), dtype=object)
        for p, values in enumerate(self.attrs):
            attrs[phase == p] = np.fromiter(values, dtype=object, count=len(values))
        times = [np.stack(self.starts, axis=1).ravel()[index].astype(np.int64)]
        if not self.instants:
            times.append(np.stack(self.ends, axis=1).ravel()[index].astype(np.int64))
        return (np.stack(self.tracks, axis=1).ravel()[index].astype(np.int32),
                np.asarray(self.names, dtype=np.int32)[phase], *times,
                partition[call].astype(np.int32), worker[call].astype(np.int32), attrs)


def track_ids(strings: StringTable, builder: Any, workers: np.ndarray) -> np.ndarray:
    """Per call, the id of `builder(worker)`'s track, interned once per worker."""
    unique, inverse = np.unique(workers, return_inverse=True)
    ids = np.array([strings.intern(builder(int(w))) for w in unique], dtype=np.int32)
    return ids[inverse.reshape(-1)] if len(unique) else np.zeros(0, dtype=np.int32)


def rows_as_columns(strings: StringTable, rows: list[tuple[Any, ...]], width: int) -> tuple[np.ndarray, ...]:
    """Rows of (track, name, *integers, attrs) as columns: for the few spans laid out one by one."""
    columns: list[np.ndarray] = [
        np.array([strings.intern(r[0]) for r in rows], dtype=np.int32),
        np.array([strings.intern(r[1]) for r in rows], dtype=np.int32),
    ]
    for c in range(2, width - 1):
        dtype = np.int64 if c < width - 3 else np.int32
        columns.append(np.array([r[c] for r in rows], dtype=dtype))
    attrs = np.empty(len(rows), dtype=object)
    attrs[:] = [None] * len(rows)
    for n, r in enumerate(rows):
        attrs[n] = r[width - 1]
    columns.append(attrs)
    return tuple(columns)


def concat(*parts: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def trace_of(strings: StringTable, spans: tuple[np.ndarray, ...], instants: tuple[np.ndarray, ...],
             config: dict[str, Any], meta: dict[str, Any]) -> Trace:
    track, name, start, end, partition, worker, attrs = spans
    span_table = SpanTable(track, name, start, end, partition, worker, attrs.tolist())
    track, name, ts, partition, worker, attrs = instants
    instant_table = InstantTable(track, name, ts, partition, worker, attrs.tolist())
    empty = np.zeros(0, dtype=np.int32)
    counters = CounterTable(empty, empty.copy(), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
    return Trace(strings, span_table, instant_table, counters, config, meta)
