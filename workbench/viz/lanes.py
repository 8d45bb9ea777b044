"""Which Gantt lane a span is drawn in, and the order of the lanes.

Tracks name threads; lanes name what a reader compares. Per GPU worker there are four
lanes: its CPU work, its prep thread, its waits for the GPU mutex, and its holds of the
mutex with the phases run under the lock (copy, NTT, H MSM, barrier wait, batch_add,
tail_msm) drawn inside the hold. Whether a worker's span ran under the lock is decided by
time, from the mutex's own records, so lock scope `compute` puts the upload on the CPU lane
without the views knowing about lock scopes.

The assigner keeps the holds it has seen, so the live view can feed it batch after batch:
a mutex wait is recorded when the lock is taken, before anything inside the hold ends, so
the hold is known (still open) by the time its inner phases arrive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

RUN_LANE = "run"

_SYNTH = re.compile(r"synth/(\d+)$")
_WORKER = re.compile(r"worker/(\d+)$")
_PREP = re.compile(r"worker/(\d+)/prep$")
_GPU = re.compile(r"gpu(\d+)/(.+)$")
_WORKER_LANES = ("", "prep", "mutex wait", "mutex hold")


def phase_of(track: str, name: str, party: str | None = None) -> str:
    """The phase a span shows as (its colour): the lock and barrier primitives' generic
    `wait` and `hold` are named for what they are, a barrier wait for the side that waited."""
    if track.startswith("mutex/"):
        return {"wait": "mutex_wait", "hold": "mutex_hold"}.get(name, name)
    if track.startswith("barrier/") and name == "wait":
        return f"barrier_wait ({party})" if party else "barrier_wait"
    return name


def readable(name: str, limit: int = 36) -> str:
    """A phase name short enough for a legend: C++ kernel names arrive mangled and hundreds of
    characters long, so `_ZN3cub...16DeviceScanKernel...` reads `cub::DeviceScanKernel`."""
    if len(name) <= limit:
        return name
    if name.startswith("_ZN"):
        parts, i = [], 3
        while i < len(name) and name[i].isdigit():
            j = i
            while j < len(name) and name[j].isdigit():
                j += 1
            size = int(name[i:j])
            parts.append(name[j:j + size])
            i = j + size
        if parts:
            short = parts[-1] if len(parts) == 1 else f"{parts[0]}::{parts[-1]}"
            if len(short) <= limit:
                return short
    return name[:limit - 3] + "..."


def worker_lane(worker: int, part: str = "") -> str:
    return f"worker {worker}" + (f" {part}" if part else "")


def base_lane(track: str, name: str, worker: int, party: str | None) -> tuple[str, bool]:
    """The lane of a span ignoring the lock, and whether it moves to the hold lane when it
    lies inside one of its worker's mutex holds."""
    if track == RUN_LANE:
        return RUN_LANE, False
    if m := _SYNTH.match(track):
        return f"synth {m.group(1)}", False
    if m := _PREP.match(track):
        return worker_lane(int(m.group(1)), "prep"), False
    if m := _WORKER.match(track):
        return worker_lane(int(m.group(1))), True
    if track.startswith("mutex/") and worker >= 0:
        return worker_lane(worker, "mutex hold" if name == "hold" else "mutex wait"), False
    if track.startswith("barrier/") and worker >= 0:
        if party == "prep":
            return worker_lane(worker, "prep"), False
        return worker_lane(worker), True
    if m := _GPU.match(track):  # device records: gpu0/stream/7, gpu0/copy, gpu0/memset, ...
        return f"gpu{m.group(1)} {m.group(2).replace('/', ' ')}", False
    return track, False


def lane_sort_key(lane: str) -> tuple[int, int, int, str]:
    """run, synthesis threads, then per worker its four lanes, then GPU lanes, then the rest."""
    if lane == RUN_LANE:
        return (0, 0, 0, "")
    parts = lane.split(" ", 2)
    if parts[0] == "synth" and len(parts) == 2 and parts[1].isdigit():
        return (1, int(parts[1]), 0, "")
    if parts[0] == "worker" and len(parts) >= 2 and parts[1].isdigit():
        rest = parts[2] if len(parts) == 3 else ""
        if rest in _WORKER_LANES:
            return (2, int(parts[1]), _WORKER_LANES.index(rest), "")
    if parts[0].startswith("gpu") and parts[0][3:].isdigit() and len(parts) >= 2:
        tail = parts[1:]
        number = int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else -1
        return (3, int(parts[0][3:]), number, lane)
    return (4, 0, 0, lane)


def expected_lanes(synth_threads: int, workers: int) -> list[str]:
    """The lanes a pipeline run of this shape will fill, so a live view can lay them out
    before the first span arrives and bars never jump between rows."""
    lanes = [RUN_LANE] + [f"synth {t}" for t in range(synth_threads)]
    for w in range(workers):
        lanes += [worker_lane(w, part) for part in _WORKER_LANES]
    return lanes


@dataclass
class HoldIndex:
    """Each worker's mutex holds as sorted [start, end) intervals; an open hold ends at +inf."""

    starts: dict[int, list[int]] = field(default_factory=dict)
    ends: dict[int, list[float]] = field(default_factory=dict)

    def opened(self, worker: int, start_ns: int) -> None:
        starts = self.starts.setdefault(worker, [])
        ends = self.ends.setdefault(worker, [])
        if start_ns in starts[-4:]:
            return
        starts.append(start_ns)
        ends.append(float("inf"))
        if len(starts) > 1 and starts[-2] > start_ns:
            order = np.argsort(starts, kind="stable")
            self.starts[worker] = [starts[i] for i in order]
            self.ends[worker] = [ends[i] for i in order]

    def closed(self, worker: int, start_ns: int, end_ns: int) -> None:
        starts = self.starts.get(worker, [])
        # Holds close in order, so the hold being closed is among the last few opened.
        for i in range(len(starts) - 1, max(len(starts) - 5, -1), -1):
            if starts[i] == start_ns:
                self.ends[worker][i] = float(end_ns)
                return
        self.opened(worker, start_ns)
        self.closed(worker, start_ns, end_ns)

    def inside(self, worker: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        result = np.zeros(len(worker), dtype=bool)
        for w in np.unique(worker).tolist():
            if w not in self.starts:
                continue
            mask = worker == w
            starts = np.asarray(self.starts[w], dtype=np.int64)
            ends = np.asarray(self.ends[w], dtype=np.float64)
            i = np.searchsorted(starts, start[mask], side="right") - 1
            ok = i >= 0
            j = np.clip(i, 0, None)
            result[mask] = ok & (end[mask] <= ends[j])
        return result


def nesting_depth(lane_ids: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many spans of the same lane enclose each span (0 for outermost).

    Spans of one lane nest (they come from one thread, or from the lock's hold and the work
    done under it), so the number of enclosing spans is the number that started before this
    one (ties: longer first) minus the number that already ended by its start.
    """
    depth = np.zeros(len(start), dtype=np.int64)
    for lane in np.unique(lane_ids).tolist():
        idx = np.flatnonzero(lane_ids == lane)
        s, e = start[idx], end[idx]
        order = np.lexsort((-e, s))
        rank = np.empty(len(idx), dtype=np.int64)
        rank[order] = np.arange(len(idx))
        ends = np.sort(e)
        # A span ending exactly where this one starts closed before it, unless it is an
        # instant-long span at that very point (an uncontended wait), which sorts after.
        instants = np.sort(s[s == e])
        closed = (np.searchsorted(ends, s, side="right")
                  - (np.searchsorted(instants, s, side="right") - np.searchsorted(instants, s, side="left")))
        depth[idx] = np.maximum(rank - closed, 0)
    return depth
