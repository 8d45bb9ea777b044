"""nsys SQLite exports in: every span of any CUDA program, on the track grammar, with its role.

Tables read (schemas of the 2022-2025 exporters; every one optional, each absence named in
`meta["import"]["missing"]`, each column found under a renamed name in
`meta["import"]["schema"]`): `CUPTI_ACTIVITY_KIND_KERNEL`, `_MEMCPY` and `_MEMSET` (device
tracks), `_RUNTIME`, `_DRIVER` and `_SYNCHRONIZATION` (`cuda/<caller>`), `OSRT_API`
(`os/<caller>`), `NVTX_EVENTS` (every domain), `StringIds`, `ThreadNames`, `PROCESSES` and
`TARGET_INFO_GPU` (names of processes and devices, in `meta`). Only real tables are read,
never views (see nsys_tables.py). Timestamps are nanoseconds.

Threads: a globalTid carries the process and thread ids; a foreign program's thread is
`thread/<tid>`, or `thread/<pid>.<tid>` when threads of several processes appear. A capture
of a workbench run (NVTX domain `workbench`) reads back onto the pipeline's own tracks
(nsys_roles.py), and its threads' CUDA and OS calls onto `cuda/worker/0` and the like.

Contract: `load_nsys(path) -> Trace`; a file it cannot read raises `ImportFailed` naming the
file and the table or row, never another error.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from workbench.importers import nsys_cuda as cuda
from workbench.importers.nsys_nvtx import TABLE as NVTX
from workbench.importers.nsys_nvtx import read_nvtx
from workbench.importers.nsys_roles import assign_roles
from workbench.importers.nsys_tables import INT, STRING, TEXT, Col, Export
from workbench.importers.report import ImportFailed, ImportReport
from workbench.model import tracks as tr
from workbench.trace.container import Trace

# What each table gives, said in the report when it is absent.
TABLES = {
    NVTX: "no NVTX ranges", cuda.KERNELS: "no kernel records", cuda.MEMCPY: "no memory copy records",
    cuda.MEMSET: "no memset records", cuda.RUNTIME: "no CUDA runtime calls",
    cuda.DRIVER: "no CUDA driver calls", cuda.SYNC: "no synchronisation records",
    cuda.OSRT: "no OS runtime calls",
    "StringIds": "names shown as ids", "ThreadNames": "threads named by id",
    "PROCESSES": "processes named by id", "TARGET_INFO_GPU": "devices named by number",
}
CONTENT = (NVTX, cuda.KERNELS, cuda.MEMCPY, cuda.MEMSET, cuda.RUNTIME, cuda.DRIVER, cuda.SYNC, cuda.OSRT)


def load_nsys(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no export at {path}")
    try:
        # Quoted, so `#`, `?` and `%` in the name are part of it, not of the URI.
        conn = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise ImportFailed(f"{path}: cannot open as SQLite ({err})") from None
    try:
        # Text that is not UTF-8 is read with replacement characters, never as an error; the
        # schema's own SQL (views, triggers, defaults) is not trusted to run functions.
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA query_only = ON")
        return _read(Export(conn, ImportReport("nsys SQLite export", str(path))))
    except sqlite3.Error as err:
        raise ImportFailed(f"{path}: not a readable nsys SQLite export ({err})") from None
    finally:
        conn.close()


def _read(export: Export) -> Trace:
    report = export.report
    if not any(export.has(t) for t in CONTENT):
        found = ", ".join(sorted(export.tables.values())) or "none"
        notes = "; ".join(export.schema_notes)
        raise ImportFailed(f"{report.source}: no {', '.join(CONTENT[:-1])} or {CONTENT[-1]} table "
                           f"(tables: {found}{'; ' + notes if notes else ''})")
    report.missing.extend(f"table {t} ({what})" for t, what in TABLES.items() if not export.has(t))
    export.strings = {r["id"]: r["value"] for r in export.rows(
        "StringIds", (Col.of("id", required=True), Col.of("value", TEXT, required=True)))}
    names = _thread_names(export)
    nvtx = read_nvtx(export)
    device = cuda.device_spans(export)
    calls = cuda.host_calls(export)

    used = {c.thread for c in (*nvtx.foreign, *calls.cuda, *calls.os, *calls.os_markers)}
    used |= set(nvtx.ours) | {m.thread for m, _ in nvtx.marks}
    pids = {k >> 24 for k in used if k != cuda.UNKNOWN_THREAD}

    def thread_track(key: int) -> str:
        if key == cuda.UNKNOWN_THREAD:
            return tr.thread_track("unknown")
        pid, tid = key >> 24, key & 0xFFFFFF
        return tr.thread_track(f"{pid}.{tid}" if len(pids) > 1 else tid)

    roles = assign_roles(nvtx.ours, names, thread_track)

    def track(key: int) -> str:
        return roles.track_of.get(key) or thread_track(key)

    # Another domain's ranges stay on the thread's own track even on a pipeline thread, so
    # that a library's ranges never count as the pipeline's phases.
    spans: list[tuple[Any, ...]] = [*roles.spans, *device]
    spans.extend((thread_track(c.thread), c.name, c.start, c.end, -1, -1, c.attrs) for c in nvtx.foreign)
    for on, of_threads in ((tr.cuda_track, calls.cuda), (tr.os_track, calls.os)):
        spans.extend((on(track(c.thread)), c.name, c.start, c.end, -1, -1, c.attrs) for c in of_threads)
    instants: list[tuple[Any, ...]] = list(roles.instants)
    instants.extend(((track if mine else thread_track)(m.thread), m.name, m.start, -1, -1, m.attrs)
                    for m, mine in nvtx.marks)
    instants.extend((tr.os_track(track(c.thread)), c.name, c.start, -1, -1, None) for c in calls.os_markers)
    if not spans and not instants:
        raise ImportFailed(f"{report.source}: the export holds no ranges, kernels, copies or calls")

    thread_names = dict(roles.thread_names)
    on_own_track = {c.thread for c in nvtx.foreign} | {m.thread for m, mine in nvtx.marks if not mine}
    for key in used:
        if key in names and (key not in roles.track_of or key in on_own_track):
            thread_names[thread_track(key)] = names[key]
    report.kept = len(spans) + len(instants)
    if roles.partitions_inferred:
        report.reconstructed = "partitions numbered in synthesis and pickup order (NVTX has no ids)"
    _notes(export, calls, nvtx.domains)
    meta: dict[str, Any] = {"outcome": "completed" if roles.finished else "unknown",
                            "import": report.as_meta()}
    meta.update(_names_of_processes_and_devices(export, pids, device))
    config = {"gpu_workers": roles.workers} if roles.workers else {}
    return Trace.from_rows(spans, instants, (), config, meta, thread_names)


def _thread_names(export: Export) -> dict[int, str]:
    cols = (Col.of("nameId|name", STRING, required=True), Col.of("globalTid", required=True))
    return {cuda.thread_key(r["globalTid"]): r["nameId"] for r in export.rows("ThreadNames", cols)}


def _notes(export: Export, calls: cuda.HostCalls, domains: set[str]) -> None:
    extra = export.report.extra
    version = {r["name"]: r["value"] for r in export.rows(
        "META_DATA_EXPORT", (Col.of("name", TEXT, required=True), Col.of("value", TEXT, required=True)))}
    if "EXPORT_PRODUCT_VERSION" in version:
        extra["exporter"] = (f"Nsight Systems {version['EXPORT_PRODUCT_VERSION']}, schema "
                             f"{version.get('EXPORT_SCHEMA_VERSION', 'unknown')}")
    if export.schema_notes:
        extra["schema"] = list(export.schema_notes)
    if export.unnamed:
        extra["names_not_in_StringIds"] = dict(export.unnamed)
    if calls.sync_without_call:
        extra["sync_callers"] = (f"{calls.sync_without_call} synchronisation records without their API call: "
                                 "placed on the process's main thread")
    if domains:
        extra["nvtx_foreign_domains"] = sorted(domains)


def _names_of_processes_and_devices(export: Export, pids: set[int], device: list[cuda.SpanRow],
                                    ) -> dict[str, Any]:
    """Names of the processes and GPUs the trace holds work of, keyed by their ids as text."""
    out: dict[str, Any] = {}
    processes = {r["pid"]: r["name"] for r in export.rows(
        "PROCESSES", (Col.of("pid", INT, required=True), Col.of("name", TEXT, required=True)))
        if r["pid"] in pids}
    if processes:
        out["processes"] = {str(pid): name for pid, name in sorted(processes.items())}
    gpus = {tr.gpu_of(track) for track in {s[0] for s in device}}
    devices = {r["id"]: r["name"] for r in export.rows(
        "TARGET_INFO_GPU", (Col.of("id", required=True), Col.of("name", TEXT, required=True)))
        if r["id"] in gpus}
    if devices:
        out["devices"] = {str(g): name for g, name in sorted(devices.items())}
    return out
