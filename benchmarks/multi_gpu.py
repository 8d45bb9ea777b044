"""One GPU against two: the same settings, zerocopy and pageable (needs a machine with two).

    python benchmarks/multi_gpu.py [--log2 22] [--partitions 48] [--synth-threads 28] [--data DIR]

Each run is saved under --data (`--summarize` reads them back). Printed per run: throughput
over the run and in the steady state every GPU shares, and per GPU its share of the
partitions, its kernel busy over the run and in steady state, and the median host-timed copy
rate of its workers; then the scaling of two GPUs over one for each memory mode. The same
synthesis threads serve every run, so two GPUs ask twice as much of them: the default of 28
leaves the host (32 cores on the two-GPU machine) room to keep up.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RUNS = {
    "zerocopy_1gpu": {"memory_mode": "zerocopy", "gpus": 1},
    "zerocopy_2gpu": {"memory_mode": "zerocopy", "gpus": 2},
    "pageable_1gpu": {"memory_mode": "pageable", "gpus": 1},
    "pageable_2gpu": {"memory_mode": "pageable", "gpus": 2},
}


def per_gpu(trace: Any) -> list[dict[str, Any]]:
    from workbench.analysis.transfers import copy_rates
    from workbench.analysis.utilisation import (
        gpu_shares,
        gpu_utilisation,
        steady_window_ns,
        utilisation,
        worker_gpus,
    )

    found = utilisation(trace)
    shares = {s.gpu: s for s in gpu_shares(trace, found)}
    owner = worker_gpus(trace)
    rates = copy_rates(trace)
    out = []
    for u in found:
        window = steady_window_ns(trace, u.gpu)
        steady = gpu_utilisation(trace, u.gpu, *window) if window else None
        mine = [r.gbps for r in rates
                if r.gbps is not None and owner.get(int(trace.spans.worker[r.span])) == u.gpu]
        out.append({"gpu": u.gpu, "partitions": shares[u.gpu].partitions, "kernel_busy": u.kernel_busy,
                    "kernel_busy_steady": steady.kernel_busy if steady else None,
                    "copy_gbps": float(np.median(mine)) if mine else None})
    return out


def steady_per_min(trace: Any) -> float | None:
    """Partitions finished a minute inside the window where every GPU is in steady state
    (analysis.utilisation.steady_window_ns, the latest start and earliest end over GPUs): the
    run's fill and drain weigh more in a shorter two-GPU run than in a one-GPU run."""
    from workbench.analysis.tracks import kind_mask
    from workbench.analysis.utilisation import steady_window_ns
    from workbench.model.tracks import WORKER

    windows = [steady_window_ns(trace, g) for g in range(int(trace.meta.get("gpus", 1)))]
    if not windows or any(w is None for w in windows):
        return None
    start, end = max(w[0] for w in windows if w), min(w[1] for w in windows if w)
    if end <= start:
        return None
    done = trace.spans.end_ns[kind_mask(trace, WORKER, name="finish")].tolist()
    return sum(start <= t <= end for t in done) / ((end - start) / 60e9)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    from workbench.analysis.summary import summarize
    from workbench.config import RunConfig
    from workbench.pipeline.backends import select_backend
    from workbench.pipeline.run import Pipeline
    from workbench.trace import load, save

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gpu")
    parser.add_argument("--log2", type=int, default=22)
    parser.add_argument("--partitions", type=int, default=48)
    parser.add_argument("--synth-threads", type=int, default=28)
    parser.add_argument("--runs", nargs="+", default=list(RUNS))
    parser.add_argument("--data", type=Path, default=Path("runs/multi_gpu"))
    parser.add_argument("--summarize", action="store_true", help="run nothing: read the saved runs")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    base = RunConfig(backend=args.backend, log2_constraints=args.log2, partitions=args.partitions,
                     synth_threads=args.synth_threads, synth_lookahead=args.synth_threads,
                     synthesis="processes", gpu_workers=2, gpu_trace=args.backend != "cpu")
    throughput: dict[str, float] = {}
    steady: dict[str, float | None] = {}
    for name in args.runs:
        path = args.data / f"{name}.wbtrace"
        if not args.summarize:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            config = base.replace(**RUNS[name])
            result = Pipeline(config, select_backend(config)).run()
            if not result.ok:
                raise SystemExit(f"{name} did not complete: {result.error}")
            save(result.trace, path)
        trace = load(path)
        throughput[name] = summarize(trace).throughput_per_min
        steady[name] = steady_per_min(trace)
        gpus = "; ".join(
            f"gpu{g['gpu']}: {g['partitions']} partitions, kernel busy {_pct(g['kernel_busy'])} "
            f"(steady {_pct(g['kernel_busy_steady'])})"
            + (f", copies {g['copy_gbps']:.1f} GB/s" if g["copy_gbps"] else "")
            for g in per_gpu(trace))
        print(f"{name:<15} {throughput[name]:7.1f} partitions/min (steady {_num(steady[name])})  {gpus}")
    for mode in ("zerocopy", "pageable"):
        one, two = throughput.get(f"{mode}_1gpu"), throughput.get(f"{mode}_2gpu")
        if one and two:
            s1, s2 = steady.get(f"{mode}_1gpu"), steady.get(f"{mode}_2gpu")
            in_steady = f", steady state {s2 / s1:.2f}x" if s1 and s2 else ""
            print(f"{mode}: two GPUs {two / one:.2f}x one over the whole run{in_steady}")


if __name__ == "__main__":
    main()
