"""What-if replay against reality: record a CPU-backend run, predict a changed configuration
by replay, run the changed configuration for real, and compare throughputs.

    python benchmarks/whatif_validation.py [--log2 9] [--partitions 8] [--repeats 3]

For each case: the measured throughput of the recorded configuration, the replay's error on
it unchanged, the prediction for the changed configuration, the measured throughput of that
configuration (median of repeats, with its spread), and the prediction's error. On the CPU
backend most phases hold the interpreter lock, so the replay shares 1.5 cores among them
(see analysis/whatif.py); `--host-cores` overrides that to show what the assumption is worth.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from workbench.analysis.summary import summarize
from workbench.analysis.whatif import Change, WhatIf, WhatIfOptions
from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.trace.container import Trace

CASES: list[tuple[str, dict[str, Any], Change, dict[str, Any]]] = [
    ("1 -> 2 GPU workers", {"gpu_workers": 1}, Change(gpu_workers=2), {"gpu_workers": 2}),
    ("2 -> 1 GPU workers", {"gpu_workers": 2}, Change(gpu_workers=1), {"gpu_workers": 1}),
    ("2 -> 3 GPU workers", {"gpu_workers": 2}, Change(gpu_workers=3),
     {"gpu_workers": 3, "synth_lookahead": 3}),
    ("lock scope coarse -> compute", {}, Change(lock_scope="compute"), {"lock_scope": "compute"}),
    ("2 -> 1 synthesis threads", {}, Change(synth_threads=1), {"synth_threads": 1}),
    ("1 -> 2 synthesis threads", {"synth_threads": 1}, Change(synth_threads=2), {"synth_threads": 2}),
]


def run(base: RunConfig, **changes: Any) -> Trace:
    result = Pipeline(base.replace(**changes), CpuBackend()).run()
    if not result.ok:
        raise SystemExit(f"run failed: {result.error}")
    return result.trace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2", type=int, default=9)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--host-cores", type=float, default=None)
    args = parser.parse_args()
    base = RunConfig(backend="cpu", log2_constraints=args.log2, partitions=args.partitions)
    run(base)  # the proving key is generated once, outside the measurements
    print(f"CPU backend, {base.partitions} partitions of 2^{base.log2_constraints}; measured figures are "
          f"medians of {args.repeats} runs; replay host cores: {args.host_cores or 'from the backend'}")
    header = (f"{'case':30} {'recorded/min':>12} {'replay err':>10} {'predicted/min':>13} "
              f"{'measured/min':>12} {'spread':>7} {'error':>7}")
    print(header)
    print("-" * len(header))
    errors = []
    for label, recorded, change, real in CASES:
        predictions, recorded_rates, replay_errors = [], [], []
        for _ in range(args.repeats):
            trace = run(base, **recorded)
            whatif = WhatIf(trace, WhatIfOptions(host_cores=args.host_cores))
            p = whatif.predict(change)
            predictions.append(p.predicted_per_min)
            recorded_rates.append(p.measured_per_min)
            replay_errors.append(p.replay_error)
        measured = [summarize(run(base, **real)).throughput_per_min for _ in range(args.repeats)]
        predicted, actual = statistics.median(predictions), statistics.median(measured)
        error = predicted / actual - 1
        errors.append(abs(error))
        spread = (max(measured) - min(measured)) / actual
        recorded_rate, replay_error = statistics.median(recorded_rates), statistics.median(replay_errors)
        print(f"{label:30} {recorded_rate:12.1f} {replay_error:+10.1%} "
              f"{predicted:13.1f} {actual:12.1f} {spread:7.1%} {error:+7.1%}")
    print(f"mean absolute error {statistics.mean(errors):.1%}, worst {max(errors):.1%}")


if __name__ == "__main__":
    main()
