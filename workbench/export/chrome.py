"""Chrome trace event JSON, which Perfetto, chrome://tracing and Holistic Trace Analysis read.

Layout. Device work sits in one process per GPU (pid = the GPU's index, as the PyTorch
profiler writes it), kernels on a thread per stream (tid = the stream); everything else in
the host process (HOST_PID). Every event has a `cat`: the span's role as the PyTorch
profiler names it where it has a name (kernel, gpu_memcpy, gpu_memset, cuda_runtime,
cpu_op, user_annotation), else the role (lock, barrier, os_runtime, ...). Device events
carry `device`, `stream` and a `correlation` id in their args, and copies and memsets the
profiler's names ("Memcpy HtoD (Pageable -> Device)"), which is what the kernel breakdowns
of other tools key on.

Trace-event rules. Duration events on one thread must nest: a track whose spans do not is
split, each span name that nests on its own getting a thread of its own (a mutex's holds),
device tracks into lanes that do (concurrent copies: one stream each); what still overlaps
goes out as async events (`b`/`e` pairs with an id). Hand-offs (analysis/handoffs.py: lock
release to the next acquire, synthesis to the worker's pickup, CUDA call to the GPU work it
issued) become flow events, `s` inside the source slice and `f` (bound to the enclosing
slice) at the start of the target one, each with its own id. Times are microseconds from the first event.

Round trip. `otherData` carries the origin in nanoseconds, the configuration, run facts and
thread names, and each thread's metadata names its track; what the export adds for other
tools is marked by a `derived` arg (on a span: the args added and its own name; the flows
are derived whole), so the importer (importers/chrome.py `underive`) takes it off again and
rebuilds the trace exactly, instants that a foreign trace's flows became included.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from workbench.analysis.handoffs import handoffs
from workbench.model import tracks as tr
from workbench.model.roles import CODE, ROLE_NAMES, span_roles
from workbench.trace.container import Trace

HOST_PID = 1_000_000  # above any GPU index, as an OS process id would be
FORMAT = "workbench"
DERIVED = "derived"  # the arg that lists what the export added
CATEGORIES = {
    "kernel": "kernel", "copy": "gpu_memcpy", "memset": "gpu_memset", "sync": "cuda_runtime",
    "launch": "cuda_runtime", "runtime": "cuda_runtime", "lock_wait": "lock", "lock_hold": "lock",
    "cond_wait": "wait", "barrier_wait": "barrier", "producer": "cpu_op", "prep": "cpu_op",
    "consumer": "cpu_op", "unit": "user_annotation", "os_call": "os_runtime", "host": "cpu_op",
    "other": "other",
}
DIRECTIONS = {"h2d": "HtoD", "d2h": "DtoH", "d2d": "DtoD", "p2p": "PtoP"}
# GPU-recorded synchronisation under the PyTorch profiler's names (other tools key on them).
SYNC_RECORDS = {"stream_synchronize": "Stream Sync", "event_synchronize": "Event Sync",
                "context_synchronize": "Context Sync", "stream_wait_event": "Stream Wait Event"}
MAX_LANES = 16  # threads a device track may be split into before the rest goes async


def to_chrome(trace: Trace) -> dict[str, Any]:
    origin, _ = trace.time_range()
    text = trace.strings.values
    spans = trace.spans
    codes = span_roles(trace)
    threads = _Threads(trace)
    records = _sync_records(trace, codes)
    lanes = _layout(trace, records)
    events: list[dict[str, Any]] = []
    bound: dict[int, tuple[int, int]] = {}  # span index -> (pid, tid) of its duration event
    next_async, next_correlation = 0, _recorded_correlations(spans.attrs)
    columns = zip(spans.track.tolist(), spans.name.tolist(), spans.start_ns.tolist(),
                  spans.end_ns.tolist(), spans.partition.tolist(), spans.worker.tolist(), spans.attrs,
                  codes.tolist(), lanes.tolist(), strict=True)
    for i, (track_id, name_id, start, end, partition, worker, attrs, code, lane) in enumerate(columns):
        track, name = text[track_id], text[name_id]
        role = ROLE_NAMES[code]
        start_us = (start - origin) / 1e3
        dur_us = max(end - start, 0) / 1e3  # from the integer length: start + duration rounds to the end
        args = _args(partition, worker, attrs)
        device = records.get(i, -1)
        pid, tid = threads.of(track, max(lane, 0), name if lane == _OWN_THREAD else "", device)
        event: dict[str, Any] = {"pid": pid, "tid": tid, "cat": CATEGORIES[role], "name": name}
        parsed = tr.parse(track)
        if parsed.on_device:
            next_correlation += 1
            event["name"] = _device_args(parsed, role, name, args, tid, next_correlation)
        elif device >= 0:
            event["cat"], event["name"] = "cuda_sync", SYNC_RECORDS.get(name, name)
            if event["name"] != name:
                args[DERIVED] = {"args": [], "name": name}
        if lane == _ASYNC:
            next_async += 1
            events.append({**event, "ph": "b", "ts": start_us, "id": next_async, "args": args})
            events.append({**event, "ph": "e", "ts": start_us + dur_us, "id": next_async})
        else:
            events.append({**event, "ph": "X", "ts": start_us, "dur": dur_us, "args": args})
            bound[i] = (pid, tid)
    events.extend(_flows(trace, codes, bound, origin))
    for instant in trace.iter_instants():
        pid, tid = threads.of(instant.track)
        events.append({
            "ph": "i", "s": "t", "pid": pid, "tid": tid, "cat": "instant", "name": instant.name,
            "ts": (instant.ts_ns - origin) / 1e3,
            "args": _args(instant.partition, instant.worker, instant.attrs),
        })
    for sample in trace.iter_counters():
        gpu = tr.parse(sample.track).gpu
        events.append({
            "ph": "C", "pid": gpu if gpu >= 0 else HOST_PID, "cat": "counter", "name": sample.track,
            "ts": (sample.ts_ns - origin) / 1e3, "args": {sample.name: sample.value},
        })
    other = {"format": FORMAT, "origin_ns": origin, "config": trace.config, "meta": trace.meta,
             "thread_names": trace.thread_names}
    return {
        "schemaVersion": 1, "distributedInfo": {"rank": _rank(trace)},
        "traceEvents": threads.metadata() + events, "displayTimeUnit": "ms", "otherData": other,
    }


def to_chrome_json(trace: Trace) -> str:
    return json.dumps(to_chrome(trace), default=str)


_ASYNC, _OWN_THREAD = -1, -2  # lane codes beside lane numbers 0, 1, ...


def _sync_records(trace: Trace, codes: np.ndarray) -> dict[int, int]:
    """Synchronisation the GPU recorded (a stream, event or context sync with its stream, as the
    PyTorch profiler records it) -> the GPU: such spans go out beside that GPU's work, as there."""
    records = {}
    for i in np.flatnonzero(codes == CODE["sync"]).tolist():
        attrs = trace.spans.attrs[i]
        if attrs and type(attrs.get("stream")) is int:
            device = attrs.get("device")
            records[i] = device if type(device) is int and device >= 0 else 0
    return records


def _layout(trace: Trace, records: dict[int, int]) -> np.ndarray:
    """Each span's lane on its track: a lane number, _OWN_THREAD or _ASYNC (see the module doc).
    A track's synchronisation records are laid out apart from its other spans."""
    spans = trace.spans
    lanes = np.zeros(len(spans), np.int64)
    text = trace.strings.values
    recorded = np.zeros(len(spans), bool)
    recorded[list(records)] = True
    for track_id in np.unique(spans.track).tolist():
        on = spans.track == track_id
        for on_track in (np.flatnonzero(on & ~recorded), np.flatnonzero(on & recorded)):
            if len(on_track):
                _lay_out(trace, text[track_id], on_track, lanes, by_name=bool(recorded[on_track[0]]))
    return lanes


def _lay_out(trace: Trace, track: str, on_track: np.ndarray, lanes: np.ndarray, by_name: bool) -> None:
    spans = trace.spans
    if not by_name:
        if _nests(spans.start_ns[on_track], spans.end_ns[on_track]):
            return
        if tr.parse(track).on_device:
            lanes[on_track] = _lanes(spans.start_ns[on_track], spans.end_ns[on_track])
            return
    names = spans.name[on_track]
    for name in np.unique(names).tolist():
        group = on_track[names == name]
        lanes[group] = _OWN_THREAD if _nests(spans.start_ns[group], spans.end_ns[group]) else _ASYNC


def _nests(starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether every pair of spans is disjoint or nested."""
    return bool(np.all(_lanes(starts, ends, max_lanes=1) == 0))


def _lanes(starts: np.ndarray, ends: np.ndarray, max_lanes: int = MAX_LANES) -> np.ndarray:
    """The first lane in which each span nests with those before it; _ASYNC past max_lanes."""
    out = np.full(len(starts), _ASYNC, np.int64)
    stacks: list[list[int]] = []
    for i in np.lexsort((-ends, starts)).tolist():
        s, e = int(starts[i]), int(ends[i])
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or e <= stack[-1]:
                stack.append(e)
                out[i] = lane
                break
        else:
            if len(stacks) < max_lanes:
                stacks.append([e])
                out[i] = len(stacks) - 1
            elif max_lanes == 1:
                break
    return out


class _Threads:
    """(pid, tid) of each (track, lane) and the metadata events that name them."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.ids: dict[tuple[str, int, str, int], tuple[int, int]] = {}
        streams = [t.stream for t in map(tr.parse, trace.tracks()) if t.kind == tr.KERNELS]
        self.next_tid = max(streams, default=0) + 1  # other threads never take a stream's number
        for track in trace.tracks():
            self.of(track)

    def of(self, track: str, lane: int = 0, name: str = "", device: int = -1) -> tuple[int, int]:
        """The thread of a track's lane (or of its spans of one name), in GPU `device`'s
        process when given (synchronisation records), else in the track's own."""
        key = (track, lane, name, device)
        if key not in self.ids:
            parsed = tr.parse(track)
            pid = device if device >= 0 else parsed.gpu if parsed.on_device else HOST_PID
            if parsed.kind == tr.KERNELS and lane == 0:
                tid = parsed.stream
            else:
                tid, self.next_tid = self.next_tid, self.next_tid + 1
            self.ids[key] = (pid, tid)
        return self.ids[key]

    def metadata(self) -> list[dict[str, Any]]:
        meta = {"ph": "M", "cat": "__metadata"}
        pids = sorted({pid for pid, _ in self.ids.values()}, key=lambda pid: (pid != HOST_PID, pid))
        events = [{**meta, "pid": pid, "name": "process_name",
                   "args": {"name": "workbench" if pid == HOST_PID else f"GPU {pid}"}} for pid in pids]
        events += [{**meta, "pid": pid, "name": "process_sort_index", "args": {"sort_index": n}}
                   for n, pid in enumerate(pids)]
        names = self.trace.thread_names
        for (track, lane, name, _), (pid, tid) in self.ids.items():
            label = f"{track} ({names[track]})" if track in names else track
            if name or lane:
                label += f" [{name or f'lane {lane}'}]"
            args = {"name": label, "track": track}
            if track in names:
                args["thread"] = names[track]
            events.append({**meta, "pid": pid, "tid": tid, "name": "thread_name", "args": args})
            events.append({**meta, "pid": pid, "tid": tid, "name": "thread_sort_index",
                           "args": {"sort_index": tid}})
        return events


def _device_args(track: tr.Track, role: str, name: str, args: dict[str, Any], tid: int,
                 correlation: int) -> str:
    """Add what other tools key device events on; return the name they expect."""
    stream = track.stream if track.stream >= 0 else tid  # copies and memsets: their lane's number
    added = []
    for key, value in (("device", track.gpu), ("stream", stream), ("correlation", correlation)):
        if key not in args:
            args[key] = value
            added.append(key)
    shown = name
    if role == "copy":
        src, dst = str(args.get("src_kind", "unknown")), str(args.get("dst_kind", "unknown"))
        shown = f"Memcpy {DIRECTIONS.get(name, name)} ({src.capitalize()} -> {dst.capitalize()})"
    elif role == "memset":
        shown = f"Memset ({str(args.get('dst_kind', 'device')).capitalize()})"
    derived: dict[str, Any] = {"args": added}
    if shown != name:
        derived["name"] = name
    args[DERIVED] = derived
    return shown


def _flows(trace: Trace, codes: np.ndarray, bound: dict[int, tuple[int, int]], origin: int) -> list[dict]:
    spans = trace.spans
    events: list[dict[str, Any]] = []
    for n, handoff in enumerate(handoffs(trace, codes), start=1):
        if handoff.source not in bound or handoff.target not in bound:
            continue  # an async span: flows bind to thread slices only
        src_start = (int(spans.start_ns[handoff.source]) - origin) / 1e3
        src_end = (int(spans.end_ns[handoff.source]) - origin) / 1e3
        common = {"cat": handoff.kind, "name": handoff.label, "id": n,
                  "args": {DERIVED: {"flow": handoff.kind}}}
        (pid_a, tid_a), (pid_b, tid_b) = bound[handoff.source], bound[handoff.target]
        events.append({**common, "ph": "s", "pid": pid_a, "tid": tid_a, "ts": max(src_start, src_end - 1e-3)})
        events.append({**common, "ph": "f", "bp": "e", "pid": pid_b, "tid": tid_b,
                       "ts": (int(spans.start_ns[handoff.target]) - origin) / 1e3})
    return events


def _recorded_correlations(attrs: list[dict[str, Any] | None]) -> int:
    """The highest correlation id the trace recorded, so those the export adds never clash."""
    ids = [a["correlation"] for a in attrs if a and isinstance(a.get("correlation"), int)]
    return max(ids, default=0)


def _rank(trace: Trace) -> int:
    rank = trace.meta.get("rank", 0) if isinstance(trace.meta, dict) else 0
    return rank if isinstance(rank, int) and rank >= 0 else 0


def _args(partition: int, worker: int, attrs: dict[str, Any] | None) -> dict[str, Any]:
    args: dict[str, Any] = dict(attrs) if attrs else {}
    if partition >= 0:
        args["partition"] = int(partition)
    if worker >= 0:
        args["worker"] = int(worker)
    return args
