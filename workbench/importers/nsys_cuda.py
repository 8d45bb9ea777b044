"""The CUDA and OS runtime tables of an nsys export: device work, and the host calls around it.

Device rows become spans on the device's tracks: kernels on `gpu<d>/stream/<s>` (attrs
correlation, grid, block), copies on `gpu<d>/copy` named by direction (attrs stream, bytes,
src_kind, dst_kind, correlation), memsets on `gpu<d>/memset` (bytes, value, memory_kind).

Host rows become calls of a thread, placed by the caller of this module once it knows each
thread's track: CUDA runtime and driver calls (named from StringIds; attr correlation), the
synchronisation records (named for what was synchronised, on the thread whose API call they
belong to, found by correlation id) and OS runtime calls. A row of the process itself
(thread id 0 in its globalTid) belongs to the main thread, whose id is the process id; the
OS runtime rows of that kind that take no time are the profiler's own markers ("OS runtime
libraries profiling started"), kept as instants.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.importers.nsys_tables import STRING, Col, Export, Row, times
from workbench.model import tracks as tr

KERNELS, MEMCPY, MEMSET = (f"CUPTI_ACTIVITY_KIND_{t}" for t in ("KERNEL", "MEMCPY", "MEMSET"))
RUNTIME, DRIVER, SYNC = (f"CUPTI_ACTIVITY_KIND_{t}" for t in ("RUNTIME", "DRIVER", "SYNCHRONIZATION"))
OSRT = "OSRT_API"

# The exporter's own enumerations (ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND, ENUM_CUPTI_SYNC_TYPE).
# Array copies are named as the workbench's activity collector names them; unified-memory
# copies by their direction, marked `unified`.
COPY_KINDS = {1: "h2d", 2: "d2h", 3: "h2a", 4: "a2h", 5: "a2a", 6: "a2d", 7: "d2a", 8: "d2d", 9: "h2h",
              10: "p2p", 11: "h2d", 12: "d2h", 13: "d2d"}
UNIFIED_COPIES = frozenset((11, 12, 13))
MEMORY_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed", 5: "device_static",
                6: "managed_static", 7: "unknown"}
SYNC_KINDS = {0: "synchronize", 1: "event_synchronize", 2: "stream_wait_event", 3: "stream_synchronize",
              4: "context_synchronize"}
NO_ID = 0xFFFFFFFF  # a synchronisation record's stream or event when it has none
THREAD_BITS = 0xFFFFFFFFFFFF  # pid and tid of a globalTid; above them, the machine
UNKNOWN_THREAD = -1  # a row without a globalTid

SpanRow = tuple[str, str, int, int, int, int, "dict[str, Any] | None"]


@dataclass
class Call:
    """A host call of one thread; `thread` is the key `thread_key` gives."""

    thread: int
    name: str
    start: int
    end: int
    attrs: dict[str, Any] | None = None


@dataclass
class HostCalls:
    cuda: list[Call] = field(default_factory=list)
    os: list[Call] = field(default_factory=list)
    os_markers: list[Call] = field(default_factory=list)
    sync_without_call: int = 0


def thread_key(global_tid: Any) -> int:
    """(pid << 24) | tid of a globalTid ((globalTid >> 24) & 0xFFFFFF is the pid)."""
    if not isinstance(global_tid, int):
        return UNKNOWN_THREAD
    key = global_tid & THREAD_BITS
    pid, tid = key >> 24, key & 0xFFFFFF
    return key if tid else (pid << 24) | pid


def device_spans(export: Export) -> list[SpanRow]:
    return [*_kernels(export), *_copies(export), *_memsets(export)]


def _device_rows(export: Export, table: str, cols: tuple[Col, ...],
                 ) -> Iterator[tuple[Row, tuple[int, int], dict[str, Any]]]:
    base = (Col.of("start", required=True), Col.of("end", required=True), Col.of("deviceId", required=True),
            Col.of("streamId"), Col.of("correlationId"))
    for row in export.rows(table, base + cols):
        if row["deviceId"] < 0 or (row["streamId"] or 0) < 0:
            export.report.skip(f"{table} row with a negative device or stream", f"{table} row {row['rowid']}")
            continue
        span = times(export, row, table)
        if span is not None:
            yield row, span, {"correlation": row["correlationId"]} if row["correlationId"] is not None else {}


def _kernels(export: Export) -> list[SpanRow]:
    grid = tuple(Col.of(f"{what}{axis}") for what in ("grid", "block") for axis in "XYZ")
    cols = (Col.of("shortName", STRING), Col.of("demangledName|name", STRING), *grid)
    out: list[SpanRow] = []
    for row, (start, end), attrs in _device_rows(export, KERNELS, cols):
        name = row["shortName"] or row["demangledName"] or "kernel"
        for what in ("grid", "block"):
            dims = [row[f"{what}{axis}"] for axis in "XYZ"]
            if all(isinstance(d, int) for d in dims):
                attrs[what] = dims
        track = tr.stream_track(row["deviceId"], row["streamId"] if row["streamId"] is not None else 0)
        out.append((track, name, start, end, -1, -1, attrs or None))
    return out


def _copies(export: Export) -> list[SpanRow]:
    cols = (Col.of("bytes"), Col.of("copyKind"), Col.of("srcKind"), Col.of("dstKind"))
    out: list[SpanRow] = []
    for row, (start, end), attrs in _device_rows(export, MEMCPY, cols):
        kind = row["copyKind"]
        attrs = {"stream": row["streamId"] if row["streamId"] is not None else 0, **attrs}
        if row["bytes"] is not None:
            attrs["bytes"] = row["bytes"]
        for key, column in (("src_kind", "srcKind"), ("dst_kind", "dstKind")):
            if row[column] is not None:
                attrs[key] = MEMORY_KINDS.get(row[column], str(row[column]))
        if kind in UNIFIED_COPIES:
            attrs["unified"] = True
        out.append((tr.copy_track(row["deviceId"]), COPY_KINDS.get(kind, "copy"), start, end, -1, -1, attrs))
    return out


def _memsets(export: Export) -> list[SpanRow]:
    cols = (Col.of("bytes"), Col.of("value"), Col.of("memKind|memoryKind"))
    out: list[SpanRow] = []
    for row, (start, end), attrs in _device_rows(export, MEMSET, cols):
        attrs = {"stream": row["streamId"] if row["streamId"] is not None else 0, **attrs}
        for key in ("bytes", "value"):
            if row[key] is not None:
                attrs[key] = row[key]
        if row["memKind"] is not None:
            attrs["memory_kind"] = MEMORY_KINDS.get(row["memKind"], str(row["memKind"]))
        out.append((tr.memset_track(row["deviceId"]), "memset", start, end, -1, -1, attrs))
    return out


def host_calls(export: Export) -> HostCalls:
    calls = HostCalls()
    caller: dict[tuple[int, int], int] = {}  # (pid, correlation id) -> thread
    cols = (Col.of("start", required=True), Col.of("end", required=True), Col.of("globalTid"),
            Col.of("correlationId"), Col.of("nameId|name", STRING, required=True))
    for table in (RUNTIME, DRIVER):
        for row in export.rows(table, cols):
            span = times(export, row, table)
            if span is None:
                continue
            thread, correlation = thread_key(row["globalTid"]), row["correlationId"]
            attrs = None
            if correlation is not None:
                attrs = {"correlation": correlation}
                caller[(thread >> 24, correlation)] = thread
                caller.setdefault((UNKNOWN_THREAD, correlation), thread)
            calls.cuda.append(Call(thread, row["nameId"], *span, attrs))
    _syncs(export, caller, calls)
    _os_calls(export, calls)
    return calls


def _syncs(export: Export, caller: dict[tuple[int, int], int], calls: HostCalls) -> None:
    cols = (Col.of("start", required=True), Col.of("end", required=True), Col.of("deviceId"),
            Col.of("streamId"), Col.of("correlationId"), Col.of("globalPid"), Col.of("syncType"),
            Col.of("eventId"))
    for row in export.rows(SYNC, cols):
        span = times(export, row, SYNC)
        if span is None:
            continue
        pid = thread_key(row["globalPid"]) >> 24  # UNKNOWN_THREAD stays -1
        correlation = row["correlationId"]
        attrs: dict[str, Any] = {}
        for attr, column in (("correlation", "correlationId"), ("gpu", "deviceId"), ("stream", "streamId"),
                             ("event", "eventId")):
            if row[column] is not None and row[column] != NO_ID:
                attrs[attr] = row[column]
        thread = caller.get((pid, correlation), caller.get((UNKNOWN_THREAD, correlation)))
        if thread is None:
            calls.sync_without_call += 1
            thread = UNKNOWN_THREAD if pid < 0 else (pid << 24) | pid
        name = SYNC_KINDS.get(row["syncType"], "synchronize")
        calls.cuda.append(Call(thread, name, *span, attrs or None))


def _os_calls(export: Export, calls: HostCalls) -> None:
    cols = (Col.of("start", required=True), Col.of("end", required=True), Col.of("globalTid"),
            Col.of("nameId|name", STRING, required=True))
    for row in export.rows(OSRT, cols):
        span = times(export, row, OSRT)
        if span is None:
            continue
        call = Call(thread_key(row["globalTid"]), row["nameId"], *span)
        process_row = isinstance(row["globalTid"], int) and not row["globalTid"] & 0xFFFFFF
        (calls.os_markers if process_row and span[0] == span[1] else calls.os).append(call)

