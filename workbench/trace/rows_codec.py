"""Rows recorded since the last look, as one body of columns: what a journal's `ROWS` record
holds (journal.py says the layout) and what a live view in a process of its own is fed.

`RowsEncoder.encode` turns the recorder's tuples into little-endian columns in C-level passes
(one a field), numbering strings on from the ones it sent before; `RowsDecoder.decode` turns
such bodies back into the rows they were, in order, for a recorder on the other side. The
decoder believes its input (it reads what its own parent wrote); journal_read.py checks a
journal's records before it keeps them.
"""

from __future__ import annotations

import json
import struct
from operator import itemgetter
from typing import Any

import numpy as np

from workbench.trace.journal_format import COUNTER_COLUMNS, INSTANT_COLUMNS, SPAN_COLUMNS
from workbench.trace.recorder import CounterRow, InstantRow, SpanRow

LENGTH = struct.Struct("<I")
# The threads that feed a live view's own process (viz/view_process.py): the writer and the
# reader of what the child says. Like the journal's, a forked worker never touches them.
FEED_THREADS = ("workbench-view-feed", "workbench-view-said")


class RowsEncoder:
    def __init__(self) -> None:
        self.strings: dict[str, int] = {}

    def encode(self, spans: list[SpanRow], instants: list[InstantRow], counters: list[CounterRow],
               names: dict[str, str] | None = None, meta: dict[str, Any] | None = None,
               extra: dict[str, Any] | None = None) -> bytes:
        """One body: the rows, the strings new since the last body, the thread names and run
        facts when given (whole), and `extra` keys in the JSON part (a reader skips unknown ones)."""
        new: list[str] = []
        index = self.strings

        def ids(rows: list[Any], k: int) -> np.ndarray:
            for value in set(map(itemgetter(k), rows)) - index.keys():
                index[value] = len(index)
                new.append(value)
            return np.fromiter(map(index.__getitem__, map(itemgetter(k), rows)), SPAN_COLUMNS[0], len(rows))

        columns: list[np.ndarray] = []
        part: dict[str, Any] = {"spans": len(spans), "instants": len(instants), "counters": len(counters)}
        tables = (("span_attrs", spans, SPAN_COLUMNS), ("instant_attrs", instants, INSTANT_COLUMNS),
                  ("", counters, COUNTER_COLUMNS))
        for key, rows, dtypes in tables:
            if not rows:
                continue
            # A C-level pass a field, straight into its column: transposing with zip(*rows), or
            # through lists, costs a third to twice as much again.
            columns += [ids(rows, 0), ids(rows, 1)]
            columns += [np.fromiter(map(itemgetter(k), rows), dtypes[k], len(rows))
                        for k in range(2, len(dtypes))]
            if key and any(map(itemgetter(len(dtypes)), rows)):
                part[key] = list(map(itemgetter(len(dtypes)), rows))
        if new:
            part["strings"] = new
        if names is not None:
            part["thread_names"] = names
        if meta is not None:
            part["meta"] = meta
        if extra:
            part.update(extra)
        text = as_json(part)
        return b"".join([LENGTH.pack(len(text)), text, *(c.tobytes() for c in columns)])


class RowsDecoder:
    """Bodies back into rows, keeping the strings numbered so far."""

    def __init__(self) -> None:
        self.strings: list[str] = []

    def decode(self, body: bytes) -> tuple[list[SpanRow], list[InstantRow], list[CounterRow], dict[str, Any]]:
        """The spans, instants and counters of one body, and its JSON part (thread names, extras)."""
        length = LENGTH.unpack_from(body)[0]
        part = json.loads(body[4:4 + length])
        self.strings += part.get("strings", ())
        text = np.array(self.strings, dtype=object)
        offset = 4 + length
        tables: list[list[Any]] = []
        kinds = (("spans", SPAN_COLUMNS, "span_attrs"), ("instants", INSTANT_COLUMNS, "instant_attrs"),
                 ("counters", COUNTER_COLUMNS, ""))
        for key, dtypes, attrs in kinds:
            count = part[key]
            columns: list[Any] = []
            for k, dtype in enumerate(dtypes):
                column = np.frombuffer(body, dtype, count, offset)
                offset += count * dtype.itemsize
                columns.append(text[column].tolist() if k < 2 else column.tolist())
            if attrs:
                columns.append(part.get(attrs) or [None] * count)
            tables.append(list(zip(*columns, strict=True)) if count else [])
        return tables[0], tables[1], tables[2], part


def as_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=_plain).encode()


def _plain(value: Any) -> Any:
    """What JSON cannot hold as such: numpy numbers and arrays as theirs, the rest as its repr
    (a journal or a live feed must not stop over one odd attribute; the saved trace is strict)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return repr(value)
