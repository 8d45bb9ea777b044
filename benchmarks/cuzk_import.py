"""Time of the cuzk log importer on large daemon logs: it must grow linearly with the log.

    python benchmarks/cuzk_import.py [--mb 8 50] [--repeats 1]

Logs are written by tests/cuzk_writer.py (every line kind the daemon prints, two GPU
workers, noise lines between) with as many partitions as it takes to reach each size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cuzk_writer import CallSpec, production_log  # noqa: E402

from workbench.importers import parse_cuzk_log  # noqa: E402


def log_of(megabytes: float) -> str:
    calls = [CallSpec(ntt_msm_h=2700 + (p * 977) % 6200, prep_msm=1500 + (p * 331) % 2700, synthesis=2500)
             for p in range(200)]
    per_call = len(production_log(calls, noise=1).text) / len(calls)
    n = int(megabytes * 1e6 / per_call) + 1
    calls = [CallSpec(ntt_msm_h=2700 + (p * 977) % 6200, prep_msm=1500 + (p * 331) % 2700, synthesis=2500)
             for p in range(n)]
    return production_log(calls, noise=1).text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, nargs="+", default=[8.0, 50.0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    for mb in args.mb:
        text = log_of(mb)
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            trace = parse_cuzk_log(text, f"{mb:g}MB.log")
            best = min(best, time.perf_counter() - start)
        lines = text.count("\n")
        print(f"{len(text) / 1e6:6.1f} MB, {lines:9d} lines, {len(trace.spans):8d} spans: {best:6.2f} s "
              f"({best / len(text) * 1e6:.3f} s/MB)")


if __name__ == "__main__":
    main()
