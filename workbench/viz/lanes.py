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

Several GPUs: worker lanes carry their GPU ("gpu1 worker 2 prep") and each GPU's device
lanes follow that GPU's worker lanes, so a GPU reads as one block. The worker-to-GPU map is
the run's own (`meta["worker_gpu"]`, see `worker_gpus`); with one GPU lanes keep their
plain names.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.model import tracks as tr

RUN_LANE = tr.RUN_TRACK
_WORKER_LANES = ("", "prep", "mutex wait", "mutex hold")


def phase_of(track: str, name: str, party: str | None = None) -> str:
    """The phase a span shows as (its colour): the lock and barrier primitives' generic
    `wait` and `hold` are named for what they are, a barrier wait for the side that waited."""
    kind = tr.parse(track).kind
    if kind == tr.MUTEX:
        return {"wait": "mutex_wait", "hold": "mutex_hold"}.get(name, name)
    if kind == tr.BARRIER and name == "wait":
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


def worker_lane(worker: int, part: str = "", gpu: int | None = None) -> str:
    # A lane's name, which readers see (not a track name): "gpu1 worker 2 prep".
    return (f"gpu{gpu} " if gpu is not None else "") + f"worker {worker}" + (f" {part}" if part else "")


def worker_gpus(meta: Mapping[str, Any] | None) -> dict[int, int] | None:
    """The worker-to-GPU map a run stored, when it ran on several GPUs; None otherwise, which
    keeps one-GPU lanes unprefixed."""
    stored = (meta or {}).get("worker_gpu")
    if not isinstance(stored, Mapping) or not stored:
        return None
    try:
        found = {int(w): int(g) for w, g in stored.items()}
    except (TypeError, ValueError):
        return None
    return found if len(set(found.values())) > 1 else None


def _gpu_of(worker: int, worker_gpu: Mapping[int, int] | None) -> int | None:
    if not worker_gpu or len(set(worker_gpu.values())) < 2:
        return None
    return worker_gpu.get(worker)


def base_lane(
    track: str, name: str, worker: int, party: str | None, worker_gpu: Mapping[int, int] | None = None,
) -> tuple[str, bool]:
    """The lane of a span ignoring the lock, and whether it moves to the hold lane when it
    lies inside one of its worker's mutex holds. `worker_gpu` (several GPUs) puts each
    worker's GPU in its lanes' names."""
    t = tr.parse(track)
    if t.kind == tr.RUN:
        return RUN_LANE, False
    if t.kind == tr.SYNTH:
        return f"synth {t.thread}", False
    if t.kind == tr.PREP:
        return worker_lane(t.worker, "prep", _gpu_of(t.worker, worker_gpu)), False
    if t.kind == tr.WORKER:
        return worker_lane(t.worker, "", _gpu_of(t.worker, worker_gpu)), True
    gpu = _gpu_of(worker, worker_gpu)
    if t.kind == tr.MUTEX and worker >= 0:
        return worker_lane(worker, "mutex hold" if name == "hold" else "mutex wait", gpu), False
    if t.kind == tr.BARRIER and worker >= 0:
        if party == "prep":
            return worker_lane(worker, "prep", gpu), False
        return worker_lane(worker, "", gpu), True
    if t.on_device:  # device records: the GPU, then what the track holds ("gpu0 stream 7")
        return f"gpu{t.gpu} {track.split('/', 1)[1].replace('/', ' ')}", False
    if t.kind == tr.HOST_LOAD:
        return "host load", False
    return track, False


def _worker_key(lane: str) -> tuple[int, int] | None:
    parts = lane.split(" ", 2)
    if parts[0] == "worker" and len(parts) >= 2 and parts[1].isdigit():
        rest = parts[2] if len(parts) == 3 else ""
        if rest in _WORKER_LANES:
            return int(parts[1]), _WORKER_LANES.index(rest)
    return None


def lane_sort_key(lane: str) -> tuple[int, int, int, int, int, str]:
    """run, synthesis threads, then per GPU its workers' four lanes each followed by the
    GPU's device lanes, then the rest. Unprefixed worker lanes (one GPU) count as GPU 0's."""
    if lane == RUN_LANE:
        return (0, 0, 0, 0, 0, "")
    parts = lane.split(" ", 2)
    if parts[0] == "synth" and len(parts) == 2 and parts[1].isdigit():
        return (1, int(parts[1]), 0, 0, 0, "")
    if parts[0].startswith("gpu") and parts[0][3:].isdigit() and len(parts) >= 2:
        gpu = int(parts[0][3:])
        rest = lane.split(" ", 1)[1]
        if (worker := _worker_key(rest)) is not None:
            return (2, gpu, 0, *worker, "")
        tail = rest.split(" ")
        number = int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else -1
        return (2, gpu, 1, number, 0, lane)
    if (worker := _worker_key(lane)) is not None:
        return (2, 0, 0, *worker, "")
    if (thread := _thread_of(lane)) is not None:  # a thread's own lane, then its CUDA and OS calls
        return (3, 0, 0, 0, 0, f"{thread} {lane.count('/')} {lane}")
    return (4, 0, 0, 0, 0, lane)


def _thread_of(lane: str) -> str | None:
    """The host thread a foreign lane belongs to: its own track, or the caller of its CUDA or
    OS calls (lanes of foreign spans are their track names)."""
    t = tr.parse(lane)
    if t.kind == tr.THREAD:
        return lane
    if t.kind in (tr.CUDA_API, tr.OS_API) and tr.parse(t.name).kind == tr.THREAD:
        return t.name
    return None


def lane_group(lane: str) -> str:
    """The group a lane collapses with: a GPU worker's four lanes, a GPU's device lanes, a host
    thread with its CUDA and OS calls, the synthesis threads, the locks."""
    parts = lane.split(" ")
    if parts[0] == "synth":
        return "synthesis"
    if parts[0].startswith("gpu") and parts[0][3:].isdigit() and len(parts) >= 2:
        return " ".join(parts[:3]) if parts[1] == "worker" else parts[0]
    if parts[0] == "worker" and len(parts) >= 2:
        return " ".join(parts[:2])
    if (thread := _thread_of(lane)) is not None:
        return thread.replace("/", " ")
    if tr.parse(lane).kind == tr.LOCK:
        return "locks"
    return lane


def expected_lanes(synth_threads: int, workers: int, gpu_workers: int | None = None) -> list[str]:
    """The lanes a pipeline run of this shape will fill, so a live view can lay them out
    before the first span arrives and bars never jump between rows. `workers` counts all
    GPUs' workers; with `gpu_workers` per GPU and more than one GPU, lanes are grouped by GPU
    as the finished run's are."""
    lanes = [RUN_LANE] + [f"synth {t}" for t in range(synth_threads)]
    several = gpu_workers is not None and 0 < gpu_workers < workers
    for w in range(workers):
        gpu = w // gpu_workers if several and gpu_workers else None
        lanes += [worker_lane(w, part, gpu) for part in _WORKER_LANES]
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
        # Opened long ago (holds out of order) or never: the list is sorted, so look it up there.
        i = bisect.bisect_left(starts, start_ns)
        if i == len(starts) or starts[i] != start_ns:
            self.opened(worker, start_ns)
            starts = self.starts[worker]
            i = bisect.bisect_left(starts, start_ns)
        self.ends[worker][i] = float(end_ns)

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
