"""A trace of a recorder that is still recording, kept up to date by appending.

`Trace.from_recorder` turns every row recorded so far into columns, which is most of what a
running summary costs once a run has tens of thousands of spans. `GrowingTrace` turns only
the rows recorded since its last look and appends them to columns it keeps (with room to
grow, so appending copies little), and hands out a `Trace` of everything so far: the same
spans, instants and counters in the same order as `Trace.from_recorder` at that moment.
Rows are only ever appended, so a trace handed out earlier stays as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.trace.container import CounterTable, InstantTable, SpanTable, StringTable, Trace
from workbench.trace.recorder import Recorder

# Columns given by their string-table ids, remapped from a batch's own table to the whole's.
TEXT_COLUMNS = frozenset({"track", "name"})


class Columns:
    """Numpy columns that grow by appending, in place until their room runs out."""

    def __init__(self, dtypes: dict[str, Any], attrs: bool = True) -> None:
        self.arrays = {name: np.empty(0, dtype=dtype) for name, dtype in dtypes.items()}
        self.attrs: list[dict[str, Any] | None] | None = [] if attrs else None
        self.length = 0

    def append(self, table: Any, ids: np.ndarray) -> None:
        """Append a table built from a batch of rows; `ids` maps its string ids to the whole's."""
        n = len(table)
        if not n:
            return
        end = self.length + n
        for name, array in self.arrays.items():
            if end > len(array):
                grown = np.empty(max(end, 2 * len(array), 1024), dtype=array.dtype)
                grown[:self.length] = array[:self.length]
                self.arrays[name] = array = grown
            values = getattr(table, name)
            array[self.length:end] = ids[values] if name in TEXT_COLUMNS else values
        if self.attrs is not None:
            self.attrs.extend(table.attrs)
        self.length = end

    def view(self) -> dict[str, Any]:
        """The columns so far: views, so later appends (past their end) leave them unchanged."""
        out: dict[str, Any] = {name: array[:self.length] for name, array in self.arrays.items()}
        if self.attrs is not None:
            out["attrs"] = self.attrs[:self.length]
        return out


class GrowingTrace:
    """`update()`: the recorder's trace so far, turning only the rows recorded since the last call."""

    def __init__(self, recorder: Recorder, meta: dict[str, Any] | None = None) -> None:
        self.recorder = recorder
        self.meta = {"origin_ns": recorder.origin_ns, **(meta or {})}
        self.strings = StringTable()
        self.cursor = (0, 0, 0)
        ids, whole = np.int32, np.int64
        self._spans = Columns({"track": ids, "name": ids, "start_ns": whole, "end_ns": whole,
                               "partition": ids, "worker": ids})
        self._instants = Columns({"track": ids, "name": ids, "ts_ns": whole, "partition": ids, "worker": ids})
        self._counters = Columns({"track": ids, "name": ids, "ts_ns": whole, "value": np.float64},
                                 attrs=False)

    def update(self) -> Trace:
        spans, instants, counters, self.cursor = self.recorder.drain(self.cursor)
        if spans or instants or counters:
            batch = Trace.from_rows(spans, instants, counters)
            ids = np.array([self.strings.intern(v) for v in batch.strings.values] or [0], dtype=np.int32)
            self._spans.append(batch.spans, ids)
            self._instants.append(batch.instants, ids)
            self._counters.append(batch.counters, ids)
        strings = StringTable(list(self.strings.values), dict(self.strings.index))
        return Trace(strings, SpanTable(**self._spans.view()), InstantTable(**self._instants.view()),
                     CounterTable(**self._counters.view()), {}, dict(self.meta),
                     self.recorder.thread_names_now())
