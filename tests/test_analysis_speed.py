"""The vectorised interval and idle code against plain reference implementations, and the
sampled what-if replay against the full one."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.analysis.costs import PartitionCosts, RunShape
from workbench.analysis.idle import _busy_per_worker
from workbench.analysis.intervals import Intervals
from workbench.analysis.summary import summarize
from workbench.analysis.whatif import REPLAY_SAMPLE, Change, WhatIfOptions, sample_costs, simulate
from workbench.trace.container import Trace

SPAN = 60
pairs = st.lists(st.tuples(st.integers(0, SPAN), st.integers(0, 12)), max_size=12)


def _intervals(raw: list[tuple[int, int]]) -> Intervals:
    return Intervals.of([s for s, _ in raw], [s + n for s, n in raw])


def _points(raw: list[tuple[int, int]]) -> set[int]:
    """The integer instants [s, s + n) covers: a set of half-open intervals on integers."""
    return {t for s, n in raw for t in range(s, s + n)}


def _as_points(x: Intervals) -> set[int]:
    return {t for s, e in zip(x.starts.tolist(), x.ends.tolist(), strict=True) for t in range(s, e)}


def _canonical(x: Intervals) -> bool:
    """Sorted, non-empty, and apart: what `Intervals.of` makes and every operation keeps."""
    s, e = x.starts, x.ends
    return bool((e > s).all() and (s[1:] > e[:-1]).all())


@settings(max_examples=300, deadline=None)
@given(pairs, pairs, st.integers(0, SPAN), st.integers(0, SPAN))
def test_interval_operations_match_point_sets(a: list[tuple[int, int]], b: list[tuple[int, int]],
                                              lo: int, width: int) -> None:
    x, y = _intervals(a), _intervals(b)
    px, py = _points(a), _points(b)
    hi = lo + width
    results = {
        "of": (x, px),
        "union": (x.union(y), px | py),
        "intersect": (x.intersect(y), px & py),
        "subtract": (x.subtract(y), px - py),
        "complement": (x.complement(lo, hi), set(range(lo, hi)) - px),
        "clip": (x.clip(lo, hi), {t for t in px if lo <= t < hi}),
    }
    for name, (got, want) in results.items():
        assert _as_points(got) == want, name
        assert _canonical(got), name
        assert got.total() == len(want), name


def _reference_busy(trace: Trace, worker: int) -> Intervals:
    spans, inst = trace.spans, trace.instants
    pickup_at: dict[int, int] = {}
    for i in range(len(inst.ts_ns)):
        if inst.name[i] == trace.string_id("pickup") and inst.worker[i] == worker:
            pickup_at[int(inst.partition[i])] = int(inst.ts_ns[i])
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i in range(len(spans)):
        p = int(spans.partition[i])
        if spans.worker[i] != worker or p < 0:
            continue
        first[p] = min(first.get(p, int(spans.start_ns[i])), int(spans.start_ns[i]))
        last[p] = max(last.get(p, int(spans.end_ns[i])), int(spans.end_ns[i]))
    starts = [min(pickup_at.get(p, first[p]), first[p]) for p in first]
    return Intervals.of(starts, [last[p] for p in first])


span_rows = st.lists(
    st.tuples(st.integers(0, 500), st.integers(0, 80), st.integers(-1, 6), st.integers(0, 2)), max_size=40,
)
pickup_rows = st.lists(st.tuples(st.integers(0, 500), st.integers(-1, 8), st.integers(0, 2)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(span_rows, pickup_rows)
def test_busy_per_worker_matches_reference(spans: list[tuple[int, int, int, int]],
                                           pickups: list[tuple[int, int, int]]) -> None:
    rows = [(f"worker/{w}", "ntt", s, s + n, p, w, None) for s, n, p, w in spans]
    instants = [(f"worker/{w}", "pickup", t, p, w, None) for t, p, w in pickups]
    instants.append(("queue", "queued", 0, 0, -1, None))  # the name "pickup" may then be absent
    trace = Trace.from_rows(rows, instants)
    for worker in range(3):
        got, want = _busy_per_worker(trace, worker), _reference_busy(trace, worker)
        assert np.array_equal(got.starts, want.starts) and np.array_equal(got.ends, want.ends)


def _shape(partitions: int) -> RunShape:
    rng = np.random.default_rng(7)
    drift = np.linspace(1.0, 1.5, partitions)  # costs that change over the run
    costs = tuple(
        PartitionCosts(
            partition=p, synthesis_ns=3e6 * rng.lognormal(0, 0.3) * d, checkout_ns=1e4, prep_ns=1e6,
            copy_ns=2e5, copy_bytes=0.0, staging_ns=0.0, compute_ns=1e6 * rng.lognormal(0, 0.3) * d,
            batch_add_ns=2e5 * rng.lognormal(0, 0.3), tail_msm_ns=1e5, lock_other_ns=1e4,
            b_g2_msm_ns=3e5, finish_ns=1e4,
        )
        for p, d in zip(range(partitions), drift.tolist(), strict=True)
    )
    return RunShape(workers=2, synth_threads=2, lookahead=4, lock_scope="coarse", memory_mode="unknown",
                    emulated=True, host_cores=1.5, costs=costs, measured_per_min=1.0,
                    measured_done=partitions)


def test_sample_is_spread_blocks_and_small_runs_are_whole() -> None:
    shape = _shape(3 * REPLAY_SAMPLE)
    chosen = sample_costs(shape.costs)
    assert len(chosen) == REPLAY_SAMPLE
    assert chosen[0] is shape.costs[0] and chosen[-1] is shape.costs[-1]
    small = dataclasses.replace(shape, costs=shape.costs[:REPLAY_SAMPLE])
    assert sample_costs(small.costs) == small.costs


def test_sampled_replay_stays_within_tolerance() -> None:
    shape = _shape(3 * REPLAY_SAMPLE)
    options = WhatIfOptions()
    changes = [Change(), Change(synthesis_speedup=2), Change(phase_at_fastest="ntt_msm_h"),
               Change(gpu_workers=3)]
    full = [summarize(simulate(shape, c, options)).throughput_per_min for c in changes]
    sampled = [summarize(simulate(shape, c, options, sample=True)).throughput_per_min for c in changes]
    for f, s in zip(full, sampled, strict=True):
        assert abs(s / f - 1) < 0.01
    for f, s in zip(full[1:], sampled[1:], strict=True):
        assert abs((s / sampled[0] - 1) - (f / full[0] - 1)) < 0.01  # gains within 1 point
