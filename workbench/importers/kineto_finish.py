"""Kineto's events placed once the whole trace is read: see kineto.py for where each goes.

A synchronisation record's thread and a ROCm copy's size come from the runtime call of the
same correlation, which may come later in the file; the profiler's recording window becomes
an instant. Nothing here holds a list the size of the trace (the rows are walked, not
listed), so the import's peak stays where the decoding put it.

Contract: `place_kineto(columns)`, on a trace that is not our own export.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.importers import kineto
from workbench.importers.chrome_events import Columns


def place_kineto(c: Columns) -> None:
    cats = np.frombuffer(c.cat, np.int8).copy()  # a copy: the rows are deleted from below it
    rows = np.flatnonzero(cats)
    if not len(rows):
        return
    c.report.format = "Kineto (PyTorch profiler) trace JSON"
    text = c.strings.values
    syncs: list[int] = []
    unsized: list[dict[str, Any]] = []
    windows: list[int] = []
    for i in map(int, rows):
        code = int(cats[i])
        if kineto.CATEGORY[code] == kineto.WINDOW:
            windows.append(i)
            continue
        pid, tid = c.thread_keys[c.thread[i]]
        where = kineto.place(code, text[c.name[i]], pid, tid, c.attrs[i])
        if where is None:
            continue
        c.place[i] = c.place_of("cuda", c.thread[i]) if where.api else c.place_of("track", where.track)
        c.name[i] = c.strings.intern(where.name)
        attrs = c.attrs[i] = where.attrs
        if where.sync:
            syncs.append(i)
        elif attrs is not None and kineto.CATEGORY[code] == kineto.MEMCPY and "bytes" not in attrs:
            unsized.append(attrs)
    if syncs or unsized:
        _from_calls(c, rows, syncs, unsized)
    _windows_to_instants(c, windows)


def _from_calls(c: Columns, rows: np.ndarray, syncs: list[int], unsized: list[dict[str, Any]]) -> None:
    """A sync record on its caller's cuda/ track; a copy's size from its call (as ROCm writes it)."""
    wanted = {(c.attrs[i] or {}).get("correlation") for i in syncs} | {a.get("correlation") for a in unsized}
    wanted = {w for w in wanted if isinstance(w, int | str)}
    cuda = c.places_of_kind("cuda")
    caller: dict[Any, int] = {}
    calls: list[dict[str, Any]] = []
    for i in map(int, rows):  # the sync records are not on cuda/ tracks yet
        attrs = c.attrs[i]
        corr = attrs.get("correlation") if attrs and c.place[i] in cuda else None
        if attrs and isinstance(corr, int | str) and corr in wanted:
            caller.setdefault(corr, c.thread[i])
            calls.append(attrs)
    kineto.size_copies(unsized, calls)
    for i in syncs:
        corr = (c.attrs[i] or {}).get("correlation")
        if isinstance(corr, int | str) and corr in caller:
            c.place[i] = c.place_of("cuda", caller[corr])


def _windows_to_instants(c: Columns, windows: list[int]) -> None:
    """The profiler's recording window is no work of its pseudo-thread: an instant at its start."""
    for i in windows:
        c.i_ts.append(c.start[i])
        c.i_thread.append(c.thread[i])
        c.i_place.append(c.place[i])
        c.i_name.append(c.name[i])
        c.i_partition.append(c.partition[i])
        c.i_worker.append(c.worker[i])
        c.i_attrs.append({**(c.attrs[i] or {}), "profiler_window": True, "dur_ns": c.end[i] - c.start[i]})
    for i in reversed(windows):
        for column in (c.order, c.start, c.end, c.thread, c.place, c.name, c.partition, c.worker, c.cat):
            del column[i]
        del c.attrs[i]
