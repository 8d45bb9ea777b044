"""The H200 case study's grid, re-run with one command on a GPU machine.

    python benchmarks/case_study.py [--backend gpu] [--log2 22] [--partitions 12] [--cells all|NAME ...]
                                    [--data notebooks/data] [--out results.json]

Each cell is one `workbench run` on the GPU backend with device activity and counters on;
its trace is saved (compressed, loadable without a GPU) under --data for
notebooks/03_case_study.ipynb. The table printed last holds what the case study must show:
throughput, the spread of ntt_msm_h against batch_add and tail_msm, the effective copy rate,
kernel-busy time, the verdict's headline, and the what-if replay of the pageable run with
copies at link speed next to the zerocopy run it predicts.

Why these cells: the production symptom needs many synthesis threads on pageable memory
(14); the fix is zerocopy at the same settings; pinned and registered show the other ways
to a fast copy; 1 / 4 / 8 threads show the contention growing; lock scope compute and 1 or
3 workers answer what they buy at the fixed memory mode.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

CELLS: dict[str, dict[str, Any]] = {
    "zerocopy_t14_w2": {"memory_mode": "zerocopy", "synth_threads": 14},
    "pageable_t14_w2": {"memory_mode": "pageable", "synth_threads": 14},
    "pinned_t14_w2": {"memory_mode": "pinned", "synth_threads": 14},
    "registered_t14_w2": {"memory_mode": "registered", "synth_threads": 14},
    "pageable_t14_w2_compute": {"memory_mode": "pageable", "synth_threads": 14, "lock_scope": "compute"},
    "zerocopy_t14_w2_compute": {"memory_mode": "zerocopy", "synth_threads": 14, "lock_scope": "compute"},
    "zerocopy_t14_w1": {"memory_mode": "zerocopy", "synth_threads": 14, "gpu_workers": 1},
    "zerocopy_t14_w3": {"memory_mode": "zerocopy", "synth_threads": 14, "gpu_workers": 3},
    "pageable_t8_w2": {"memory_mode": "pageable", "synth_threads": 8},
    "pageable_t4_w2": {"memory_mode": "pageable", "synth_threads": 4},
    # One thread synthesises a partition in seconds: fewer partitions keep the cell short.
    "pageable_t1_w2": {"memory_mode": "pageable", "synth_threads": 1, "partitions": 8},
}


H200_LINK_GBPS = 55.2  # pinned host-to-device, measured on the lent H200 (DESIGN.md)


def spread(trace: Any, phase: str) -> float | None:
    durations = trace.durations_ns(trace.span_mask(name=phase, track_prefix="worker/"))
    return float(durations.max() / durations.min()) if len(durations) and durations.min() > 0 else None


PHASES = ("synthesis", "prep_msm", "upload", "ntt_msm_h", "barrier_wait", "batch_add", "tail_msm",
          "b_g2_msm", "finish")


def phase_medians(trace: Any) -> dict[str, float]:
    out = {}
    for phase in PHASES:
        durations = trace.durations_ns(trace.span_mask(name=phase))
        if len(durations):
            out[phase] = float(statistics.median(durations.tolist()) / 1e6)
    waits = trace.durations_ns(trace.span_mask(name="wait", track_prefix="mutex/"))
    if len(waits):
        out["mutex_wait"] = float(statistics.median(waits.tolist()) / 1e6)
    return out


def run_cell(name: str, changes: dict[str, Any], base: Any, data: Path) -> dict[str, Any]:
    from workbench.analysis import copy_rates, diagnose, summarize, utilisation
    from workbench.pipeline.run import Pipeline
    from workbench.prover.backend import select_backend
    from workbench.trace import save

    # Every synthesis thread may work at once (a permit each), as in the production daemon.
    changes = {"synth_lookahead": changes.get("synth_threads", base.synth_threads), **changes}
    config = base.replace(**changes)
    result = Pipeline(config, select_backend(config)).run()
    if not result.ok:
        raise SystemExit(f"cell {name} did not complete: {result.error}")
    trace = result.trace
    save(trace, data / f"{name}.wbtrace")
    rates = [r.gbps for r in copy_rates(trace) if r.gbps is not None]
    device = [r.bytes / (r.device_ms * 1e6) for r in copy_rates(trace) if r.device_ms]
    gpu = utilisation(trace)[0]
    return {
        "config": changes,
        "throughput_per_min": summarize(trace).throughput_per_min,
        "ntt_msm_h_spread": spread(trace, "ntt_msm_h"),
        "batch_add_spread": spread(trace, "batch_add"),
        "tail_msm_spread": spread(trace, "tail_msm"),
        "copy_gbps_median": statistics.median(rates) if rates else None,
        "device_copy_gbps_median": statistics.median(device) if device else None,
        "mutex_held": gpu.mutex_held,
        "kernel_busy": gpu.kernel_busy,
        "nvml_duty_cycle": gpu.nvml_duty_cycle,
        "verdict": diagnose(trace).headline,
        "phase_median_ms": phase_medians(trace),
        "setup_s": float(trace.durations_ns(trace.span_mask(name="setup")).sum() / 1e9),
        "wall_s": result.wall_s,
        "notices": trace.meta.get("notices", []),
    }


def main() -> None:
    from workbench.config import RunConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gpu", help="gpu (the case study) or cpu (a dry run)")
    parser.add_argument("--log2", type=int, default=22)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--bool-fraction", type=float, default=0.9)
    parser.add_argument("--synth-terms", type=int, default=4, help="synthesis cost knob (RunConfig.synth_terms)")
    parser.add_argument("--cells", nargs="+", default=["all"])
    parser.add_argument("--data", type=Path, default=Path("notebooks/data"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    names = list(CELLS) if args.cells == ["all"] else args.cells
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        raise SystemExit(f"unknown cells {unknown}; known: {', '.join(CELLS)}")
    args.data.mkdir(parents=True, exist_ok=True)
    base = RunConfig(backend=args.backend, log2_constraints=args.log2, partitions=args.partitions,
                     bool_fraction=args.bool_fraction, synth_terms=args.synth_terms, gpu_workers=2,
                     synthesis="processes",
                     gpu_trace=True)
    results: dict[str, Any] = {}
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results[name] = run_cell(name, CELLS[name], base, args.data)
        print(json.dumps({name: results[name]}, default=str), file=sys.stderr, flush=True)
        if args.out:  # written after every cell: a run cut short keeps what it measured
            args.out.write_text(json.dumps(results, indent=2, default=str))
    results["whatif"] = whatif_check(args.data, results)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str))
    print_table(results)


def whatif_check(data: Path, results: dict[str, Any]) -> dict[str, Any] | None:
    """The pageable run replayed with copies at link speed, against the measured zerocopy run."""
    from workbench.analysis import Change, WhatIfError, WhatIfOptions, predict
    from workbench.trace import load

    if "pageable_t14_w2" not in results or "zerocopy_t14_w2" not in results:
        return None
    trace = load(data / "pageable_t14_w2.wbtrace")
    # The GPU backend measures its link at setup; a CPU dry run borrows the H200's figure.
    link = trace.meta.get("link_gbps") or H200_LINK_GBPS
    try:
        prediction = predict(trace, Change(copies_at_link=True), WhatIfOptions(link_gbps=link))
    except WhatIfError as err:
        return {"failed": str(err)}
    measured = results["zerocopy_t14_w2"]["throughput_per_min"]
    return {"predicted_per_min": prediction.replayed_per_min, "measured_per_min": measured,
            "error": prediction.replayed_per_min / measured - 1, "replay_error": prediction.replay_error}


def print_table(results: dict[str, Any]) -> None:
    def fmt(value: Any, pattern: str) -> str:
        return "-" if value is None else pattern.format(value)

    print(f"{'cell':<26} {'part/min':>8} {'ntt_h x':>7} {'b_add x':>7} {'tail x':>7} "
          f"{'copy GB/s':>9} {'dev GB/s':>8} {'held':>5} {'kernels':>7}  verdict")
    for name, r in results.items():
        if name == "whatif":
            continue
        print(f"{name:<26} {r['throughput_per_min']:8.1f} {fmt(r['ntt_msm_h_spread'], '{:.2f}'):>7} "
              f"{fmt(r['batch_add_spread'], '{:.2f}'):>7} {fmt(r['tail_msm_spread'], '{:.2f}'):>7} "
              f"{fmt(r['copy_gbps_median'], '{:.1f}'):>9} {fmt(r['device_copy_gbps_median'], '{:.1f}'):>8} "
              f"{fmt(r['mutex_held'], '{:.0%}'):>5} {fmt(r['kernel_busy'], '{:.0%}'):>7}  {r['verdict']}")
    w = results.get("whatif")
    if w and "failed" in w:
        print(f"what-if: {w['failed']}")
    elif w:
        print(f"what-if, pageable with copies at link speed: predicted {w['predicted_per_min']:.1f}/min, "
              f"zerocopy measured {w['measured_per_min']:.1f}/min, error {w['error']:+.1%}")


if __name__ == "__main__":
    main()
