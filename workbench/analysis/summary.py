"""The run summary: throughput, per-phase distributions, mutex and barrier per worker.

Contract: `summarize(trace) -> RunSummary`, derived from the raw spans alone, so it works the
same on a live snapshot, a saved trace or an imported log.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.intervals import Intervals
from workbench.analysis.tracks import kind_mask
from workbench.model import tracks as tr
from workbench.model.pipeline import PROVER
from workbench.trace.container import Trace

NS_PER_MS = 1e6


@dataclass(frozen=True)
class PhaseStats:
    phase: str
    count: int
    min_ms: float
    median_ms: float
    max_ms: float
    total_ms: float


@dataclass(frozen=True)
class MutexWorkerStats:
    worker: int
    holds: int
    held_ms: float  # total
    held_median_ms: float
    waited_ms: float  # total
    waited_median_ms: float
    waited_max_ms: float


@dataclass(frozen=True)
class BarrierPartyStats:
    worker: int
    party: str
    rounds: int
    waited_ms: float
    waited_median_ms: float
    waited_max_ms: float
    last_to_arrive: int  # rounds in which everyone waited for this party


@dataclass(frozen=True)
class RunSummary:
    outcome: str
    partitions_done: int
    wall_s: float
    throughput_per_min: float
    phases: tuple[PhaseStats, ...]
    mutex: tuple[MutexWorkerStats, ...]
    mutex_held_fraction: float  # share of wall time the GPU mutex was held by anyone
    barrier: tuple[BarrierPartyStats, ...]
    proofs_verified: int | None = None  # proofs that passed the verify phase; None: not verified


def phase_stats(trace: Trace, phase: str) -> PhaseStats | None:
    mask = trace.span_mask(name=phase)
    durations = trace.durations_ns(mask) / NS_PER_MS
    if not len(durations):
        return None
    return PhaseStats(
        phase, len(durations), float(durations.min()), float(np.median(durations)),
        float(durations.max()), float(durations.sum()),
    )


def run_window_ns(trace: Trace) -> tuple[int, int]:
    """From run start to the end of the last recorded thing (the run's wall time).

    A trace without run marks (a foreign program's) is judged over the extent of its spans:
    instants and counter samples outside them (a profiler's recording window opening, a
    counter sampled before the program's first call) record no activity to judge."""
    starts = trace.instants.ts_ns[trace.instants.name == trace.string_id("run_start")]
    first, last = trace.time_range()
    if len(trace.spans):
        first, last = int(trace.spans.start_ns.min()), int(trace.spans.end_ns.max())
    start = int(starts.min()) if len(starts) else first
    ends = trace.instants.ts_ns[trace.instants.name == trace.string_id("run_end")]
    end = int(ends.max()) if len(ends) else last
    return start, max(end, start)


def summarize(trace: Trace) -> RunSummary:
    start, end = run_window_ns(trace)
    wall_s = (end - start) / 1e9
    finished = kind_mask(trace, tr.WORKER, name=PROVER.done)
    errors = [a for a in np.array(trace.spans.attrs, dtype=object)[finished] if a and "error" in a]
    done = int(finished.sum()) - len(errors)
    phases = tuple(s for p in PROVER.phases if (s := phase_stats(trace, p)) is not None)
    return RunSummary(
        outcome=str(trace.meta.get("outcome", "unknown")),
        partitions_done=done,
        wall_s=wall_s,
        throughput_per_min=done / wall_s * 60 if wall_s > 0 else 0.0,
        phases=phases,
        mutex=mutex_by_worker(trace),
        mutex_held_fraction=_held_fraction(trace, start, end),
        barrier=barrier_by_party(trace),
        proofs_verified=_verified(trace),
    )


def _verified(trace: Trace) -> int | None:
    mask = kind_mask(trace, tr.WORKER, name="verify")
    if not mask.any() and not trace.config.get("verify"):
        return None
    return sum(1 for a in np.array(trace.spans.attrs, dtype=object)[mask] if not (a and "error" in a))


def mutex_by_worker(trace: Trace) -> tuple[MutexWorkerStats, ...]:
    holds = kind_mask(trace, tr.MUTEX, name="hold")
    waits = kind_mask(trace, tr.MUTEX, name="wait")
    stats = []
    for worker in np.unique(trace.spans.worker[holds | waits]).tolist():
        held = trace.durations_ns(holds & (trace.spans.worker == worker)) / NS_PER_MS
        waited = trace.durations_ns(waits & (trace.spans.worker == worker)) / NS_PER_MS
        stats.append(MutexWorkerStats(
            int(worker), len(held), float(held.sum()), _median(held), float(waited.sum()),
            _median(waited), float(waited.max()) if len(waited) else 0.0,
        ))
    return tuple(stats)


def barrier_by_party(trace: Trace) -> tuple[BarrierPartyStats, ...]:
    mask = kind_mask(trace, tr.BARRIER, name="wait")
    indices = np.flatnonzero(mask)
    groups: dict[tuple[int, str], list[float]] = {}
    for i in indices.tolist():
        attrs = trace.spans.attrs[i] or {}
        key = (int(trace.spans.worker[i]), str(attrs.get("party", "?")))
        groups.setdefault(key, []).append(
            float(trace.spans.end_ns[i] - trace.spans.start_ns[i]) / NS_PER_MS
        )
    releases = trace.instants.name == trace.string_id("release")
    last_counts: dict[tuple[int, str], int] = {}
    for i in np.flatnonzero(releases).tolist():
        attrs = trace.instants.attrs[i] or {}
        key = (int(trace.instants.worker[i]), str(attrs.get("last", "?")))
        last_counts[key] = last_counts.get(key, 0) + 1
    out = []
    for (worker, party), waits in sorted(groups.items()):
        values = np.array(waits)
        out.append(BarrierPartyStats(
            worker, party, len(values), float(values.sum()), _median(values), float(values.max()),
            last_counts.get((worker, party), 0),
        ))
    return tuple(out)


def _held_fraction(trace: Trace, start: int, end: int) -> float:
    holds = kind_mask(trace, tr.MUTEX, name="hold")
    if end <= start or not holds.any():
        return 0.0
    # Within the wall time only: a hold ending past the run (a damaged time) cannot exceed it.
    held = Intervals.of(trace.spans.start_ns[holds], trace.spans.end_ns[holds]).clip(start, end)
    return held.total() / (end - start)


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if len(values) else 0.0
