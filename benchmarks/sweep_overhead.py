"""The scheduling overhead of `workbench sweep` per run, against the 2% target of issue 19.

    python benchmarks/sweep_overhead.py [--runs 8] [--log2 10] [--partitions 8] [--backend cpu]
                                        [--executors ray local] [--address ADDR]

Runs one grid of `--runs` identical runs (the CPU backend by default) through each executor.
Each run asks for every core of the host (its threads' count capped there), so runs follow
one another and the sweep's wall time is their own wall times plus what the sweep adds:
handing the run to a runner, the runner's start (once a runner: a process, the package
imported), writing the trace and rewriting the index. Overhead per run = (sweep wall - sum of
the runs' own walls) / runs, each run's wall measured inside it (setup of its pipeline
included); the ratio is that over the mean run wall. The sweep wall runs from the executor
being ready (Ray started or joined, timed apart) to the last run's end as the driver saw it.
Apart: the wait for the first run (`first start`, once a runner: its process and imports),
the overhead per run without it (`steady`: what a run pays once its runner is up, what a
sweep of long runs sees) and the median gap between one run's end and the next one's start.

CPU, to tell what this machine adds from what the sweep costs: each run's own CPU time (its
process, during the run), and per run the CPU time this driver, Ray's own processes (raylet,
GCS, agents, dashboard, autoscaler monitor) and the runners outside their runs (their start,
their idle threads) spent during the sweep. On a host whose cores the runs keep busy, every
second of that comes out of the runs' time.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

TARGET = 0.02
TAG = "WORKBENCH_SWEEP_OVERHEAD_TAG"  # in the environment of every process the cluster starts


def tagged_cpu(tag: str) -> dict[int, tuple[str, float]]:
    """CPU seconds so far of every process whose environment carries the tag, by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"{TAG}={tag}".encode() not in Path(f"/proc/{pid}/environ").read_bytes():
                continue
            stat = Path(f"/proc/{pid}/stat").read_text()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
        except (OSError, ValueError):
            continue
        found[int(pid)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return found


def kind_of(name: str) -> str:
    return "runners" if "Runner" in name else "daemons"


def measure(executor_name: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from workbench.sweep import Driver, Listener, parse_grid
    from workbench.sweep.local import LocalExecutor
    from workbench.sweep.ray_executor import RayExecutor

    cores = os.cpu_count() or 1
    base = {"backend": args.backend, "log2_constraints": args.log2, "partitions": args.partitions,
            "synth_threads": max(1, cores - 1), "gpu_workers": 1}
    grid = parse_grid({"base": base, "repeats": args.runs, "cells": {"same": {}}}, "sweep_overhead")
    tag = uuid.uuid4().hex
    os.environ[TAG] = tag  # the local cluster's processes inherit it
    marks: dict[str, Any] = {}

    class Timing(Listener):
        def began(self, index: Any) -> None:
            marks["cpu0"], marks["driver0"] = tagged_cpu(tag), time.process_time()
            marks["began"], marks["epoch"] = time.perf_counter(), time.time()

        def finished(self, entry: Any) -> None:
            marks["end"] = time.perf_counter()
            if all(e.status not in ("pending", "running") for e in index_of["i"].entries):
                marks["cpu1"], marks["driver1"] = tagged_cpu(tag), time.process_time()

    executor: Any = RayExecutor(args.address) if executor_name == "ray" else LocalExecutor()
    opened = time.perf_counter()
    executor.open()
    ready_s = time.perf_counter() - opened
    driver = Driver(grid, folder, executor.name, Timing())
    index_of = {"i": driver.index}
    index = driver.run(executor)
    done = [e for e in index.entries if e.status == "completed"]
    if len(done) != args.runs:
        raise SystemExit(f"{executor_name}: {args.runs - len(done)} runs did not complete: "
                         f"{[e.error for e in index.entries if e.error]}")
    walls = [e.wall_s for e in done]
    sweep_wall = marks["end"] - marks["began"]
    spans = sorted((e.start, e.end) for e in index.entries)
    gaps = [later - end for (_, end), (later, _) in itertools.pairwise(spans)]
    cpu: dict[str, float] = {"runners": 0.0, "daemons": 0.0}
    for pid, (name, seconds) in marks["cpu1"].items():
        cpu[kind_of(name)] += seconds - marks["cpu0"].get(pid, (name, 0.0))[1]
    cpu["driver"] = marks["driver1"] - marks["driver0"]
    overhead = (sweep_wall - sum(walls)) / args.runs
    first = spans[0][0] - marks["epoch"]
    steady = (sweep_wall - first - sum(walls)) / args.runs
    # What the runners spent outside their runs (their start and imports, their idle threads).
    cpu["runners"] = max(0.0, cpu["runners"] - sum(e.cpu_s or 0.0 for e in done))
    return {"executor": executor_name, "ready_s": ready_s, "sweep_wall_s": sweep_wall,
            "runs_wall_s": sum(walls), "run_median_s": statistics.median(walls),
            "run_cpu_median_s": statistics.median(e.cpu_s or 0.0 for e in done),
            "overhead_per_run_s": overhead, "ratio": overhead / statistics.mean(walls),
            "first_start_s": first, "steady_per_run_s": steady,
            "steady_ratio": steady / statistics.mean(walls),
            "gap_median_s": statistics.median(gaps) if gaps else 0.0,
            "cpu_per_run_s": {k: v / args.runs for k, v in cpu.items()},
            "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--log2", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--executors", nargs="+", default=["ray", "local"], choices=["ray", "local"])
    parser.add_argument("--address", help="a Ray cluster to join (default: a local one started here)")
    args = parser.parse_args()
    print(f"{args.runs} runs of {args.partitions} partitions of 2^{args.log2}, {args.backend} backend, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; target: overhead at "
          f"most {TARGET:.0%} of a run's wall")
    print(f"{'executor':>8} {'ready s':>8} {'sweep s':>8} {'runs s':>8} {'run s':>6} {'run CPU s':>9} "
          f"{'overhead/run s':>14} {'ratio':>7} {'first start s':>13} {'steady/run s':>12} {'ratio':>7} "
          f"{'gap s':>6} {'CPU/run s: driver':>17} {'Ray daemons':>11} {'runners':>7} {'load':>5}")
    for name in args.executors:
        with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as tmp:
            m = measure(name, args, Path(tmp))
        c = m["cpu_per_run_s"]
        print(f"{m['executor']:>8} {m['ready_s']:8.1f} {m['sweep_wall_s']:8.1f} {m['runs_wall_s']:8.1f} "
              f"{m['run_median_s']:6.2f} {m['run_cpu_median_s']:9.2f} {m['overhead_per_run_s']:14.3f} "
              f"{m['ratio']:7.2%} {m['first_start_s']:13.2f} {m['steady_per_run_s']:12.3f} "
              f"{m['steady_ratio']:7.2%} {m['gap_median_s']:6.3f} {c['driver']:17.3f} {c['daemons']:11.3f} "
              f"{c['runners']:7.3f} {m['load']:5.1f}")


if __name__ == "__main__":
    main()
