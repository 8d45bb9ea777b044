"""CPU-backend pipeline throughput for 1 / 2 / 4 GPU workers at the default size.

    python benchmarks/pipeline_cpu.py [--workers 1 2 4] [--repeats 3] [--partitions 8]

Prints partitions per minute (median of repeats) and the ratio against the 1-worker run,
plus the mutex-held fraction, so the effect of workers taking turns on the mutex shows.
"""

from __future__ import annotations

import argparse
import statistics

from workbench.analysis.summary import summarize
from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=RunConfig().partitions)
    parser.add_argument("--memory-mode", default="pageable")
    args = parser.parse_args()
    base = RunConfig(backend="cpu", partitions=args.partitions, memory_mode=args.memory_mode)
    print(f"CPU backend, {base.partitions} partitions of 2^{base.log2_constraints}, "
          f"{base.synth_threads} synthesis threads, memory {base.memory_mode}, "
          f"median of {args.repeats}")
    print(f"{'workers':>7} {'partitions/min':>15} {'min':>7} {'max':>7} {'vs 1 worker':>12} "
          f"{'mutex held':>11}")
    reference = None
    for workers in args.workers:
        config = base.replace(gpu_workers=workers, synth_lookahead=max(2, workers))
        rates, held = [], []
        for _ in range(args.repeats):
            result = Pipeline(config, CpuBackend()).run()
            if not result.ok:
                raise SystemExit(f"run failed: {result.error}")
            summary = summarize(result.trace)
            rates.append(summary.throughput_per_min)
            held.append(summary.mutex_held_fraction)
        median = statistics.median(rates)
        reference = reference or median
        print(f"{workers:7d} {median:15.1f} {min(rates):7.1f} {max(rates):7.1f} "
              f"{median / reference:12.2f} {statistics.median(held):11.0%}")


if __name__ == "__main__":
    main()
