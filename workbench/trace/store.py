"""The on-disk trace format (`.wbtrace`), versioned, loading back exactly.

A `.wbtrace` file is a compressed numpy archive (no pickled objects: it is safe to open a
file from someone else). Entry `header` holds UTF-8 JSON: format name and version, the
string table, configuration, run facts, thread names and the attribute schema. Spans,
instants and counters are stored as columns; attributes as one column per key with a
presence mask, typed (int, float, bool, str) where every value of the key shares a type and
JSON text otherwise. Columns make millions of spans cheap to write, read and query.

While a run goes on its records stream to a journal (`<trace>.wbjournal`, journal.py) that
the run removes once this file is written; `load` reads a journal a killed run left as well,
named by itself or by the trace it was meant to become (when that file is not there).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from workbench.trace import journal_read, output, store_read
from workbench.trace.container import (
    CounterTable,
    InstantTable,
    SpanTable,
    StringTable,
    Trace,
)
from workbench.trace.journal_format import MAGIC as JOURNAL_MAGIC
from workbench.trace.journal_format import SUFFIX as JOURNAL_SUFFIX
from workbench.trace.store_read import TraceFormatError

FORMAT = "workbench-trace"
VERSION = 1
SUFFIX = ".wbtrace"
ZIP_MAGIC = b"PK\x03\x04"


def save(trace: Trace, path: str | os.PathLike[str], *, fresh: bool = False) -> Path:
    """Write `trace` to `path` (never over a device, FIFO, socket or symbolic link); with
    `fresh`, an existing file is kept and the next free name taken. Returns the path written."""
    arrays: dict[str, np.ndarray] = {}
    schema: dict[str, list[dict[str, Any]]] = {}
    for table_name, table in (("spans", trace.spans), ("instants", trace.instants)):
        for column in ("track", "name", "partition", "worker"):
            arrays[f"{table_name}.{column}"] = getattr(table, column)
        time_columns = ("start_ns", "end_ns") if table_name == "spans" else ("ts_ns",)
        for column in time_columns:
            arrays[f"{table_name}.{column}"] = getattr(table, column)
        schema[table_name] = _encode_attrs(table_name, table.attrs, arrays)
    for column in ("track", "name", "ts_ns", "value"):
        arrays[f"counters.{column}"] = getattr(trace.counters, column)
    header = {
        "format": FORMAT, "version": VERSION, "strings": trace.strings.values,
        "config": trace.config, "meta": trace.meta, "thread_names": trace.thread_names,
        "attrs": schema,
    }
    arrays["header"] = np.frombuffer(json.dumps(header, default=_json_default).encode(), np.uint8)
    # Written beside the target and renamed, so a crash mid-save never leaves half a trace.
    return output.write(
        path, lambda handle: np.savez_compressed(handle, allow_pickle=False, **arrays), fresh=fresh)


def load(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    if not path.exists():
        # A run killed before its save left only its journal: the trace is what it flushed.
        journal = path.with_name(path.name + JOURNAL_SUFFIX)
        if path.name and journal.is_file():
            return journal_read.read(journal)[0]
        raise FileNotFoundError(f"no trace file at {path}")
    if path.is_dir():
        raise TraceFormatError(f"{path} is a directory, not a workbench trace")
    if not path.is_file():
        raise TraceFormatError(f"{path} is not a regular file (a device, FIFO or socket): not a trace")
    with open(path, "rb") as handle:
        head = handle.read(len(JOURNAL_MAGIC))
    if head == JOURNAL_MAGIC:  # what a run left that ended before saving: read up to the damage
        return journal_read.read(path)[0]
    if head[:len(ZIP_MAGIC)] != ZIP_MAGIC:
        # Say what the file is not, rather than what a zip reader makes of it.
        raise TraceFormatError(f"{path} is not a workbench trace (not a zip archive nor a journal; it begins "
                               f"{head[:len(ZIP_MAGIC)]!r})")
    header, columns = store_read.read(path, FORMAT, VERSION)
    try:
        return _build(header, columns)
    except (KeyError, ValueError, IndexError, TypeError) as err:
        raise TraceFormatError(f"{path} is damaged (inconsistent columns: {err})") from None


def _build(header: dict[str, Any], c: dict[str, np.ndarray]) -> Trace:
    strings = StringTable.of(header["strings"])
    n_spans = len(c["spans.start_ns"])
    n_instants = len(c["instants.ts_ns"])
    spans = SpanTable(
        c["spans.track"], c["spans.name"], c["spans.start_ns"], c["spans.end_ns"],
        c["spans.partition"], c["spans.worker"],
        _decode_attrs("spans", header["attrs"]["spans"], c, n_spans),
    )
    instants = InstantTable(
        c["instants.track"], c["instants.name"], c["instants.ts_ns"], c["instants.partition"],
        c["instants.worker"], _decode_attrs("instants", header["attrs"]["instants"], c, n_instants),
    )
    counters = CounterTable(
        c["counters.track"], c["counters.name"], c["counters.ts_ns"], c["counters.value"],
    )
    for table, size in ((spans, n_spans), (instants, n_instants)):
        for column in ("track", "name", "partition", "worker"):
            if len(getattr(table, column)) != size:
                raise ValueError(f"column {column} has {len(getattr(table, column))} rows, not {size}")
    top = len(strings.values)
    for ids in (spans.track, spans.name, instants.track, instants.name, counters.track, counters.name):
        if len(ids) and (ids.min() < 0 or ids.max() >= top):
            raise ValueError("a string index points outside the string table")
    return Trace(
        strings, spans, instants, counters, header.get("config", {}), header.get("meta", {}),
        header.get("thread_names", {}),
    )


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return "json"


_DTYPES = {"bool": np.bool_, "int": np.int64, "float": np.float64}


def _encode_attrs(
    table: str, rows: list[dict[str, Any] | None], arrays: dict[str, np.ndarray],
) -> list[dict[str, Any]]:
    keys: dict[str, set[str]] = {}
    for row in rows:
        if row:
            for key, value in row.items():
                keys.setdefault(key, set()).add(_kind(value))
    schema = []
    n = len(rows)
    for number, (key, kinds) in enumerate(keys.items()):
        kind = kinds.pop() if len(kinds) == 1 else "json"
        present = np.zeros(n, dtype=bool)
        values: list[Any] = [None] * n
        for i, row in enumerate(rows):
            if row and key in row:
                present[i] = True
                values[i] = row[key]
        prefix = f"{table}.attr{number}"
        arrays[prefix + ".present"] = present
        entry: dict[str, Any] = {"key": key, "kind": kind}
        if kind in _DTYPES:
            filler = _DTYPES[kind](0)
            arrays[prefix + ".values"] = np.array(
                [v if p else filler for v, p in zip(values, present, strict=True)], dtype=_DTYPES[kind]
            )
        elif kind == "str":
            table_of = StringTable()
            arrays[prefix + ".values"] = np.array(
                [table_of.intern(v) if p else -1 for v, p in zip(values, present, strict=True)],
                dtype=np.int32,
            )
            entry["strings"] = table_of.values
        else:
            text = json.dumps([v for v, p in zip(values, present, strict=True) if p], default=_json_default)
            arrays[prefix + ".values"] = np.frombuffer(text.encode(), np.uint8)
        schema.append(entry)
    return schema


def _decode_attrs(
    table: str, schema: list[dict[str, Any]], c: dict[str, np.ndarray], n: int,
) -> list[dict[str, Any] | None]:
    rows: list[dict[str, Any] | None] = [None] * n
    for number, entry in enumerate(schema):
        prefix = f"{table}.attr{number}"
        present = c[prefix + ".present"]
        raw = c[prefix + ".values"]
        key, kind = entry["key"], entry["kind"]
        where = np.flatnonzero(present)
        if kind in _DTYPES:
            values = raw[where].tolist()
        elif kind == "str":
            strings = entry["strings"]
            values = [strings[i] for i in raw[where].tolist()]
        else:
            values = json.loads(bytes(raw).decode())
        if len(values) != len(where):
            raise ValueError(f"attribute {key!r} has {len(values)} values for {len(where)} rows")
        for i, value in zip(where.tolist(), values, strict=True):
            row = rows[i]
            if row is None:
                row = rows[i] = {}
            row[key] = value
    return rows


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot store attribute value {value!r} of type {type(value).__name__}")
