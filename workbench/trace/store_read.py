"""Reading a `.wbtrace` archive from an untrusted source at a bounded cost, every field checked.

A trace may come from anyone, so nothing it declares is believed before it is checked against
the file: the zip members' declared sizes against the archive's size (at most `MAX_RATIO`
times larger, beyond a `FLOOR` that any small file may use), each column's `.npy` header
(shape and dtype) against its member's declared size, before a byte of it is allocated. Then
the header's fields and the columns' dtypes, lengths and values are checked against the
format, and every fault ends in a `TraceFormatError` naming the file and the field, the column
or the row at fault.

Contract: `read(path, format, version) -> (header, columns)`, columns cast to the dtypes the trace uses.
"""

from __future__ import annotations

import json
import re
import tokenize
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from workbench.trace.store_schema import facts_fault

# A trace's columns (timestamps above all) deflate a few times over; 64x is generous for real
# traces and bounds what a crafted one (2^30 zeros in 8 MB) can make the loader allocate.
MAX_RATIO = 64
FLOOR = 64 << 20
MAX_MEMBERS = 4096
MAX_DEPTH = 64  # nesting of JSON in the header and in attribute values
# Times and their differences must fit in int64: refuse what would overflow an analysis.
TIME_LIMIT = 2**62
# No recording lasts 104 days: a trace spanning more holds a garbage time somewhere.
EXTENT_LIMIT = 2**53
KINDS = ("bool", "int", "float", "str", "json")
TABLES = {
    "spans": ("track", "name", "partition", "worker", "start_ns", "end_ns"),
    "instants": ("track", "name", "partition", "worker", "ts_ns"),
    "counters": ("track", "name", "ts_ns", "value"),
}
_INT32 = (-(2**31), 2**31 - 1)


class TraceFormatError(ValueError):
    """A file that is not a workbench trace, or a damaged or too-new one."""


def read(path: Path, format: str, version: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if "header.npy" not in names:  # another zip file: say so before reading it
                entries = ", ".join(name.removesuffix(".npy") for name in names[:3]) or "none"
                raise TraceFormatError(f"{path} is not a workbench trace (no readable header: a zip "
                                       f"archive holding {entries})")
            raw = _members(path, archive)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as err:
        raise TraceFormatError(
            f"{path} is not a workbench trace (a damaged or cut-off zip archive: {err})") from None
    header = _json(path, "header", raw.pop("header"))
    _check_header(path, header, format, version)
    return header, _check_columns(path, header, raw)


def _members(path: Path, archive: zipfile.ZipFile) -> dict[str, np.ndarray]:
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise TraceFormatError(f"{path} is damaged ({len(infos)} zip members; a trace has far fewer)")
    size = path.stat().st_size
    declared = sum(info.file_size for info in infos)
    if declared > max(FLOOR, MAX_RATIO * size):
        raise TraceFormatError(
            f"{path} is damaged: its members declare {declared} bytes in a {size}-byte file "
            f"(more than {MAX_RATIO} times its size)")
    return {info.filename.removesuffix(".npy"): _array(path, archive, info) for info in infos}


def _array(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    name = info.filename.removesuffix(".npy")
    with archive.open(info) as handle:
        try:
            major, _ = np.lib.format.read_magic(handle)
            form = np.lib.format
            reader = form.read_array_header_1_0 if major == 1 else form.read_array_header_2_0
            shape, _, dtype = reader(handle)
        except (ValueError, TypeError, SyntaxError, tokenize.TokenError) as err:  # numpy parses it as Python
            raise TraceFormatError(f"{path} is damaged (column {name}: not a numpy array: {err})") from None
        if len(shape) != 1 or dtype.kind not in "biuf" or dtype.hasobject:
            raise TraceFormatError(
                f"{path} is damaged (column {name} is {dtype.str} of shape {shape}, not a column of numbers)")
        want = shape[0] * dtype.itemsize
        if want != info.file_size - handle.tell():
            raise TraceFormatError(
                f"{path} is damaged (column {name} declares {shape[0]} rows of {dtype.str} "
                f"but its member holds {info.file_size - handle.tell()} bytes)")
        column = np.empty(shape[0], dtype)
        view = memoryview(column.view(np.uint8).data)
        done = 0
        while done < want and (got := handle.readinto(view[done:])):  # type: ignore[attr-defined]
            done += got
        if done != want:
            raise TraceFormatError(f"{path} is damaged (column {name} is cut off)")
    return column


def _json(path: Path, field: str, raw: np.ndarray) -> Any:
    return parse_json(path, field, raw.tobytes())


def parse_json(path: Path, field: str, text: bytes) -> Any:
    """JSON text from the file, its nesting bounded; TraceFormatError naming `field` otherwise."""
    # Measured before parsing: the parser recurses in C, and past a raised recursion limit a
    # deep enough text overflows the stack instead of raising RecursionError.
    if _depth(text) > MAX_DEPTH:
        raise TraceFormatError(f"{path} is damaged ({field} nests deeper than {MAX_DEPTH} levels)")
    try:
        return json.loads(text.decode())
    except (ValueError, RecursionError) as err:
        raise TraceFormatError(f"{path} is not a workbench trace (no readable {field}: {err})") from None


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def _depth(text: bytes) -> int:
    """How deep arrays and objects nest in JSON text (brackets inside strings not counted)."""
    codes = np.frombuffer(_JSON_STRING.sub(b"", text), np.uint8)
    if not len(codes):
        return 0
    step = np.isin(codes, (0x5B, 0x7B)).astype(np.int32) - np.isin(codes, (0x5D, 0x7D))
    return int(np.cumsum(step).max())


def _fault(path: Path, field: str, what: str) -> TraceFormatError:
    return TraceFormatError(f"{path} is damaged (header field {field!r} {what})")


def _check_header(path: Path, header: Any, format: str, version: int) -> None:
    if not isinstance(header, dict) or header.get("format") != format:
        raise TraceFormatError(f"{path} is not a workbench trace (no workbench header)")
    found = header.get("version")
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise _fault(path, "version", f"is {found!r}, not a format version")
    if found > version:
        raise TraceFormatError(f"{path} was written by a newer workbench (trace format {found}, "
                               f"this one reads up to {version})")
    _strings(path, "strings", header.get("strings"))
    for field in ("config", "meta", "thread_names"):
        if not isinstance(header.setdefault(field, {}), dict):
            raise _fault(path, field, f"is {type(header[field]).__name__}, not an object")
    if not all(isinstance(v, str) for v in header["thread_names"].values()):
        raise _fault(path, "thread_names", "holds a name that is not a string")
    fault = facts_fault(header["config"], header["meta"])
    if fault:
        raise TraceFormatError(f"{path} is damaged ({fault})")
    attrs = header.get("attrs")
    if not isinstance(attrs, dict):
        raise _fault(path, "attrs", "is missing or not an object")
    for table in ("spans", "instants"):
        schema = attrs.get(table)
        if not isinstance(schema, list):
            raise _fault(path, f"attrs.{table}", "is missing or not a list")
        for number, entry in enumerate(schema):
            field = f"attrs.{table}[{number}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
                raise _fault(path, field, "has no string 'key'")
            if entry.get("kind") not in KINDS:
                raise _fault(path, field, f"has kind {entry.get('kind')!r}, not one of {', '.join(KINDS)}")
            if entry["kind"] == "str":
                _strings(path, field + ".strings", entry.get("strings"))


def _strings(path: Path, field: str, value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fault(path, field, "is not a list of strings")


def _check_columns(path: Path, header: dict[str, Any], raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    columns: dict[str, np.ndarray] = {}
    top = len(header["strings"])
    for table, names in TABLES.items():
        size = None
        for name in names:
            key = f"{table}.{name}"
            if key not in raw:
                raise TraceFormatError(f"{path} is damaged (no column {key})")
            column = raw[key]
            if size is None:
                size = len(column)
            elif len(column) != size:
                raise TraceFormatError(f"{path} is damaged (column {key} has {len(column)} rows, not {size})")
            if name == "value":
                columns[key] = _cast(path, key, column, "biuf", np.float64, None)
            elif name.endswith("_ns"):
                columns[key] = _cast(path, key, column, "iu", np.int64, (-TIME_LIMIT, TIME_LIMIT))
            else:
                bounds = (0, top - 1) if name in ("track", "name") else _INT32
                columns[key] = _cast(path, key, column, "iu", np.int32, bounds)
        if table != "counters":
            _check_attrs(path, table, header["attrs"][table], raw, columns, size or 0)
    late = np.flatnonzero(columns["spans.end_ns"] < columns["spans.start_ns"])
    if len(late):
        row = int(late[0])
        raise TraceFormatError(
            f"{path} is damaged (span {row} ends before it starts: start {columns['spans.start_ns'][row]}, "
            f"end {columns['spans.end_ns'][row]} ns; {len(late)} such spans)")
    times = [columns[key] for key in ("spans.start_ns", "spans.end_ns", "instants.ts_ns", "counters.ts_ns")]
    filled = [t for t in times if len(t)]
    if filled:
        first = min(int(t.min()) for t in filled)
        last = max(int(t.max()) for t in filled)
        if last - first > EXTENT_LIMIT:
            raise TraceFormatError(f"{path} is damaged (its times run from {first} to {last} ns, over "
                                   f"{EXTENT_LIMIT // 86_400_000_000_000} days: a time is garbage)")
    return columns


def _cast(
    path: Path, key: str, column: np.ndarray, kinds: str, dtype: Any, bounds: tuple[int, int] | None,
) -> np.ndarray:
    if column.dtype.kind not in kinds:
        raise TraceFormatError(
            f"{path} is damaged (column {key} holds {column.dtype}, not {np.dtype(dtype)})")
    if bounds is not None and len(column):
        low, high = int(column.min()), int(column.max())
        if low < bounds[0] or high > bounds[1]:
            bad = low if low < bounds[0] else high
            raise TraceFormatError(
                f"{path} is damaged (column {key} holds {bad}, outside {bounds[0]}..{bounds[1]})")
    return column.astype(dtype, copy=False)


_ATTR_DTYPES = {"bool": ("b", np.bool_), "int": ("iu", np.int64), "float": ("biuf", np.float64),
                "str": ("iu", np.int32)}


def _check_attrs(
    path: Path, table: str, schema: list[dict[str, Any]], raw: dict[str, np.ndarray],
    columns: dict[str, np.ndarray], size: int,
) -> None:
    for number, entry in enumerate(schema):
        prefix = f"{table}.attr{number}"
        for part in (".present", ".values"):
            if prefix + part not in raw:
                raise TraceFormatError(f"{path} is damaged (no column {prefix + part} for "
                                       f"attribute {entry['key']!r})")
        present = raw[prefix + ".present"]
        if present.dtype.kind != "b" or len(present) != size:
            raise TraceFormatError(f"{path} is damaged (column {prefix}.present is not {size} booleans)")
        columns[prefix + ".present"] = present
        values = raw[prefix + ".values"]
        kind = entry["kind"]
        if kind == "json":
            if values.dtype != np.uint8:
                raise TraceFormatError(f"{path} is damaged (column {prefix}.values is not JSON text)")
            decoded = _json(path, f"attribute {entry['key']!r}", values)
            if not isinstance(decoded, list) or len(decoded) != int(present.sum()):
                raise TraceFormatError(f"{path} is damaged (attribute {entry['key']!r} does not hold "
                                       f"one value per row that has it)")
            columns[prefix + ".values"] = values
            continue
        if len(values) != size:
            raise TraceFormatError(f"{path} is damaged (column {prefix}.values has {len(values)} rows, "
                                   f"not {size})")
        kinds, dtype = _ATTR_DTYPES[kind]
        bounds = (0, len(entry["strings"]) - 1) if kind == "str" else None
        shown = values[present] if kind == "str" else values
        _cast(path, prefix + ".values", shown, kinds, dtype, bounds)
        columns[prefix + ".values"] = values.astype(dtype, copy=False)
