"""Idle by cause: every moment the GPU computes nothing, attributed to what the workers did.

The GPU counts as busy while a kernel runs (device records) or, without them, while a
compute phase timed on the host runs. Each idle moment gets the first cause that holds
then, in this order:

1. copy under the lock: the mutex holder is copying a, b, c (or staging them);
2. barrier: the holder waits at the barrier for prep_msm;
3. other work under the lock: the holder does anything else that is not a kernel;
4. copy before the lock: a worker copies (lock scope compute) while the mutex is free;
5. hand-off: the mutex is free and a worker is already waiting for it;
6. waiting for synthesis: a worker has no partition and partitions are still to come;
7. end of the run: a worker has no partition and none are left to synthesise;
8. proof assembly: every worker is in b_g2_msm or finish;
9. other.

Contract: `idle_report(trace) -> tuple[IdleReport, ...]`, one per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.intervals import Intervals, concurrency_ns
from workbench.analysis.summary import run_window_ns
from workbench.analysis.tracks import AFTER_LOCK, COPY_SPANS, gpus, kernel_mask, names_mask, worker_mask
from workbench.analysis.utilisation import DEVICE_KERNELS, host_compute_intervals, workers_of_gpu
from workbench.model.pipeline import PICKUP, QUEUED
from workbench.model.tracks import mutex_track
from workbench.trace.container import Trace

EVIDENCE = 5
UNDER_LOCK = ("copy_under_lock", "barrier", "other_under_lock")
CAUSES = {
    "copy_under_lock": "copying a, b, c while holding the mutex",
    "barrier": "holding the mutex at the barrier, waiting for prep_msm",
    "other_under_lock": "holding the mutex, doing host work that is not a kernel",
    "copy_before_lock": "copying a, b, c before taking the mutex",
    "handoff": "mutex hand-off (free while a worker waits for it)",
    "waiting_for_synthesis": "a worker waiting for synthesis to deliver a partition",
    "end_of_run": "a worker with no partitions left to prove",
    "proof_assembly": "every worker in b_g2_msm or finish",
    "other": "none of the above",
}


@dataclass(frozen=True)
class IdleCause:
    cause: str
    label: str
    ms: float
    share: float  # of the run window
    pieces: int
    evidence: tuple[int, ...]  # span indices that show the state


@dataclass(frozen=True)
class IdleReport:
    gpu: int
    basis: str  # what "busy" means here
    window_ms: float
    busy_ms: float
    idle_ms: float
    causes: tuple[IdleCause, ...]  # largest first

    def get(self, cause: str) -> IdleCause | None:
        return next((c for c in self.causes if c.cause == cause), None)

    @property
    def mutex_free_ms(self) -> float:
        """Idle time while nobody held the mutex (the causes after the three under the lock)."""
        return sum(c.ms for c in self.causes if c.cause not in UNDER_LOCK)

    def share(self, cause: str) -> float:
        found = self.get(cause)
        return found.share if found else 0.0


def idle_report(trace: Trace) -> tuple[IdleReport, ...]:
    found = gpus(trace) or ([0] if worker_mask(trace).any() else [])
    return tuple(r for gpu in found if (r := gpu_idle(trace, gpu)) is not None)


def gpu_idle(trace: Trace, gpu: int) -> IdleReport | None:
    start, end = run_window_ns(trace)
    if end <= start:
        return None
    spans = trace.spans
    kernels = kernel_mask(trace, gpu)
    if kernels.any():
        busy, basis = Intervals.of(spans.start_ns[kernels], spans.end_ns[kernels]), DEVICE_KERNELS
    else:
        computed, basis = host_compute_intervals(trace, gpu)
        if computed is None:
            return None
        busy = computed
    busy = busy.clip(start, end)
    idle = busy.complement(start, end)
    workers = sorted(workers_of_gpu(trace, gpu))
    mine = worker_mask(trace) & np.isin(spans.worker, workers)
    mutex = mutex_track(gpu)
    holds = trace.span_mask(track=mutex, name="hold")
    held = _of(trace, holds)
    copies = names_mask(trace, COPY_SPANS) & mine
    uploads = names_mask(trace, ("upload", *COPY_SPANS)) & mine
    barrier = trace.span_mask(name="barrier_wait") & mine
    waiting = trace.span_mask(track=mutex, name="wait")
    after = names_mask(trace, AFTER_LOCK) & mine
    no_partition, left = _without_partition(trace, workers, start, end)
    all_assembling = _all_of(trace, after, workers, start, end)
    states: list[tuple[str, Intervals, np.ndarray]] = [
        ("copy_under_lock", _of(trace, copies).intersect(held), copies),
        ("barrier", _of(trace, barrier).intersect(held), barrier),
        ("other_under_lock", held, holds),
        ("copy_before_lock", _of(trace, uploads), uploads),
        ("handoff", _of(trace, waiting), waiting),
        ("waiting_for_synthesis", no_partition.subtract(left), trace.span_mask(name="synthesis")),
        ("end_of_run", no_partition.intersect(left), np.zeros(len(spans), bool)),
        ("proof_assembly", all_assembling, after),
    ]
    causes = []
    remaining = idle
    for cause, state, defining in states:
        piece = remaining.intersect(state)
        remaining = remaining.subtract(piece)
        if piece.total() > 0:
            causes.append(_cause(trace, cause, piece, defining, end - start))
    if remaining.total() > 0:
        causes.append(_cause(trace, "other", remaining, np.zeros(len(spans), bool), end - start))
    causes.sort(key=lambda c: -c.ms)
    return IdleReport(
        gpu=gpu, basis=basis, window_ms=(end - start) / 1e6, busy_ms=busy.total() / 1e6,
        idle_ms=idle.total() / 1e6, causes=tuple(causes),
    )


def _of(trace: Trace, mask: np.ndarray) -> Intervals:
    return Intervals.of(trace.spans.start_ns[mask], trace.spans.end_ns[mask])


def _busy_per_worker(trace: Trace, worker: int) -> Intervals:
    """From picking a partition up to finishing it (to the end of its last span on the
    worker's threads where no pickup was recorded)."""
    spans, inst = trace.spans, trace.instants
    on_worker = trace.span_mask(worker=worker) & (spans.partition >= 0)
    if not on_worker.any():
        return Intervals.empty()
    # Grouped by partition with one sort, so the cost does not grow with partitions x spans.
    parts = spans.partition[on_worker]
    order = np.argsort(parts, kind="stable")
    parts = parts[order]
    heads = np.flatnonzero(np.concatenate([[True], parts[1:] != parts[:-1]]))
    keys = parts[heads]
    first = np.minimum.reduceat(spans.start_ns[on_worker][order], heads)
    ends = np.maximum.reduceat(spans.end_ns[on_worker][order], heads)
    pickups = (inst.name == trace.string_id(PICKUP)) & (inst.worker == worker)
    starts = first
    if pickups.any():
        # A partition picked up twice keeps its last pickup, as a mapping built in order would.
        picked = inst.partition[pickups][::-1]
        picked_keys, last = np.unique(picked, return_index=True)
        picked_at = inst.ts_ns[pickups][::-1][last]
        at = np.minimum(np.searchsorted(picked_keys, keys), len(picked_keys) - 1)
        starts = np.where(picked_keys[at] == keys, np.minimum(picked_at[at], first), first)
    return Intervals.of(starts, ends)


def _without_partition(
    trace: Trace, workers: list[int], start: int, end: int,
) -> tuple[Intervals, Intervals]:
    """When some worker had no partition, and when no partition was left to come."""
    idle = Intervals.empty()
    for w in workers:
        idle = idle.union(_busy_per_worker(trace, w).complement(start, end))
    synth = trace.span_mask(name="synthesis")
    queued = trace.instants.name == trace.string_id(QUEUED)
    last = [int(trace.spans.end_ns[synth].max())] if synth.any() else []
    last += [int(trace.instants.ts_ns[queued].max())] if queued.any() else []
    nothing_left = Intervals.of([max(last)], [end]) if last else Intervals.empty()
    return idle, nothing_left


def _all_of(trace: Trace, mask: np.ndarray, workers: list[int], start: int, end: int) -> Intervals:
    if not workers:
        return Intervals.empty()  # no worker at all is not every worker doing something
    together = Intervals.of([start], [end])
    for w in workers:
        mine = mask & (trace.spans.worker == w)
        together = together.intersect(_of(trace, mine))
    return together


def _cause(trace: Trace, cause: str, piece: Intervals, defining: np.ndarray, window: int) -> IdleCause:
    spans = trace.spans
    idx = np.flatnonzero(defining)
    overlaps = concurrency_ns(spans.start_ns[idx], spans.end_ns[idx], piece.starts, piece.ends)
    top = np.argsort(-overlaps, kind="stable")[:EVIDENCE]
    evidence = tuple(int(idx[k]) for k in top.tolist() if overlaps[k] > 0)
    total = piece.total()
    return IdleCause(cause, CAUSES[cause], total / 1e6, total / window, len(piece), evidence)
