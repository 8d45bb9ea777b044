"""Recorder cost per span, in ns: plain, with NVTX ranges (when nvtx is installed), while a
run's journal streams the spans to disk, and off.

    python benchmarks/recorder_cost.py [--spans 1000000] [--repeats 7]

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
from workbench.trace.journal import INTERVAL_S, Journal
from workbench.trace.recorder import Recorder

TARGET_NS = 2000


def cost_per_span(recorder: Recorder, spans: int, finish: Callable[[], None] | None = None,
                  ) -> tuple[float, float]:
    """(wall, CPU) ns a span. CPU time is the process's, all threads (the flusher's too): on a
    shared machine it is what the work costs, where wall time also counts other jobs' turns."""
    span, track = recorder.span, worker_track(0)
    wall, cpu = time.perf_counter_ns(), time.process_time_ns()
    for i in range(spans):
        with span(track, "batch_add", i, 0):
            pass
    if finish is not None:
        finish()
    wall, cpu = time.perf_counter_ns() - wall, time.process_time_ns() - cpu
    empty_wall, empty_cpu = time.perf_counter_ns(), time.process_time_ns()
    for _ in range(spans):  # the empty loop, to subtract
        pass
    empty_wall, empty_cpu = time.perf_counter_ns() - empty_wall, time.process_time_ns() - empty_cpu
    return (wall - empty_wall) / spans, (cpu - empty_cpu) / spans


FLUSHES: list[int] = []  # records each journaled repeat wrote (the final flush included)


def journaled_cost(spans: int, folder: Path, repeat: int) -> tuple[float, float]:
    recorder = Recorder(enabled=True, nvtx=False)
    journal = Journal.create(folder / f"bench-{repeat}.wbtrace", recorder).start()
    try:
        return cost_per_span(recorder, spans, journal.close)
    finally:
        FLUSHES.append(journal.records)
        journal.remove()


def main() -> None:
    parser = argparse.ArgumentParser()
    # Enough spans that the flusher runs a few times while they are recorded.
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    variants: dict[str, Callable[[int, Path, int], tuple[float, float]]] = {
        "recording, no NVTX": lambda n, _, __: cost_per_span(Recorder(nvtx=False), n),
        "recording + journal": journaled_cost,
        "recording + NVTX": lambda n, _, __: cost_per_span(Recorder(nvtx=True), n),
        "tracing off": lambda n, _, __: cost_per_span(Recorder(enabled=False, nvtx=False), n),
    }
    if not Recorder(nvtx=True).nvtx.available:
        del variants["recording + NVTX"]
    costs: dict[str, list[tuple[float, float]]] = {label: [] for label in variants}
    with tempfile.TemporaryDirectory(prefix="workbench-bench-") as folder:
        for repeat in range(args.repeats):  # interleaved, so a burst of load hits every variant alike
            for label, measure in variants.items():
                costs[label].append(measure(args.spans, Path(folder), repeat))
    print(f"{'variant':<22} {'wall ns/span':>13} {'CPU ns/span':>12} {'CPU min':>8} {'CPU max':>8} "
          f"{'vs 2 µs (CPU)':>14}")
    for label, pairs in costs.items():
        wall = statistics.median(w for w, _ in pairs)
        cpu = [c for _, c in pairs]
        median = statistics.median(cpu)
        print(f"{label:<22} {wall:13.0f} {median:12.0f} {min(cpu):8.0f} {max(cpu):8.0f} "
              f"{median / TARGET_NS:14.2f}")
    if "recording + NVTX" not in variants:
        print("(recording + NVTX: nvtx not installed)")
    print(f"journal: {statistics.median(FLUSHES):.0f} records a repeat (median; the flusher runs every "
          f"{INTERVAL_S} s, and once more at the end)")


if __name__ == "__main__":
    main()
