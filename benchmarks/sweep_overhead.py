"""The scheduling overhead of `workbench sweep` per run, against the 2% target of issue 19.

    python benchmarks/sweep_overhead.py [--runs 8] [--log2 10] [--partitions 8] [--backend cpu]
                                        [--executors ray local] [--address ADDR]

Runs one grid of `--runs` identical runs (the CPU backend by default) through each executor.
Each run asks for every core of the host (its threads' count capped there), so runs follow
one another and the sweep's wall time is their own wall times plus what the sweep adds:
dispatch, the run's start in a worker process, its trace's bytes back through the object
store, writing the trace and rewriting the index. Overhead per run = (sweep wall - sum of the
runs' own walls) / runs, each run's wall measured inside it (setup of its pipeline included);
the ratio is that over the mean run wall. The sweep wall runs from the executor being ready
(Ray started or joined, timed apart) to the last run's end as the driver saw it. Apart: the
wait for the first run (a worker process started, the package imported: once per worker) and
the median gap between one run's end and the next one's start (what every run pays).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = 0.02


class Clock:
    """The driver's side of the times: when the executor was ready and when the last run ended."""

    def __init__(self) -> None:
        self.began = 0.0
        self.began_epoch = 0.0
        self.last_end = 0.0

    def began_(self) -> None:
        self.began, self.began_epoch = time.perf_counter(), time.time()

    def finished_(self) -> None:
        self.last_end = time.perf_counter()


def measure(executor_name: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from workbench.sweep import Driver, Listener, parse_grid
    from workbench.sweep.local import LocalExecutor
    from workbench.sweep.ray_executor import RayExecutor

    cores = os.cpu_count() or 1
    base = {"backend": args.backend, "log2_constraints": args.log2, "partitions": args.partitions,
            "synth_threads": max(1, cores - 1), "gpu_workers": 1}
    grid = parse_grid({"base": base, "repeats": args.runs, "cells": {"same": {}}}, "sweep_overhead")
    clock = Clock()

    class Timing(Listener):
        def began(self, index: Any) -> None:
            clock.began_()

        def finished(self, entry: Any) -> None:
            clock.finished_()

    executor: Any = RayExecutor(args.address) if executor_name == "ray" else LocalExecutor()
    opened = time.perf_counter()
    executor.open()
    ready_s = time.perf_counter() - opened
    index = Driver(grid, folder, executor.name, Timing()).run(executor)
    walls = [e.wall_s for e in index.entries if e.status == "completed"]
    if len(walls) != args.runs:
        raise SystemExit(f"{executor_name}: {args.runs - len(walls)} runs did not complete: "
                         f"{[e.error for e in index.entries if e.error]}")
    sweep_wall = clock.last_end - clock.began
    overhead = (sweep_wall - sum(walls)) / args.runs
    # One host's clock (the runs' and the driver's): the wait before the first run (a worker
    # process started and the package imported, once per worker) apart from the gap between
    # one run's end and the next one's start, which every run pays.
    spans = sorted((e.start, e.end) for e in index.entries)
    gaps = [later - end for (_, end), (later, _) in itertools.pairwise(spans)]
    return {"executor": executor_name, "ready_s": ready_s, "sweep_wall_s": sweep_wall,
            "runs_wall_s": sum(walls),
            "run_median_s": statistics.median(walls), "overhead_per_run_s": overhead,
            "ratio": overhead / statistics.mean(walls), "first_start_s": spans[0][0] - clock.began_epoch,
            "gap_median_s": statistics.median(gaps) if gaps else 0.0,
            "gap_ratio": (statistics.median(gaps) if gaps else 0.0) / statistics.mean(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--log2", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--executors", nargs="+", default=["ray", "local"], choices=["ray", "local"])
    parser.add_argument("--address", help="a Ray cluster to join (default: a local one started here)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"{args.runs} runs of {args.partitions} partitions of 2^{args.log2}, {args.backend} backend, "
          f"{os.cpu_count()} cores, load average {load:.1f} at the start; target: overhead at most "
          f"{TARGET:.0%} of a run's wall")
    print(f"{'executor':>8} {'ready s':>8} {'sweep s':>8} {'runs s':>8} {'run s':>6} {'overhead/run s':>15} "
          f"{'ratio':>7} {'vs 2%':>6} {'first start s':>13} {'gap s':>6} {'gap ratio':>9}")
    for name in args.executors:
        with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as tmp:
            m = measure(name, args, Path(tmp))
        print(f"{m['executor']:>8} {m['ready_s']:8.1f} {m['sweep_wall_s']:8.1f} {m['runs_wall_s']:8.1f} "
              f"{m['run_median_s']:6.2f} {m['overhead_per_run_s']:15.3f} {m['ratio']:7.2%} "
              f"{m['ratio'] / TARGET:6.2f} {m['first_start_s']:13.2f} {m['gap_median_s']:6.3f} "
              f"{m['gap_ratio']:9.2%}")


if __name__ == "__main__":
    main()
