"""Invariants every pipeline trace must satisfy, checked from the raw spans."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from workbench.model import tracks as tr
from workbench.model.pipeline import PROVER
from workbench.trace.container import Trace

GPU_ORDER = tuple(p.name for p in PROVER.consumer)


def _holds(trace: Trace, **criteria: int) -> list:
    return [s for s in trace.select(name="hold", **criteria) if tr.parse(s.track).kind == tr.MUTEX]


def mutex_holds_never_overlap(trace: Trace) -> None:
    """Per mutex (one a GPU): holds of different GPUs' mutexes may overlap, of one may not."""
    for track in {s.track for s in _holds(trace)}:
        holds = sorted((s.start_ns, s.end_ns, s.worker) for s in trace.select(name="hold", track=track))
        for (_, e0, w0), (s1, _, w1) in pairwise(holds):
            assert e0 <= s1, f"{track}: worker {w0}'s hold ends at {e0} after worker {w1}'s starts at {s1}"


def every_partition_passes_every_phase_once_in_order(trace: Trace, partitions: int, b_g2_on_gpu: bool = False,
                                                     verified: bool = False) -> None:
    """b_g2_on_gpu: B's G2 sum ran inside batch_add and tail_msm (the GPU backend's MSM
    kernels), so there is no b_g2_msm phase but a G2 span inside each of those two.
    verified: the run verified its proofs (a verify phase after finish)."""
    phases = [ph for ph in PROVER.phases if not (b_g2_on_gpu and ph == "b_g2_msm")
              and (verified or ph != "verify")]
    order = [ph for ph in GPU_ORDER if ph in phases]
    for p in range(partitions):
        spans = [s for s in trace.select(partition=p) if s.name in PROVER.phases]
        names = [s.name for s in spans]
        for phase in PROVER.phases:
            expected = int(phase in phases)
            assert names.count(phase) == expected, f"partition {p}: {phase} seen {names.count(phase)} times"
        by_name = {s.name: s for s in spans}
        assert by_name["synthesis"].end_ns <= by_name["prep_msm"].start_ns
        assert by_name["synthesis"].end_ns <= by_name["ntt_msm_h"].start_ns
        for before, after in pairwise(order):
            assert by_name[before].end_ns <= by_name[after].start_ns, (p, before, after)
        # the lock phases run under the mutex, in one hold
        (hold,) = _holds(trace, partition=p)
        assert hold.start_ns <= by_name[PROVER.lock.phases[0]].start_ns
        last_held = PROVER.lock.phases[-1]
        after_hold = order[order.index(last_held) + 1]
        assert by_name[last_held].end_ns <= hold.end_ns <= by_name[after_hold].start_ns
        if b_g2_on_gpu:
            for outer, inner in (("batch_add", "batch_add_g2"), ("tail_msm", "tail_msm_g2")):
                (g2,) = trace.select(name=inner, partition=p)
                assert by_name[outer].start_ns <= g2.start_ns <= g2.end_ns <= by_name[outer].end_ns


def barrier_release_never_precedes_prep_end(trace: Trace) -> None:
    releases = {(i.worker, i.partition): i.ts_ns for i in trace.iter_instants() if i.name == "release"}
    preps = trace.select(name="prep_msm")
    assert preps
    for prep in preps:
        assert releases[(prep.worker, prep.partition)] >= prep.end_ns
        (gpu_wait,) = trace.select(name="barrier_wait", partition=prep.partition)
        assert gpu_wait.end_ns >= prep.end_ns


def lookahead_is_respected(trace: Trace, lookahead: int) -> None:
    """At no time are more than `lookahead` partitions synthesising or waiting for pickup."""
    starts = {s.partition: s.start_ns for s in trace.select(name="synthesis")}
    pickups = {i.partition: i.ts_ns for i in trace.iter_instants() if i.name == "pickup"}
    events = []
    for p, start in starts.items():
        events.append((start, 1))
        events.append((pickups[p], -1))
    # at equal times, pickups (which release a permit) come first
    events.sort(key=lambda e: (e[0], e[1]))
    ahead = np.cumsum([d for _, d in events])
    assert ahead.max() <= lookahead, f"{ahead.max()} partitions ahead with lookahead {lookahead}"
