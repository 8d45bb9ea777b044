"""Recorder cost per span, in ns: plain, with NVTX ranges (when nvtx is installed), while a
run's journal streams the spans to disk, and off.

    python benchmarks/recorder_cost.py [--spans 200000] [--repeats 7]

Target: well under 2 µs (2000 ns) a span. Prints the median over repeats and the ratio
against that target. The journal variant times the recording with the flusher running beside
it and its final flush at the end (`Journal.close`), so every span's share of the streaming
is counted, the time its flushes take the interpreter lock from the recording thread included.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from workbench.model.tracks import worker_track
from workbench.trace.journal import Journal
from workbench.trace.recorder import Recorder

TARGET_NS = 2000


def cost_per_span(recorder: Recorder, spans: int, finish: Callable[[], None] | None = None) -> float:
    span, track = recorder.span, worker_track(0)
    start = time.perf_counter_ns()
    for i in range(spans):
        with span(track, "batch_add", i, 0):
            pass
    if finish is not None:
        finish()
    elapsed = time.perf_counter_ns() - start
    start = time.perf_counter_ns()
    for _ in range(spans):  # the empty loop, to subtract
        pass
    empty = time.perf_counter_ns() - start
    return (elapsed - empty) / spans


def journaled_cost(spans: int, folder: Path, repeat: int) -> float:
    recorder = Recorder(enabled=True, nvtx=False)
    journal = Journal.create(folder / f"bench-{repeat}.wbtrace", recorder).start()
    try:
        return cost_per_span(recorder, spans, journal.close)
    finally:
        journal.remove()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    variants = {
        "recording, no NVTX": dict(enabled=True, nvtx=False),
        "recording + NVTX": dict(enabled=True, nvtx=True),
        "tracing off": dict(enabled=False, nvtx=False),
    }
    print(f"{'variant':<22} {'ns/span (median)':>17} {'min':>8} {'max':>8} {'vs 2 µs':>8}")
    for label, kwargs in variants.items():
        if label == "recording + NVTX" and not Recorder(**kwargs).nvtx.available:
            print(f"{label:<22} {'(nvtx not installed)':>17}")
            continue
        costs = [cost_per_span(Recorder(**kwargs), args.spans) for _ in range(args.repeats)]
        report(label, costs)
        if label == "recording, no NVTX":
            with tempfile.TemporaryDirectory(prefix="workbench-bench-") as folder:
                report("recording + journal",
                       [journaled_cost(args.spans, Path(folder), r) for r in range(args.repeats)])


def report(label: str, costs: list[float]) -> None:
    median = statistics.median(costs)
    print(f"{label:<22} {median:17.0f} {min(costs):8.0f} {max(costs):8.0f} {median / TARGET_NS:8.2f}")


if __name__ == "__main__":
    main()
