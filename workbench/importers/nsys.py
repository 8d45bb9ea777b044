"""nsys SQLite exports in: NVTX ranges, kernels, memory copies, OS runtime calls, threads.

Tables (schema of the 2024-2025 exporter; every one optional, each absence named in
`meta["import"]["missing"]`): `NVTX_EVENTS` (eventType 59 push/pop and 60 start/end ranges,
34 marks, 75 domain creation; text inline or via textId), `CUPTI_ACTIVITY_KIND_KERNEL`,
`CUPTI_ACTIVITY_KIND_MEMCPY`, `OSRT_API`, `StringIds`, `ThreadNames`. A thread id is
globalTid & 0xFFFFFF. Timestamps are nanoseconds.

A capture of a workbench run reads back onto the workbench's own tracks: threads are
recognised by the ranges they hold (synthesis, prep_msm, ntt_msm_h), the mutex's and the
barrier's own ranges become `mutex/gpu0` and `barrier/worker<w>` spans, and partitions are
numbered as the queue hands them out (synthesis order, then pickup order).

Contract: `load_nsys(path) -> Trace`.
"""

from __future__ import annotations

import os
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from workbench.importers.nsys_roles import assign_roles
from workbench.importers.report import ImportFailed, ImportReport
from workbench.trace.container import Trace

NVTX_PUSH_POP, NVTX_START_END, NVTX_MARK, NVTX_DOMAIN = 59, 60, 34, 75
DOMAIN = "workbench"
COPY_KINDS = {1: "h2d", 2: "d2h", 8: "d2d", 10: "p2p"}
MEMORY_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed"}
KERNELS, MEMCPY = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"


def load_nsys(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no export at {path}")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise ImportFailed(f"{path}: cannot open as SQLite ({err})") from None
    try:
        return _Reader(conn, str(path)).read()
    except sqlite3.DatabaseError as err:
        raise ImportFailed(f"{path}: not a readable nsys SQLite export ({err})") from None
    finally:
        conn.close()


class _Reader:
    def __init__(self, conn: sqlite3.Connection, source: str) -> None:
        self.conn = conn
        self.report = ImportReport("nsys SQLite export", source)
        self.tables = {
            name: self._columns(name)
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        }
        self.strings: dict[int, str] = {}

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self.conn.execute(f'PRAGMA table_info("{table}")')}

    def _rows(self, table: str, wanted: tuple[str, ...], needed: tuple[str, ...]) -> list[dict[str, Any]]:
        columns = self.tables.get(table)
        if columns is None:
            return []
        lacking = [c for c in needed if c not in columns]
        if lacking:
            self.report.missing.append(f"{table} has no column {', '.join(lacking)}: table skipped")
            return []
        for column in wanted:
            if column not in columns and column not in needed:
                self.report.missing.append(f"column {table}.{column}")
        select = ", ".join(f'"{c}"' if c in columns else f"NULL AS {c}" for c in wanted)
        cursor = self.conn.execute(f'SELECT rowid, {select} FROM "{table}"')
        rows = [dict(zip(("rowid", *wanted), row, strict=True)) for row in cursor]
        self.report.read += len(rows)
        return rows

    def read(self) -> Trace:
        wanted = ("NVTX_EVENTS", KERNELS, MEMCPY)
        if not any(t in self.tables for t in wanted):
            found = ", ".join(sorted(self.tables)) or "none"
            raise ImportFailed(
                f"{self.report.source}: no NVTX_EVENTS, {KERNELS} or {MEMCPY} table (tables: {found})"
            )
        for table, what in (("NVTX_EVENTS", "no NVTX ranges"), (KERNELS, "no kernel records"),
                            (MEMCPY, "no memory copy records"), ("OSRT_API", "no OS runtime calls"),
                            ("StringIds", "names shown as ids"), ("ThreadNames", "threads named by id")):
            if table not in self.tables:
                self.report.missing.append(f"table {table} ({what})")
        self.strings = {
            int(r["id"]): str(r["value"]) for r in self._rows("StringIds", ("id", "value"), ("id", "value"))
            if isinstance(r["id"], int)
        }
        threads = self._thread_names()
        spans: list[tuple[Any, ...]] = []
        instants: list[tuple[Any, ...]] = []
        ranges = self._nvtx(instants)
        roles = assign_roles(ranges, threads)
        spans.extend(roles.spans)
        instants.extend(roles.instants)
        spans.extend(self._kernels())
        spans.extend(self._memcpy())
        spans.extend(self._osrt(roles.track_of, threads))
        if not spans and not instants:
            raise ImportFailed(f"{self.report.source}: the export holds no ranges, kernels or copies")
        self.report.kept = len(spans) + len(instants)
        if roles.partitions_inferred:
            self.report.reconstructed = "partitions numbered in synthesis and pickup order (NVTX has no ids)"
        meta = {"outcome": "completed" if roles.finished else "unknown", "import": self.report.as_meta()}
        config = {"gpu_workers": roles.workers} if roles.workers else {}
        return Trace.from_rows(spans, instants, (), config, meta, roles.thread_names)

    def _string(self, value: Any, fallback: str) -> str:
        if isinstance(value, int):
            return self.strings.get(value, f"{fallback}#{value}")
        return fallback

    def _thread_names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        for r in self._rows("ThreadNames", ("nameId", "globalTid"), ("nameId", "globalTid")):
            if isinstance(r["globalTid"], int):
                names[r["globalTid"] & 0xFFFFFF] = self._string(r["nameId"], "thread")
        return names

    def _time(self, r: dict[str, Any], table: str) -> tuple[int, int] | None:
        start, end = r.get("start"), r.get("end")
        if not isinstance(start, int) or not isinstance(end, int) or abs(start) >= 2**62 or abs(end) >= 2**62:
            self.report.skip(f"{table} row without integer times", f"{table} row {r['rowid']}")
            return None
        if end < start:
            self.report.skip(f"{table} row ending before it starts", f"{table} row {r['rowid']}")
            return None
        return start, end

    def _nvtx(self, instants: list[tuple[Any, ...]]) -> dict[int, list[tuple[int, int, str]]]:
        rows = self._rows("NVTX_EVENTS", ("start", "end", "eventType", "text", "textId", "globalTid",
                                          "domainId"), ("start", "eventType"))
        domains = {r["domainId"]: r["text"] for r in rows if r["eventType"] == NVTX_DOMAIN}
        ours = {d for d, name in domains.items() if name == DOMAIN}
        if rows and not ours:
            self.report.extra["nvtx_domains"] = "no workbench domain: ranges of every domain kept"
        by_thread: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
        for r in rows:
            kind = r["eventType"]
            if kind == NVTX_DOMAIN:
                continue
            if ours and r["domainId"] not in ours:
                self.report.skip("NVTX event of another domain", f"NVTX_EVENTS row {r['rowid']}")
                continue
            name = r["text"] if isinstance(r["text"], str) else self._string(r["textId"], "range")
            tid = r["globalTid"] & 0xFFFFFF if isinstance(r["globalTid"], int) else 0
            if kind == NVTX_MARK:
                if isinstance(r["start"], int):
                    instants.append((f"thread/{tid}", name, r["start"], -1, -1, None))
                continue
            if kind not in (NVTX_PUSH_POP, NVTX_START_END):
                self.report.skip(f"NVTX event type {kind}", f"NVTX_EVENTS row {r['rowid']}")
                continue
            if r["end"] is None or r["end"] == -1:
                self.report.skip("NVTX range never closed", f"NVTX_EVENTS row {r['rowid']}")
                continue
            times = self._time(r, "NVTX_EVENTS")
            if times is not None:
                by_thread[tid].append((times[0], times[1], name))
        return by_thread

    def _kernels(self) -> list[tuple[Any, ...]]:
        out = []
        for r in self._rows(KERNELS, ("start", "end", "deviceId", "streamId", "shortName", "demangledName",
                                       "correlationId"), ("start", "end")):
            times = self._time(r, KERNELS)
            if times is None:
                continue
            name = self._string(r["shortName"], "") or self._string(r["demangledName"], "kernel")
            attrs = {"correlation": r["correlationId"]} if isinstance(r["correlationId"], int) else None
            track = f"gpu{_int(r['deviceId'])}/stream/{_int(r['streamId'])}"
            out.append((track, name, *times, -1, -1, attrs))
        return out

    def _memcpy(self) -> list[tuple[Any, ...]]:
        out = []
        for r in self._rows(MEMCPY, ("start", "end", "deviceId", "streamId", "bytes", "copyKind", "srcKind",
                                      "dstKind"), ("start", "end")):
            times = self._time(r, MEMCPY)
            if times is None:
                continue
            kind = COPY_KINDS.get(r["copyKind"], "copy") if isinstance(r["copyKind"], int) else "copy"
            attrs: dict[str, Any] = {"stream": _int(r["streamId"])}
            if isinstance(r["bytes"], int):
                attrs["bytes"] = r["bytes"]
            for key, column in (("src_kind", "srcKind"), ("dst_kind", "dstKind")):
                if isinstance(r[column], int):
                    attrs[key] = MEMORY_KINDS.get(r[column], str(r[column]))
            out.append((f"gpu{_int(r['deviceId'])}/copy", kind, *times, -1, -1, attrs))
        return out

    def _osrt(self, track_of: dict[int, str], threads: dict[int, str]) -> list[tuple[Any, ...]]:
        out = []
        for r in self._rows("OSRT_API", ("start", "end", "nameId", "globalTid"), ("start", "end")):
            times = self._time(r, "OSRT_API")
            if times is None:
                continue
            tid = r["globalTid"] & 0xFFFFFF if isinstance(r["globalTid"], int) else 0
            owner = track_of.get(tid) or f"thread/{tid}"
            out.append((f"os/{owner}", self._string(r["nameId"], "call"), *times, -1, -1, None))
        return out


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
