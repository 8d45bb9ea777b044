"""The GPU mutex and the prep barriers: who waited, how long, and what the lock allows.

Mutex: per worker wait and hold distributions; hand-off gaps (release to the next
acquisition while someone was waiting: pure lock overhead) and idle gaps (nobody waiting);
the serialisation ceiling, i.e. the throughput if holds ran back to back, which no number
of workers can exceed while every partition takes the lock once.

Barrier: per round, which party arrived last and how long the other waited. The GPU
thread's wait is spent holding the mutex, so it is GPU time lost; the prep thread's is not.

Contract: `mutex_reports(trace)`, `barrier_reports(trace)` -> tuples of frozen records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.distribution import Distribution
from workbench.analysis.intervals import Intervals
from workbench.analysis.summary import run_window_ns
from workbench.analysis.tracks import tracks_of
from workbench.model import tracks as tr
from workbench.trace.container import Trace

EVIDENCE = 5  # spans quoted as evidence per claim


@dataclass(frozen=True)
class WorkerLockStats:
    worker: int
    waits: Distribution
    holds: Distribution


@dataclass(frozen=True)
class MutexReport:
    track: str
    gpu: int
    workers: tuple[WorkerLockStats, ...]
    holds: Distribution
    waits: Distribution
    handoff_gaps: Distribution
    idle_gaps: Distribution
    held_fraction: float
    ceiling_per_min: float  # holds per minute if they ran back to back
    achieved_per_min: float  # holds per minute over the run
    longest_waits: tuple[int, ...]  # span indices
    longest_holds: tuple[int, ...]

    @property
    def ceiling_share(self) -> float:
        return self.achieved_per_min / self.ceiling_per_min if self.ceiling_per_min else 0.0


@dataclass(frozen=True)
class BarrierReport:
    track: str
    worker: int
    rounds: int
    gpu_waited: Distribution  # per round, 0 where the GPU thread arrived last
    prep_waited: Distribution
    prep_last: int  # rounds the GPU thread waited for prep
    gpu_last: int
    gpu_wait_spans: tuple[int, ...]  # the GPU party's longest waits (span indices)

    @property
    def gpu_cost_ms(self) -> float:
        return self.gpu_waited.total_ms


def mutex_reports(trace: Trace) -> tuple[MutexReport, ...]:
    tracks = tracks_of(trace, tr.MUTEX)
    return tuple(r for t in tracks if (r := mutex_report(trace, t, tr.gpu_of(t))) is not None)


def mutex_report(trace: Trace, track: str, gpu: int) -> MutexReport | None:
    spans = trace.spans
    holds = np.flatnonzero(trace.span_mask(track=track, name="hold"))
    waits = np.flatnonzero(trace.span_mask(track=track, name="wait"))
    if not len(holds):
        return None
    hold_ns = spans.end_ns[holds] - spans.start_ns[holds]
    wait_ns = spans.end_ns[waits] - spans.start_ns[waits]
    workers = []
    for worker in np.unique(np.concatenate([spans.worker[holds], spans.worker[waits]])).tolist():
        workers.append(WorkerLockStats(
            int(worker), Distribution.of_ns(wait_ns[spans.worker[waits] == worker]),
            Distribution.of_ns(hold_ns[spans.worker[holds] == worker]),
        ))
    handoff, idle = _gaps(trace, holds, waits)
    start, end = run_window_ns(trace)
    window = max(end - start, 1)
    held = Intervals.of(spans.start_ns[holds], spans.end_ns[holds]).clip(start, end).total()
    mean_hold = float(hold_ns.mean())
    return MutexReport(
        track=track, gpu=gpu, workers=tuple(workers), holds=Distribution.of_ns(hold_ns),
        waits=Distribution.of_ns(wait_ns), handoff_gaps=Distribution.of_ns(handoff),
        idle_gaps=Distribution.of_ns(idle), held_fraction=held / window,
        ceiling_per_min=60e9 / mean_hold if mean_hold > 0 else 0.0,
        achieved_per_min=len(holds) / window * 60e9,
        longest_waits=_longest(waits, wait_ns), longest_holds=_longest(holds, hold_ns),
    )


def _gaps(trace: Trace, holds: np.ndarray, waits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Release-to-acquire gaps, split by whether the next holder was already waiting."""
    spans = trace.spans
    order = holds[np.argsort(spans.start_ns[holds], kind="stable")]
    starts, ends = spans.start_ns[order], spans.end_ns[order]
    gaps = starts[1:] - ends[:-1]
    # The next holder waited across the release if its wait began before the release.
    wait_start_by_end = dict(zip(spans.end_ns[waits].tolist(), spans.start_ns[waits].tolist(), strict=True))
    waited = np.array(
        [wait_start_by_end.get(int(s), int(s)) < int(e) for s, e in zip(starts[1:], ends[:-1], strict=True)],
        dtype=bool,
    )
    return gaps[waited], gaps[~waited]


def _longest(indices: np.ndarray, durations: np.ndarray) -> tuple[int, ...]:
    if not len(indices):
        return ()
    top = np.argsort(-durations, kind="stable")[:EVIDENCE]
    return tuple(int(indices[k]) for k in top.tolist() if durations[k] > 0)


def barrier_reports(trace: Trace) -> tuple[BarrierReport, ...]:
    tracks = tracks_of(trace, tr.BARRIER)
    return tuple(r for t in tracks if (r := barrier_report(trace, t)) is not None)


def barrier_report(trace: Trace, track: str) -> BarrierReport | None:
    spans = trace.spans
    waits = np.flatnonzero(trace.span_mask(track=track, name="wait"))
    if not len(waits):
        return None
    rounds: dict[int, dict[str, int]] = {}
    for i in waits.tolist():
        party = str((spans.attrs[i] or {}).get("party", "?"))
        rounds.setdefault(int(spans.end_ns[i]), {})[party] = i
    gpu_waits, prep_waits, gpu_spans = [], [], []
    prep_last = gpu_last = 0
    for parties in rounds.values():
        gpu, prep = parties.get("gpu"), parties.get("prep")
        gpu_ns = int(spans.end_ns[gpu] - spans.start_ns[gpu]) if gpu is not None else 0
        prep_ns = int(spans.end_ns[prep] - spans.start_ns[prep]) if prep is not None else 0
        gpu_waits.append(gpu_ns)
        prep_waits.append(prep_ns)
        if gpu is not None and prep is not None:
            if spans.start_ns[prep] > spans.start_ns[gpu]:
                prep_last += 1
            else:
                gpu_last += 1
        if gpu is not None:
            gpu_spans.append(gpu)
    gpu_idx = np.array(gpu_spans, dtype=np.int64)
    gpu_dur = spans.end_ns[gpu_idx] - spans.start_ns[gpu_idx] if len(gpu_idx) else np.zeros(0, np.int64)
    worker = int(spans.worker[waits[0]])
    return BarrierReport(
        track=track, worker=worker, rounds=len(rounds),
        gpu_waited=Distribution.of_ns(gpu_waits), prep_waited=Distribution.of_ns(prep_waits),
        prep_last=prep_last, gpu_last=gpu_last, gpu_wait_spans=_longest(gpu_idx, gpu_dur),
    )
