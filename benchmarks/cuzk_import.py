"""Time of the cuzk log importer on large daemon logs: it must grow linearly with the log.

    python benchmarks/cuzk_import.py [--mb 8 50] [--repeats 1] [--dense]

Logs are written by tests/cuzk_writer.py (every line kind the daemon prints, two GPU
workers, noise lines between) with as many partitions as it takes to reach each size;
--dense writes only the CUZK_TIMING and CUZK_NTT_H lines (no noise, no TIMELINE, so calls
are chained), the most calls a megabyte can hold.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# This checkout's workbench (not an installed one) and the log writer beside its tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cuzk_writer import CallSpec, production_log

from workbench.importers import parse_cuzk_log


def log_of(megabytes: float, dense: bool = False) -> str:
    def write(n: int) -> str:
        calls = [CallSpec(ntt_msm_h=2700 + (p * 977) % 6200, prep_msm=1500 + (p * 331) % 2700, synthesis=2500)
                 for p in range(n)]
        text = production_log(calls, noise=0 if dense else 1, timeline_lines=not dense).text
        if dense:
            text = "".join(line[line.index("CUZK_"):] + "\n" for line in text.splitlines() if "CUZK_" in line)
        return text

    per_call = len(write(200)) / 200
    return write(int(megabytes * 1e6 / per_call) + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, nargs="+", default=[8.0, 50.0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--dense", action="store_true")
    args = parser.parse_args()
    for mb in args.mb:
        text = log_of(mb, args.dense)
        best = wall = float("inf")
        for _ in range(args.repeats):
            start, cpu = time.perf_counter(), time.process_time()
            trace = parse_cuzk_log(text, f"{mb:g}MB.log")
            # CPU time is the figure to compare: on a shared machine wall time includes waiting.
            best = min(best, time.process_time() - cpu)
            wall = min(wall, time.perf_counter() - start)
        lines = text.count("\n")
        print(f"{len(text) / 1e6:6.1f} MB, {lines:9d} lines, {len(trace.spans):8d} spans: {best:6.2f} s CPU "
              f"({best / len(text) * 1e6:.3f} s/MB), {wall:6.2f} s wall, load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
