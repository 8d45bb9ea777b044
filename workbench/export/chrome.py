"""Chrome trace event JSON, which Perfetto and chrome://tracing open.

One process, one thread per track (named by `M` metadata events). Duration events on one
thread must nest, so a track whose spans overlap without nesting (mutex waits of two
workers, two barrier parties) goes out as async events (`b`/`e` pairs with an id).
Times are microseconds from the trace's first event; `otherData` carries that origin in
nanoseconds, the run's configuration and facts, and each thread's metadata names its track,
so the importer (importers/chrome.py) rebuilds the trace exactly.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from workbench.trace.container import Trace

PID = 1
FORMAT = "workbench"


def to_chrome(trace: Trace) -> dict[str, Any]:
    origin, _ = trace.time_range()
    text = trace.strings.values
    tracks = trace.tracks()
    tids = {track: i + 1 for i, track in enumerate(tracks)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": PID, "name": "process_name", "args": {"name": "workbench"}}
    ]
    for track, tid in tids.items():
        label = track
        if track in trace.thread_names:
            label = f"{track} ({trace.thread_names[track]})"
        args = {"name": label, "track": track}
        if track in trace.thread_names:
            args["thread"] = trace.thread_names[track]
        events.append({"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": args})
        events.append(
            {"ph": "M", "pid": PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}
        )

    spans = trace.spans
    async_tracks = {t for t in np.unique(spans.track).tolist() if not _nests(trace, t)}
    next_id = 0
    for i in range(len(spans)):
        track_id = int(spans.track[i])
        track = text[track_id]
        start_us = (int(spans.start_ns[i]) - origin) / 1e3
        end_us = (int(spans.end_ns[i]) - origin) / 1e3
        # From the integer length, so start + duration rounds back to the exact end.
        dur_us = (int(spans.end_ns[i]) - int(spans.start_ns[i])) / 1e3
        args = _args(spans.partition[i], spans.worker[i], spans.attrs[i])
        name = text[spans.name[i]]
        if track_id in async_tracks:
            next_id += 1
            common = {"pid": PID, "tid": tids[track], "cat": track, "name": name, "id": next_id}
            events.append({**common, "ph": "b", "ts": start_us, "args": args})
            events.append({**common, "ph": "e", "ts": end_us})
        else:
            events.append({
                "ph": "X", "pid": PID, "tid": tids[track], "name": name, "ts": start_us,
                "dur": dur_us, "args": args,
            })
    for instant in trace.iter_instants():
        events.append({
            "ph": "i", "s": "t", "pid": PID, "tid": tids[instant.track], "name": instant.name,
            "ts": (instant.ts_ns - origin) / 1e3,
            "args": _args(instant.partition, instant.worker, instant.attrs),
        })
    for sample in trace.iter_counters():
        events.append({
            "ph": "C", "pid": PID, "name": sample.track, "ts": (sample.ts_ns - origin) / 1e3,
            "args": {sample.name: sample.value},
        })
    other = {"format": FORMAT, "origin_ns": origin, "config": trace.config, "meta": trace.meta}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def to_chrome_json(trace: Trace) -> str:
    return json.dumps(to_chrome(trace), default=str)


def _nests(trace: Trace, track_id: int) -> bool:
    """Whether every pair of spans on the track is disjoint or nested."""
    mask = trace.spans.track == track_id
    starts, ends = trace.spans.start_ns[mask], trace.spans.end_ns[mask]
    order = np.lexsort((-ends, starts))
    stack: list[int] = []
    for s, e in zip(starts[order].tolist(), ends[order].tolist(), strict=True):
        while stack and stack[-1] <= s:
            stack.pop()
        if stack and e > stack[-1]:
            return False
        stack.append(e)
    return True


def _args(partition: Any, worker: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
    args: dict[str, Any] = dict(attrs or {})
    if int(partition) >= 0:
        args["partition"] = int(partition)
    if int(worker) >= 0:
        args["worker"] = int(worker)
    return args
