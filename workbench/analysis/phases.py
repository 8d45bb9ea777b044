"""Per phase: distribution, the constant-vs-variable split, and what the variation tracks.

The split follows how the production investigation read its timing lines: phases that cost
the same every time (batch_add, tail_msm) are the GPU doing fixed work; a phase under the
lock that swings several-fold while those stay constant is waiting on something else. Two
numbers point at the something: each lock phase's share of the variation of the whole
mutex hold, and the correlation of a phase's length with what ran beside it (synthesis
threads busy, other copies in flight).

Contract: `phase_report(trace) -> PhaseReport`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.distribution import Distribution, correlation
from workbench.analysis.intervals import concurrency_ns
from workbench.analysis.tracks import COPY_SPANS, LOCK_PHASES, device_mask, kind_mask, names_mask
from workbench.model import tracks as tr
from workbench.model.pipeline import PROVER
from workbench.trace.container import Trace

SUB_PHASES = ("upload", "h2d_copy", "staging_copy", "ntt", "coset_intt", "msm_h")
# A phase is constant when its instances vary less than this (standard deviation / mean).
CONSTANT_CV = 0.15


@dataclass(frozen=True)
class PhaseProfile:
    phase: str
    durations: Distribution
    constant: bool
    fixed_ms: float  # what every instance pays (the fastest one)
    variable_ms: float  # mean cost above that
    # Share of the variance of the mutex hold this phase accounts for (lock phases only).
    hold_variance_share: float | None
    mean_synth_active: float  # synthesis threads running, averaged over the phase's spans
    synth_correlation: float | None  # r(duration, synthesis threads running during it)
    copies_correlation: float | None  # r(duration, other copies in flight during it)
    fastest: int  # span index
    slowest: int


@dataclass(frozen=True)
class PhaseReport:
    phases: tuple[PhaseProfile, ...]

    def get(self, phase: str) -> PhaseProfile | None:
        return next((p for p in self.phases if p.phase == phase), None)

    @property
    def constant(self) -> tuple[str, ...]:
        return tuple(p.phase for p in self.phases if p.constant)

    @property
    def variable(self) -> tuple[str, ...]:
        return tuple(p.phase for p in self.phases if not p.constant)


def phase_report(trace: Trace) -> PhaseReport:
    spans = trace.spans
    synth = trace.span_mask(name="synthesis")
    copies = names_mask(trace, COPY_SPANS)
    if not copies.any():
        copies = kind_mask(trace, tr.COPIES, name="h2d")
    hold_by_partition = _per_partition(trace, kind_mask(trace, tr.MUTEX, name="hold"))
    on_mutex, on_device = kind_mask(trace, tr.MUTEX), device_mask(trace)
    profiles = []
    for phase in (*PROVER.phases, *SUB_PHASES):
        mask = trace.span_mask(name=phase) & ~on_mutex
        if phase != "synthesis":
            mask &= ~on_device
        idx = np.flatnonzero(mask)
        if not len(idx):
            continue
        starts, ends = spans.start_ns[idx], spans.end_ns[idx]
        durations = ends - starts
        lengths = np.maximum(durations, 1).astype(np.float64)
        synth_active = concurrency_ns(starts, ends, spans.start_ns[synth], spans.end_ns[synth]) / lengths
        if phase == "synthesis":
            synth_active = synth_active - 1  # not counting itself
        in_flight = concurrency_ns(starts, ends, spans.start_ns[copies], spans.end_ns[copies]) / lengths
        if phase in COPY_SPANS:
            in_flight = in_flight - 1
        dist = Distribution.of_ns(durations)
        share = None
        if phase in LOCK_PHASES:
            share = _variance_share(_per_partition(trace, mask), hold_by_partition)
        profiles.append(PhaseProfile(
            phase=phase, durations=dist, constant=dist.cv < CONSTANT_CV, fixed_ms=dist.min_ms,
            variable_ms=dist.mean_ms - dist.min_ms, hold_variance_share=share,
            mean_synth_active=float(synth_active.mean()),
            synth_correlation=correlation(durations, synth_active),
            copies_correlation=correlation(durations, in_flight),
            fastest=int(idx[np.argmin(durations)]), slowest=int(idx[np.argmax(durations)]),
        ))
    return PhaseReport(tuple(profiles))


def _per_partition(trace: Trace, mask: np.ndarray) -> dict[int, int]:
    spans = trace.spans
    out: dict[int, int] = {}
    for p, d in zip(spans.partition[mask].tolist(), (spans.end_ns[mask] - spans.start_ns[mask]).tolist(),
                    strict=True):
        if p >= 0:
            out[p] = out.get(p, 0) + d
    return out


def _variance_share(phase: dict[int, int], hold: dict[int, int]) -> float | None:
    """cov(phase, hold) / var(hold) over partitions: the lock phases' shares sum to one when
    the hold is exactly their sum."""
    common = sorted(set(phase) & set(hold))
    if len(common) < 3:
        return None
    x = np.array([phase[p] for p in common], dtype=np.float64)
    y = np.array([hold[p] for p in common], dtype=np.float64)
    var = y.var()
    if var == 0:
        return None
    return float(((x - x.mean()) * (y - y.mean())).mean() / var)
