"""Who each captured thread was in a workbench run, read from the NVTX ranges it holds.

NVTX ranges carry names only, so the roles, worker numbers and partitions are inferred:
a thread with ntt_msm_h ranges is a GPU worker, with prep_msm a prep thread, with synthesis
a synthesis thread; numbers come from thread names (gpu-worker-1, prep-1, synth-3) where the
capture has them, else from the order threads started work; a prep thread belongs to the
worker whose barrier waits end when its own do. A worker's partition runs from one finish
to the next; partitions are numbered as synthesis started them and handed out in the order
synthesis finished them (the queue is first in, first out).
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.model import tracks as tr
from workbench.model.pipeline import QUEUED

WORKER_NAMES = {"ntt_msm_h", "batch_add", "tail_msm", "mutex_hold"}
Range = tuple[int, int, str]


@dataclass
class Roles:
    spans: list[tuple[Any, ...]] = field(default_factory=list)
    instants: list[tuple[Any, ...]] = field(default_factory=list)
    track_of: dict[int, str] = field(default_factory=dict)  # thread id -> track
    thread_names: dict[str, str] = field(default_factory=dict)
    workers: int = 0
    partitions_inferred: bool = False
    finished: bool = False


def assign_roles(
    by_thread: dict[int, list[Range]], names: dict[int, str], thread_track: Callable[[int], str],
) -> Roles:
    """Pipeline tracks for the threads it recognises; `thread_track` names the others."""
    roles = Roles()
    kinds: dict[str, list[int]] = {"worker": [], "prep": [], "synth": [], "run": [], "other": []}
    for tid, ranges in by_thread.items():
        ranges.sort(key=lambda r: (r[0], -r[1]))
        held = {r[2] for r in ranges}
        kind = ("worker" if held & WORKER_NAMES else "prep" if "prep_msm" in held
                else "synth" if "synthesis" in held else "run" if "setup" in held else "other")
        kinds[kind].append(tid)
    first = {tid: by_thread[tid][0][0] if by_thread[tid] else 0 for tid in by_thread}
    workers = _number(kinds["worker"], names, r"gpu-worker-(\d+)", first)
    synths = _number(kinds["synth"], names, r"synth-(\d+)", first)
    preps = _pair_preps(kinds["prep"], workers, by_thread, names, first)
    roles.workers = len(workers)
    for tid, w in workers.items():
        roles.track_of[tid] = tr.worker_track(w)
    for tid, w in preps.items():
        roles.track_of[tid] = tr.prep_track(w)
    for tid, t in synths.items():
        roles.track_of[tid] = tr.synth_track(t)
    for tid in kinds["run"]:
        roles.track_of[tid] = tr.RUN_TRACK
    for tid in kinds["other"]:
        roles.track_of[tid] = thread_track(tid)
    for tid, track in roles.track_of.items():
        if tid in names:
            roles.thread_names[track] = names[tid]

    synth_partition = _synthesis_partitions(by_thread, synths, roles)
    units = _units(by_thread, workers)
    pickup_order = sorted(units, key=lambda key: units[key])
    queued = sorted(synth_partition.items(), key=lambda item: (item[0][1], item[1]))
    partition_of = {}
    for j, key in enumerate(pickup_order):
        partition_of[key] = queued[j][1] if j < len(queued) else len(queued) + j
    roles.partitions_inferred = bool(partition_of)

    for tid, w in workers.items():
        _worker_spans(roles, by_thread[tid], w, partition_of)
    for tid, w in preps.items():
        _prep_spans(roles, by_thread[tid], w, partition_of)
    for tid in kinds["run"] + kinds["other"]:
        for start, end, name in by_thread[tid]:
            roles.spans.append((roles.track_of[tid], name, start, end, -1, -1, None))
            if name == "setup":
                roles.instants.append((tr.RUN_TRACK, "run_start", end, -1, -1, None))
    _barrier_releases(roles)
    return roles


def _number(tids: list[int], names: dict[int, str], pattern: str, first: dict[int, int]) -> dict[int, int]:
    regex = re.compile(pattern)
    found = {tid: int(m.group(1)) for tid in tids if (m := regex.search(names.get(tid, "")))}
    if len(found) == len(tids) and len(set(found.values())) == len(found):
        return found
    return {tid: n for n, tid in enumerate(sorted(tids, key=lambda t: (first[t], t)))}


def _pair_preps(
    preps: list[int], workers: dict[int, int], by_thread: dict[int, list[Range]], names: dict[int, str],
    first: dict[int, int],
) -> dict[int, int]:
    by_name = _number(preps, names, r"prep-(\d+)", first)
    named = all(re.search(r"prep-\d+", names.get(t, "")) for t in preps)
    if named and len(set(by_name.values())) == len(preps):
        return by_name
    # A barrier releases both parties at once, so a prep thread's barrier waits end next to
    # its own worker's, however late either thread was scheduled to record the end: each prep
    # goes to the worker whose waits end nearest its own (the median gap over its waits), the
    # closest pairs first, one prep a worker.
    ends = {t: sorted(r[1] for r in by_thread[t] if r[2] == "barrier_wait") for t in (*preps, *workers)}
    scored = sorted((gap, first[p], p, w) for p in preps for w in workers
                    if (gap := _median_gap(ends[p], ends[w])) is not None)
    paired: dict[int, int] = {}
    taken: set[int] = set()
    for _, _, tid, w in scored:
        if tid not in paired and w not in taken:
            paired[tid] = workers[w]
            taken.add(w)
    rest = [t for t in preps if t not in paired]
    free = sorted(set(workers.values()) - set(paired.values()))
    for tid, w in zip(sorted(rest, key=lambda t: first[t]), free, strict=False):
        paired[tid] = w
    return paired


def _median_gap(mine: list[int], theirs: list[int]) -> float | None:
    """Median over `mine` of the distance to the nearest of `theirs` (both sorted)."""
    if not mine or not theirs:
        return None
    gaps = []
    for t in mine:
        k = bisect.bisect_left(theirs, t)
        gaps.append(min(abs(theirs[j] - t) for j in (k - 1, k) if 0 <= j < len(theirs)))
    return float(statistics.median(gaps))


def _synthesis_partitions(
    by_thread: dict[int, list[Range]], synths: dict[int, int], roles: Roles,
) -> dict[tuple[int, int], int]:
    """Partition of each synthesis range, keyed by (thread, end time)."""
    found = sorted((r[0], r[1], tid) for tid in synths for r in by_thread[tid] if r[2] == "synthesis")
    partition = {(tid, end): p for p, (_, end, tid) in enumerate(found)}
    for tid, t in synths.items():
        ranges = by_thread[tid]
        syn_starts = [r[0] for r in ranges if r[2] == "synthesis"]
        syn_ends = [r[1] for r in ranges if r[2] == "synthesis"]
        for start, end, name in ranges:
            # Checkout and registration come just before the synthesis they serve.
            k = bisect.bisect_left(syn_starts, start)
            p = partition.get((tid, syn_ends[k]), -1) if k < len(syn_ends) else -1
            roles.spans.append((tr.synth_track(t), name, start, end, p, -1, None))
            if name == "synthesis":
                roles.instants.append((tr.QUEUE_TRACK, QUEUED, end, p, -1, None))
    return {(tid, end): p for (tid, end), p in partition.items()}


def _units(by_thread: dict[int, list[Range]], workers: dict[int, int]) -> dict[tuple[int, int], int]:
    """(worker, k) -> start of the worker's k-th partition."""
    units: dict[tuple[int, int], int] = {}
    for tid, w in workers.items():
        finish_ends = sorted(r[1] for r in by_thread[tid] if r[2] == "finish")
        for start, _, _ in by_thread[tid]:
            key = (w, bisect.bisect_right(finish_ends, start))
            units[key] = min(units.get(key, start), start)
    return units


def _worker_spans(
    roles: Roles, ranges: list[Range], w: int, partition_of: dict[tuple[int, int], int],
) -> None:
    finish_ends = sorted(r[1] for r in ranges if r[2] == "finish")
    roles.finished = roles.finished or bool(finish_ends)
    # The barrier's own range sits inside the GPU thread's barrier_wait phase (with equal
    # times when the clock cannot tell them apart): the second of two nested ones is the barrier's.
    seen: list[Range] = []
    inner: set[int] = set()
    for k, r in enumerate(ranges):
        if r[2] == "barrier_wait":
            if seen and seen[-1][0] <= r[0] and r[1] <= seen[-1][1]:
                inner.add(k)
            seen.append(r)
    for k, (start, end, name) in enumerate(ranges):
        p = partition_of.get((w, bisect.bisect_right(finish_ends, start)), -1)
        if name in ("mutex_wait", "mutex_hold"):
            roles.spans.append((tr.mutex_track(0), name.split("_")[1], start, end, p, w, None))
        elif k in inner:
            roles.spans.append((tr.barrier_track(w), "wait", start, end, p, w, {"party": "gpu"}))
        else:
            roles.spans.append((tr.worker_track(w), name, start, end, p, w, None))


def _prep_spans(roles: Roles, ranges: list[Range], w: int, partition_of: dict[tuple[int, int], int]) -> None:
    prep_starts = sorted(r[0] for r in ranges if r[2] == "prep_msm")
    for start, end, name in ranges:
        k = bisect.bisect_right(prep_starts, start) - 1
        p = partition_of.get((w, max(k, 0)), -1)
        if name == "barrier_wait":
            roles.spans.append((tr.barrier_track(w), "wait", start, end, p, w, {"party": "prep"}))
        else:
            roles.spans.append((tr.prep_track(w), name, start, end, p, w, None))


def _barrier_releases(roles: Roles) -> None:
    rounds: dict[tuple[str, int], dict[str, tuple[int, int, int]]] = {}  # party -> (start, end, worker)
    for track, _, start, end, p, w, attrs in roles.spans:
        if tr.parse(track).kind == tr.BARRIER and attrs:
            rounds.setdefault((track, p), {})[attrs["party"]] = (start, end, w)
    for (track, p), parties in rounds.items():
        if "gpu" in parties and "prep" in parties:
            last = "prep" if parties["prep"][0] > parties["gpu"][0] else "gpu"
            release = max(parties["gpu"][1], parties["prep"][1])
            roles.instants.append((track, "release", release, p, parties["gpu"][2], {"last": last}))
