"""Time of the verdict (`diagnose`) on large traces, with the current analysis and, for
comparison, with the earlier per-partition code paths patched back in.

    python benchmarks/verdict_speed.py [--spans 10000 100000 1000000] [--repeats 3] [--before-max 100000]

Traces are built as in benchmarks/report_size.py (a real CPU-backend pipeline trace tiled
to the wanted number of spans). The earlier paths grow with partitions x spans (idle) and
partitions^2 (a phase-at-fastest what-if), so they are timed only up to --before-max spans.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Iterator
from unittest import mock

import numpy as np

from workbench.analysis import diagnose, idle, intervals, whatif
from workbench.analysis.costs import RunShape
from workbench.analysis.intervals import Intervals
from workbench.trace.container import Trace

try:
    from report_size import tiled_trace
except ImportError:  # run from the repository root
    from benchmarks.report_size import tiled_trace


def _before_busy_per_worker(trace: Trace, worker: int) -> Intervals:
    spans, inst = trace.spans, trace.instants
    on_worker = trace.span_mask(worker=worker) & (spans.partition >= 0)
    pickups = (inst.name == trace.string_id("pickup")) & (inst.worker == worker)
    pickup_at = dict(zip(inst.partition[pickups].tolist(), inst.ts_ns[pickups].tolist(), strict=True))
    starts, ends = [], []
    for p in np.unique(spans.partition[on_worker]).tolist():
        mine = on_worker & (spans.partition == p)
        first = int(spans.start_ns[mine].min())
        starts.append(min(pickup_at.get(p, first), first))
        ends.append(int(spans.end_ns[mine].max()))
    return Intervals.of(starts, ends)


def _before_intersect(self: Intervals, other: Intervals) -> Intervals:
    if not len(self) or not len(other):
        return Intervals.empty()
    cuts = np.unique(np.concatenate([self.starts, self.ends, other.starts, other.ends]))
    lo, hi = cuts[:-1], cuts[1:]
    inside = self.contains(lo) & other.contains(lo)
    return Intervals.of(lo[inside], hi[inside])


def _before_simulate(shape: RunShape, change: whatif.Change, options: whatif.WhatIfOptions,
                     sample: bool = False) -> Trace:
    if not shape.costs:
        raise whatif.WhatIfError("nothing to replay")
    phase = change.phase_at_fastest
    costs = [whatif._changed(c, change, options,
                             min(whatif._phase_ns(x, phase) for x in shape.costs) if phase else None)
             for c in shape.costs]
    return whatif.replay_costs(shape, change, costs)


@contextlib.contextmanager
def before() -> Iterator[None]:
    with mock.patch.object(idle, "_busy_per_worker", _before_busy_per_worker), \
            mock.patch.object(intervals.Intervals, "intersect", _before_intersect), \
            mock.patch.object(whatif, "simulate", _before_simulate):
        yield


def timed(trace: Trace, repeats: int) -> tuple[float, tuple[str, ...]]:
    times = []
    ids: tuple[str, ...] = ()
    for _ in range(repeats):
        began = time.perf_counter()
        ids = diagnose(trace).ids
        times.append(time.perf_counter() - began)
    return statistics.median(times), ids


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before-max", type=int, default=100_000)
    args = parser.parse_args()
    print(f"{'spans':>10} {'partitions':>11} {'before s':>9} {'after s':>8}  findings")
    for spans in args.spans:
        trace = tiled_trace(spans)
        partitions = len(np.unique(trace.spans.partition[trace.spans.partition >= 0]))
        after_s, ids = timed(trace, args.repeats)
        before_text = f"{'-':>9}"
        if spans <= args.before_max:
            with before():
                before_s, before_ids = timed(trace, 1)
            before_text = f"{before_s:9.2f}" + ("" if before_ids == ids else "*")
        print(f"{spans:>10,} {partitions:>11,} {before_text} {after_s:8.2f}  {', '.join(ids)}", flush=True)
    print(f"(median of {args.repeats} after, 1 run before; * where the findings differ)")


if __name__ == "__main__":
    main()
