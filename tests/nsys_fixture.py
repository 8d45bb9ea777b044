"""Exports built to the documented nsys SQLite schema, for importer tests (nsys itself cannot
run here). `export_like_nsys(trace, path)` writes what a capture of that workbench run would
hold: each span as the NVTX range the recorder pushes on its thread (the mutex's and the
barrier's own ranges on the waiting thread), thread names, and optional kernels and copies.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from workbench.model import tracks as tr
from workbench.trace.container import Trace

PID = 4242
DOMAIN_ID = 7

# The 2024.5 exporter's columns (schema 3.13.2, as in tests/data/nsys/), types only: the
# tests insert the columns they need. MEMSET and DRIVER, which the real capture lacks, follow
# the same exporter's documented layout.
_CALL = ("start INT NOT NULL, end INT NOT NULL, eventClass INT, globalTid INT, correlationId INT, "
         "nameId INT, returnValue INT, callchainId INT")
SCHEMA = {
    "StringIds": "id INTEGER PRIMARY KEY, value TEXT NOT NULL",
    "ThreadNames": "nameId INT NOT NULL, priority INT, globalTid INT",
    "PROCESSES": "globalPid INT, pid INT, name TEXT",
    "TARGET_INFO_GPU": "vmId INT, id INT, name TEXT, busLocation TEXT, chipName TEXT, cuDevice INT",
    "NVTX_EVENTS": ("start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT, category INT, "
                    "color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT, "
                    "uint64Value INT, int64Value INT, doubleValue REAL, uint32Value INT, int32Value INT, "
                    "floatValue REAL, jsonTextId INT, jsonText TEXT, binaryData BLOB"),
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start INT NOT NULL, end INT NOT NULL, deviceId INT, contextId INT, "
                                   "greenContextId INT, streamId INT, correlationId INT, globalPid INT, "
                                   "demangledName INT, shortName INT, mangledName INT, launchType INT, "
                                   "cacheConfig INT, registersPerThread INT, gridX INT, gridY INT, "
                                   "gridZ INT, blockX INT, blockY INT, blockZ INT, staticSharedMemory INT, "
                                   "dynamicSharedMemory INT, localMemoryPerThread INT, localMemoryTotal INT, "
                                   "gridId INT, sharedMemoryExecuted INT, graphNodeId INT, "
                                   "sharedMemoryLimitConfig INT"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start INT NOT NULL, end INT NOT NULL, deviceId INT, contextId INT, "
                                   "greenContextId INT, streamId INT, correlationId INT, globalPid INT, "
                                   "bytes INT, copyKind INT, deprecatedSrcId INT, srcKind INT, dstKind INT, "
                                   "srcDeviceId INT, srcContextId INT, dstDeviceId INT, dstContextId INT, "
                                   "migrationCause INT, graphNodeId INT, virtualAddress INT"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start INT NOT NULL, end INT NOT NULL, deviceId INT, contextId INT, "
                                   "greenContextId INT, streamId INT, correlationId INT, globalPid INT, "
                                   "value INT, bytes INT, graphNodeId INT, memKind INT"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": _CALL,
    "CUPTI_ACTIVITY_KIND_DRIVER": _CALL,
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ("start INT NOT NULL, end INT NOT NULL, deviceId INT, "
                                            "contextId INT, greenContextId INT, streamId INT, "
                                            "correlationId INT, globalPid INT, syncType INT, eventId INT"),
    "OSRT_API": ("start INT NOT NULL, end INT NOT NULL, eventClass INT, globalTid INT, nameId INT, "
                 "returnValue INT, nestingLevel INT, callchainId INT"),
}


def global_tid(tid: int, pid: int = PID) -> int:
    """A globalTid as the exporter writes it: a machine id above the process and thread ids."""
    return (1 << 56) | (pid << 24) | tid


class Export:
    def __init__(self, path: Path, tables: tuple[str, ...] = tuple(SCHEMA),
                 drop_columns: dict[str, tuple[str, ...]] | None = None) -> None:
        self.conn = sqlite3.connect(path)
        self.strings: dict[str, int] = {}
        drop = drop_columns or {}
        self.columns: dict[str, list[str]] = {}
        for table in tables:
            defs = [c.strip() for c in SCHEMA[table].split(",")]
            defs = [d for d in defs if d.split()[0] not in drop.get(table, ())]
            self.columns[table] = [d.split()[0] for d in defs]
            self.conn.execute(f'CREATE TABLE "{table}" ({", ".join(defs)})')

    def string(self, value: str) -> int:
        if value not in self.strings:
            self.strings[value] = len(self.strings) + 1
        return self.strings[value]

    def insert(self, table: str, **values: Any) -> None:
        if table not in self.columns:
            return
        kept = {k: v for k, v in values.items() if k in self.columns[table]}
        names = ", ".join(kept)
        self.conn.execute(f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(kept))})',
                          tuple(kept.values()))

    def close(self) -> None:
        for value, i in self.strings.items():
            self.insert("StringIds", id=i, value=value)
        self.conn.commit()
        self.conn.close()


def export_like_nsys(trace: Trace, path: Path, *, inline_text: bool = False,
                     tables: tuple[str, ...] = tuple(SCHEMA),
                     drop_columns: dict[str, tuple[str, ...]] | None = None,
                     kernels: list[tuple[int, int, str]] = (),  # type: ignore[assignment]
                     copies: list[tuple[int, int, int, int]] = (),  # type: ignore[assignment]
                     thread_names: bool = True) -> Path:
    out = Export(path, tables, drop_columns)
    tids: dict[str, int] = {}

    def thread(track: str) -> int:
        return tids.setdefault(track, 100 + len(tids))

    def nvtx(track: str, name: str, start: int, end: int) -> None:
        text = {"text": name} if inline_text else {"textId": out.string(name)}
        out.insert("NVTX_EVENTS", start=start, end=end, eventType=59, globalTid=global_tid(thread(track)),
                   domainId=DOMAIN_ID, **text)

    out.insert("NVTX_EVENTS", start=0, end=None, eventType=75, text="workbench", domainId=DOMAIN_ID)
    for span in trace.iter_spans():
        kind = tr.parse(span.track).kind
        if kind == tr.MUTEX:
            nvtx(tr.worker_track(span.worker), f"mutex_{span.name}", span.start_ns, span.end_ns)
        elif kind == tr.BARRIER:
            prep = span.attrs.get("party") == "prep"
            owner = (tr.prep_track if prep else tr.worker_track)(span.worker)
            nvtx(owner, "barrier_wait", span.start_ns, span.end_ns)
        elif kind not in tr.ON_DEVICE:
            nvtx(span.track, span.name, span.start_ns, span.end_ns)
    if thread_names:
        for track, name in trace.thread_names.items():
            out.insert("ThreadNames", nameId=out.string(name), priority=0,
                       globalTid=global_tid(thread(track)))
    for start, end, name in kernels:
        out.insert("CUPTI_ACTIVITY_KIND_KERNEL", start=start, end=end, deviceId=0, streamId=7,
                   shortName=out.string(name), demangledName=out.string(name + "(args)"))
    for start, end, nbytes, src in copies:
        out.insert("CUPTI_ACTIVITY_KIND_MEMCPY", start=start, end=end, deviceId=0, streamId=13,
                   bytes=nbytes, copyKind=1, srcKind=src, dstKind=2)
    first = trace.time_range()[0]
    out.insert("OSRT_API", start=first + 10, end=first + 20, globalTid=global_tid(thread(tr.worker_track(0))),
               nameId=out.string("pthread_mutex_lock"))
    out.close()
    return path


# A CUDA program of two processes, as an nsys capture of it would hold it: an application
# (pid 300: main thread 300, worker 301) and a helper process (pid 400) that drives a second
# GPU through the driver API. Every table the real capture in tests/data/nsys lacks is here:
# NVTX ranges in a named and the default domain, driver calls, memsets, synchronisation
# records of several kinds (one without its API call), contended locks and condition waits.
APP, HELPER = 300, 400
GPU_NAMES = {0: "GPU A", 1: "GPU B"}


def foreign_export(path: Path, *, processes: tuple[int, ...] = (APP, HELPER)) -> Path:
    out = Export(path)
    t = iter(range(1_000_000, 10_000_000, 1_000))

    def span() -> tuple[int, int]:
        start = next(t)
        return start, start + 700

    def call(table: str, tid: int, pid: int, name: str, correlation: int | None = None) -> None:
        start, end = span()
        out.insert(table, start=start, end=end, eventClass=0, globalTid=global_tid(tid, pid),
                   correlationId=correlation, nameId=out.string(name), returnValue=0)

    for pid, tid, name in ((APP, APP, "app"), (APP, APP + 1, "app-worker"), (HELPER, HELPER, "helper")):
        if pid in processes:
            out.insert("ThreadNames", nameId=out.string(name), priority=10, globalTid=global_tid(tid, pid))
    for pid, name in ((1, "systemd"), (APP, "app"), (HELPER, "helper")):
        out.insert("PROCESSES", globalPid=global_tid(0, pid), pid=pid, name=name)
    for gpu, name in GPU_NAMES.items():
        out.insert("TARGET_INFO_GPU", vmId=0, id=gpu, name=name, chipName="GX", cuDevice=gpu)

    worker = global_tid(APP + 1, APP)
    out.insert("NVTX_EVENTS", start=0, eventType=75, text="app", domainId=1)
    for _ in range(3):
        start, end = span()
        out.insert("NVTX_EVENTS", start=start, end=end, eventType=59, textId=out.string("step"),
                   globalTid=worker, domainId=1)
    start, end = span()
    out.insert("NVTX_EVENTS", start=start, end=end, eventType=60, text="load", globalTid=global_tid(APP, APP),
               domainId=0)
    out.insert("NVTX_EVENTS", start=start, eventType=34, text="checkpoint", globalTid=worker, domainId=1)

    for k, name in enumerate(["cudaLaunchKernel_v7000"] * 3 + ["cudaStreamSynchronize_v3020",
                                                               "cudaMemsetAsync_v3020", "cudaMalloc_v3020"]):
        call("CUPTI_ACTIVITY_KIND_RUNTIME", APP + 1, APP, name, 10 + k)
    for k in range(3):
        start, end = span()
        out.insert("CUPTI_ACTIVITY_KIND_KERNEL", start=start, end=end, deviceId=0, streamId=13,
                   correlationId=10 + k, globalPid=global_tid(0, APP), shortName=out.string(f"k{k}"),
                   demangledName=out.string(f"k{k}(float*)"), gridX=64, gridY=1, gridZ=1, blockX=256,
                   blockY=1, blockZ=1)
    start, end = span()
    out.insert("CUPTI_ACTIVITY_KIND_MEMSET", start=start, end=end, deviceId=0, streamId=13, correlationId=14,
               globalPid=global_tid(0, APP), value=0, bytes=1 << 20, memKind=2)
    for kind, device in ((10, 0), (8, 1)):
        start, end = span()
        out.insert("CUPTI_ACTIVITY_KIND_MEMCPY", start=start, end=end, deviceId=device, streamId=13,
                   bytes=1 << 16, copyKind=kind, srcKind=2, dstKind=2)
    syncs = [(3, 13, APP), (2, 99, APP)]  # 99: no API call carries it
    if HELPER in processes:
        for k, name in enumerate(["cuCtxSynchronize", "cuLaunchKernel", "cuMemAlloc_v2"]):
            call("CUPTI_ACTIVITY_KIND_DRIVER", HELPER, HELPER, name, 20 + k)
        syncs.append((4, 20, HELPER))
    for sync_type, correlation, pid in syncs:
        start, end = span()
        out.insert("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", start=start, end=end, deviceId=0, streamId=13,
                   correlationId=correlation, globalPid=global_tid(0, pid), syncType=sync_type,
                   eventId=0xFFFFFFFF)
    for name in ("pthread_mutex_lock", "pthread_mutex_lock", "pthread_cond_wait", "sem_wait", "read"):
        call("OSRT_API", APP + 1, APP, name)
    if HELPER in processes:
        call("OSRT_API", HELPER, HELPER, "pthread_mutex_lock")
    out.close()
    return path
