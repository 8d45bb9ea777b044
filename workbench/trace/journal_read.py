"""A journal read back as a trace: every whole record up to the first one cut off or damaged.

What a killed run left is believed no more than any other file: each record passes its
checksum, then its counts, string numbers, times and attributes are checked as a `.wbtrace`'s
are; the first record that fails ends the reading, and the trace holds what came before it.
A file that is not a journal, or whose header record is already damaged, is a
`TraceFormatError` naming the file.

Contract: `read(path) -> (Trace, Recovery)`; `is_journal(path)`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.trace.container import CounterTable, InstantTable, SpanTable, StringTable, Trace
from workbench.trace.journal_format import (
    COUNTER_COLUMNS,
    FORMAT,
    HEADER,
    INSTANT_COLUMNS,
    MAGIC,
    ROWS,
    SPAN_COLUMNS,
    SUFFIX,
    VERSION,
    Ending,
    Record,
    records,
)
from workbench.trace.store_read import EXTENT_LIMIT, TIME_LIMIT, TraceFormatError, parse_json

SPAN_BYTES, INSTANT_BYTES, COUNTER_BYTES = (sum(d.itemsize for d in c) for c in (
    SPAN_COLUMNS, INSTANT_COLUMNS, COUNTER_COLUMNS))


@dataclass(frozen=True)
class Recovery:
    """What a journal held and how its reading ended (the line `workbench recover` prints)."""

    path: Path
    target: str | None
    records: int
    spans: int
    instants: int
    counters: int
    origin_ns: int
    last_ns: int | None
    torn: bool
    damaged: str | None
    dropped: int
    finished: bool  # the run's outcome was written: it ended, and was killed while saving

    def line(self) -> str:
        until = (f" up to {(self.last_ns - self.origin_ns) / 1e9:.2f} s into the recording"
                 if self.last_ns is not None else "")
        said = (f"{self.spans} spans, {self.instants} instants, {self.counters} counters{until} "
                f"({self.records} records{', the run had ended' if self.finished else ''})")
        if self.damaged:
            return f"{said}; {self.damaged}: it and the {self.dropped} bytes from there were dropped"
        if self.torn:
            return f"{said}; a torn last record ({self.dropped} bytes, cut off mid-write) was dropped"
        return f"{said}; no torn or damaged record"


def is_journal(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


@dataclass
class _Rows:
    """The columns and the rest, record by record, joined at the end."""

    strings: list[str] = field(default_factory=list)
    spans: list[list[np.ndarray]] = field(default_factory=lambda: [[] for _ in range(6)])
    instants: list[list[np.ndarray]] = field(default_factory=lambda: [[] for _ in range(5)])
    counters: list[list[np.ndarray]] = field(default_factory=lambda: [[] for _ in range(4)])
    span_attrs: list[dict[str, Any] | None] = field(default_factory=list)
    instant_attrs: list[dict[str, Any] | None] = field(default_factory=list)
    thread_names: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    first_ns: int | None = None
    last_ns: int | None = None
    n_spans: int = 0
    n_instants: int = 0
    n_counters: int = 0


def read(path: str | os.PathLike[str]) -> tuple[Trace, Recovery]:
    path = Path(path)
    size = path.stat().st_size
    ending = Ending()
    with open(path, "rb") as handle:
        head = handle.read(len(MAGIC))
        if head != MAGIC:
            raise TraceFormatError(f"{path} is not a workbench journal (it begins {head[:16]!r})")
        found = records(handle, size, ending)
        header = _header(path, next(found, None), ending)
        rows = _Rows(meta=dict(header["meta"]))
        kept = 0
        for record in found:
            try:
                _add(path, record, rows)
            except (TraceFormatError, ValueError, TypeError, KeyError) as err:
                ending.damaged = f"does not decode ({err})"
                break
            kept += 1
    if ending.damaged:
        ending.damaged = f"record {kept + 1} at byte {ending.offset} {ending.damaged}"
    return _trace(path, header, rows, kept, ending)


def _header(path: Path, record: Record | None, ending: Ending) -> dict[str, Any]:
    if record is None or record.kind != HEADER:
        why = ("its first record is cut off" if ending.torn else
               f"its first record {ending.damaged}" if ending.damaged else
               "it holds no record" if record is None else "it does not begin with its header")
        raise TraceFormatError(f"{path} is a damaged journal: {why} (nothing to recover)")
    header = parse_json(path, "journal header", record.body)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TraceFormatError(f"{path} is a damaged journal: its header is not a workbench journal's")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise TraceFormatError(f"{path} is a damaged journal: header version is {version!r}")
    if version > VERSION:
        raise TraceFormatError(f"{path} was written by a newer workbench (journal format {version}, "
                               f"this one reads up to {VERSION})")
    for key in ("config", "meta"):
        if not isinstance(header.setdefault(key, {}), dict):
            raise TraceFormatError(f"{path} is a damaged journal: header field {key!r} is not an object")
    origin = header.get("origin_ns", 0)
    if not isinstance(origin, int) or isinstance(origin, bool) or abs(origin) > TIME_LIMIT:
        raise TraceFormatError(f"{path} is a damaged journal: header field 'origin_ns' is {origin!r}")
    return header


def _add(path: Path, record: Record, rows: _Rows) -> None:
    """One ROWS record checked whole and then added (a fault adds nothing of it)."""
    if record.kind != ROWS:
        raise ValueError(f"kind {record.kind!r} is not one this reader knows")
    body = record.body
    if len(body) < 4:
        raise ValueError("too short")
    length = int.from_bytes(body[:4], "little")
    try:
        part = parse_json(path, f"record {record.number}", body[4:4 + length])
    except TraceFormatError:
        raise ValueError("its JSON part does not parse") from None
    if not isinstance(part, dict):
        raise ValueError("its JSON part is not an object")
    n, m, k = (_count(part, key) for key in ("spans", "instants", "counters"))
    if len(body) - 4 - length != n * SPAN_BYTES + m * INSTANT_BYTES + k * COUNTER_BYTES:
        raise ValueError(f"{len(body) - 4 - length} bytes of columns for {n} spans, {m} instants, "
                         f"{k} counters")
    new = part.get("strings", [])
    if not isinstance(new, list) or not all(isinstance(s, str) for s in new):
        raise ValueError("strings is not a list of strings")
    top = len(rows.strings) + len(new)
    offset = 4 + length
    columns: list[np.ndarray] = []
    for count, dtypes in ((n, SPAN_COLUMNS), (m, INSTANT_COLUMNS), (k, COUNTER_COLUMNS)):
        for dtype in dtypes:
            columns.append(np.frombuffer(body, dtype, count, offset).astype(dtype.newbyteorder("=")))
            offset += count * dtype.itemsize
    spans, instants, counters = columns[:6], columns[6:11], columns[11:]
    for ids in (spans[0], spans[1], instants[0], instants[1], counters[0], counters[1]):
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= top):
            raise ValueError("a string number points outside the string table")
    times = [t for t in (spans[2], spans[3], instants[2], counters[2]) if len(t)]
    if times:
        low, high = min(int(t.min()) for t in times), max(int(t.max()) for t in times)
        if low < -TIME_LIMIT or high > TIME_LIMIT:
            raise ValueError(f"a time ({low if low < -TIME_LIMIT else high} ns) is out of range")
        first = low if rows.first_ns is None else min(low, rows.first_ns)
        last = high if rows.last_ns is None else max(high, rows.last_ns)
        if last - first > EXTENT_LIMIT:
            raise ValueError(f"times run from {first} to {last} ns, over 104 days: a time is garbage")
    late = np.flatnonzero(spans[3] < spans[2])
    if len(late):
        raise ValueError(f"a span ends before it starts ({len(late)} such)")
    span_attrs = _attrs(part, "span_attrs", n)
    instant_attrs = _attrs(part, "instant_attrs", m)
    names = part.get("thread_names")
    named = isinstance(names, dict) and all(isinstance(v, str) for v in names.values())
    if names is not None and not named:
        raise ValueError("thread_names is not an object of names")
    meta = part.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise ValueError("meta is not an object")
    # Checked whole: now added.
    rows.strings += new
    for table, parts in ((rows.spans, spans), (rows.instants, instants), (rows.counters, counters)):
        for store, column in zip(table, parts, strict=True):
            store.append(column)
    rows.span_attrs += span_attrs
    rows.instant_attrs += instant_attrs
    rows.n_spans += n
    rows.n_instants += m
    rows.n_counters += k
    if times:
        rows.first_ns, rows.last_ns = first, last
    if names is not None:
        rows.thread_names = names
    if meta is not None:
        rows.meta = meta


def _count(part: dict[str, Any], key: str) -> int:
    value = part.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 31:
        raise ValueError(f"{key} is {value!r}, not a row count")
    return value


def _attrs(part: dict[str, Any], key: str, n: int) -> list[dict[str, Any] | None]:
    values = part.get(key)
    if values is None:
        return [None] * n
    if not isinstance(values, list) or len(values) != n:
        raise ValueError(f"{key} does not hold one entry a row")
    if not all(v is None or isinstance(v, dict) for v in values):
        raise ValueError(f"{key} holds an entry that is neither an object nor null")
    return values


def _joined(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _trace(
    path: Path, header: dict[str, Any], rows: _Rows, kept: int, ending: Ending,
) -> tuple[Trace, Recovery]:
    s = [_joined(p, d) for p, d in zip(rows.spans, SPAN_COLUMNS, strict=True)]
    i = [_joined(p, d) for p, d in zip(rows.instants, INSTANT_COLUMNS, strict=True)]
    c = [_joined(p, d) for p, d in zip(rows.counters, COUNTER_COLUMNS, strict=True)]
    origin = int(header.get("origin_ns", 0))
    target = header.get("target")
    recovery = Recovery(
        path, target if isinstance(target, str) else None, kept, rows.n_spans, rows.n_instants,
        rows.n_counters, origin, rows.last_ns, ending.torn, ending.damaged, ending.dropped,
        "outcome" in rows.meta,
    )
    meta = {"origin_ns": origin, **rows.meta}
    meta["journal"] = {"source": str(path), "records": kept, "torn": ending.torn,
                       "damaged": ending.damaged, "dropped_bytes": ending.dropped}
    if "outcome" not in meta:
        meta["outcome"] = "unfinished"
        meta["error"] = "it ended before its trace was saved (killed, or crashed); read from its journal"
    trace = Trace(
        StringTable.of(rows.strings),
        SpanTable(s[0], s[1], s[2], s[3], s[4], s[5], rows.span_attrs),
        InstantTable(i[0], i[1], i[2], i[3], i[4], rows.instant_attrs),
        CounterTable(c[0], c[1], c[2], c[3]),
        dict(header["config"]), meta, dict(rows.thread_names),
    )
    return trace, recovery


def trace_name(journal: Path) -> Path:
    """The trace a journal turns into by default: its own name without `.wbjournal`."""
    name = journal.name.removesuffix(SUFFIX)
    return journal.with_name(name if name and name != journal.name else journal.name + ".wbtrace")

