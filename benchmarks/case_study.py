"""The H200 case study's grid, re-run with one command on a GPU machine.

    python benchmarks/case_study.py [--log2 22] [--partitions 40] [--synth-terms 4] [--cells all|NAME ...]
                                    [--data notebooks/data/h200_2e22] [--out summary.json] [--report FILE]
                                    [--verify]
    python benchmarks/case_study.py --summarize [--data DIR] [--report FILE]   # no GPU needed

Each cell is one run on the GPU backend (`--backend cpu` makes a dry run) with device
activity and counters on; its trace is saved (compressed, loadable without a GPU) under
--data, where notebooks/03_case_study.ipynb reads it. The table printed last has, per cell,
throughput, the mutex ceiling, the spread of ntt_msm_h against the variation of batch_add
and tail_msm, the copy rates, kernel-busy time over the run and while the GPU had work, and
the verdict's headline; then the what-if replays next to the cells that made the change.
`--summarize` prints the same from traces already saved; `--report` writes the case study's
self-contained HTML report.

Why these cells: the production setting is many synthesis threads on pageable memory (14);
the fix is zerocopy at the same settings; pinned and registered show the other ways to a
fast copy; 1 / 4 / 8 threads show what synthesis does to the copies; lock scope compute and
1 or 3 workers answer what they buy at the fixed memory mode. The `_load8` / `_load14` cells
run 8 or 14 threads streaming through host memory beside the pipeline (RunConfig.
host_load_threads): our compiled synthesis barely loads the memory system, and the
production host's other work did.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
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
    # The host's other memory-bound work beside the run (pipeline/host_load.py).
    "pageable_t14_w2_load8": {"memory_mode": "pageable", "synth_threads": 14, "host_load_threads": 8},
    "zerocopy_t14_w2_load8": {"memory_mode": "zerocopy", "synth_threads": 14, "host_load_threads": 8},
    "pinned_t14_w2_load8": {"memory_mode": "pinned", "synth_threads": 14, "host_load_threads": 8},
    "pageable_t14_w2_load14": {"memory_mode": "pageable", "synth_threads": 14, "host_load_threads": 14},
    "zerocopy_t14_w2_load14": {"memory_mode": "zerocopy", "synth_threads": 14, "host_load_threads": 14},
}


H200_LINK_GBPS = 55.2  # pinned host-to-device, measured on the lent H200 (DESIGN.md)


def spread(trace: Any, phase: str) -> float | None:
    from workbench.analysis.tracks import PHASE_THREADS, kind_mask

    durations = trace.durations_ns(kind_mask(trace, *PHASE_THREADS, name=phase))
    return float(durations.max() / durations.min()) if len(durations) and durations.min() > 0 else None


def run_cell(name: str, changes: dict[str, Any], base: Any, data: Path) -> None:
    from workbench.pipeline.backends import select_backend
    from workbench.pipeline.run import Pipeline
    from workbench.trace import save

    # Every synthesis thread may work at once (a permit each), as in the production daemon.
    changes = {"synth_lookahead": changes.get("synth_threads", base.synth_threads), **changes}
    config = base.replace(**changes)
    result = Pipeline(config, select_backend(config)).run()
    if not result.ok:
        raise SystemExit(f"cell {name} did not complete: {result.error}")
    save(result.trace, data / f"{name}.wbtrace")
    if config.verify:
        from workbench.analysis.summary import summarize

        summary = summarize(result.trace)
        verify_s = sum(s.duration_ns for s in result.trace.select(name="verify")) / 1e9
        print(f"{name}: {summary.proofs_verified} of {summary.partitions_done} proofs verified "
              f"({verify_s:.2f} s of verify spans)", file=sys.stderr, flush=True)


def main() -> None:
    from workbench.config import RunConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gpu", help="gpu (the case study) or cpu (a dry run)")
    parser.add_argument("--log2", type=int, default=22)
    parser.add_argument("--partitions", type=int, default=40)
    parser.add_argument("--bool-fraction", type=float, default=0.9)
    parser.add_argument("--synth-terms", type=int, default=4,
                        help="synthesis cost knob (RunConfig.synth_terms)")
    parser.add_argument("--cells", nargs="+", default=["all"])
    parser.add_argument("--verify", action="store_true",
                        help="verify every proof (a verify span after finish); each cell says how many")
    parser.add_argument("--data", type=Path, default=Path("notebooks/data/h200_2e22"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--summarize", action="store_true",
                        help="run nothing: print the table of the traces already under --data")
    parser.add_argument("--report", type=Path,
                        help="also write the case study's self-contained HTML report here")
    args = parser.parse_args()
    names = list(CELLS) if args.cells == ["all"] else args.cells
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        raise SystemExit(f"unknown cells {unknown}; known: {', '.join(CELLS)}")
    if not args.summarize:
        args.data.mkdir(parents=True, exist_ok=True)
        base = RunConfig(backend=args.backend, log2_constraints=args.log2, partitions=args.partitions,
                         bool_fraction=args.bool_fraction, synth_terms=args.synth_terms, gpu_workers=2,
                         synthesis="processes", gpu_trace=True, verify=args.verify)
        for name in names:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            run_cell(name, CELLS[name], base, args.data)
    study = read_study(args.data)
    summary = summary_of(study)
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2, default=str))
    print_table(summary)
    if args.report:
        write_report(study, args.report)


INTRO = """<p>Each run proves 40 partitions of 2^22 constraints (bool_fraction 0.9, synth_terms 4) with
2 GPU workers sharing the GPU mutex unless its name says otherwise, 14 synthesis threads each driving
a synthesis process (compiled synthesis code), all allowed to run ahead, device activity and counters
recorded. <b>pageable_t14_w2</b> is the production setting and <b>zerocopy_t14_w2</b> the fix; the
<b>_load8</b> and <b>_load14</b> runs add 8 or 14 threads streaming through host memory beside the
pipeline, as the production host's other work did. notebooks/03_case_study.ipynb reads the same traces
and says what they show and what they do not.</p>"""

# The pairs the report puts side by side: the production symptom (a loaded host) and the quiet host.
PAIRS = (("pageable_t14_w2_load14", "zerocopy_t14_w2_load14"), ("pageable_t14_w2", "zerocopy_t14_w2"))


# What-if replays checked against the cell that really made the change: (base, change, cell).
CHECKS = (
    ("pageable_t14_w2", {"copies_at_link": True}, "zerocopy_t14_w2"),
    ("pageable_t14_w2", {"lock_scope": "compute"}, "pageable_t14_w2_compute"),
    ("zerocopy_t14_w2", {"lock_scope": "compute"}, "zerocopy_t14_w2_compute"),
    ("zerocopy_t14_w2", {"gpu_workers": 1}, "zerocopy_t14_w1"),
    ("zerocopy_t14_w2", {"gpu_workers": 3}, "zerocopy_t14_w3"),
    ("pageable_t14_w2_load8", {"copies_at_link": True}, "zerocopy_t14_w2_load8"),
    ("pageable_t14_w2_load14", {"copies_at_link": True}, "zerocopy_t14_w2_load14"),
)


@dataclass
class Study:
    """The saved cells read once: traces, verdicts, figures and what-if checks."""

    traces: dict[str, Any]
    verdicts: dict[str, Any]
    cells: dict[str, Any]
    checks: list[tuple[str, str, Any]]


def read_study(data: Path) -> Study:
    from workbench.analysis import Change, WhatIfOptions, diagnose
    from workbench.analysis.grid import cell_metrics, check_prediction
    from workbench.trace import load

    traces = {p.stem: load(p) for p in sorted(data.glob("*.wbtrace"))}
    verdicts = {name: diagnose(trace) for name, trace in traces.items()}
    cells = {name: cell_metrics(trace, verdicts[name]) for name, trace in traces.items()}
    checks = []
    for base, change, cell in CHECKS:
        if base in traces and cell in traces:
            # The GPU backend measures its link at setup; a CPU dry run borrows the H200's figure.
            options = WhatIfOptions(link_gbps=traces[base].meta.get("link_gbps") or H200_LINK_GBPS)
            check = check_prediction(traces[base], Change(**change), traces[cell], options)
            checks.append((base, cell, check))
    return Study(traces, verdicts, cells, checks)


def summary_of(study: Study) -> dict[str, Any]:
    """Every saved cell's figures and the what-if checks, as plain data (for JSON)."""
    checks = [{"base": base, "cell": cell, **asdict(check), "error": check.error,
               "error_same_synthesis": check.error_same_synthesis} for base, cell, check in study.checks]
    return {"cells": {name: asdict(m) for name, m in study.cells.items()}, "checks": checks}


def write_report(study: Study, target: Path) -> None:
    from workbench.viz.study_report import render_study

    pairs = [pair for pair in PAIRS if all(name in study.traces for name in pair)]
    if not pairs:
        raise SystemExit(f"the report needs at least one pair of cells of {PAIRS}")
    device = study.traces[pairs[0][0]].meta.get("device") or "the CPU backend"
    html = render_study(f"Case study on {device}: pageable against zerocopy", INTRO, study.traces, pairs,
                        study.checks, study.verdicts)
    target.write_text(html, encoding="utf-8")
    print(f"report: {target} ({target.stat().st_size // 1024} KiB)")


def print_table(summary: dict[str, Any]) -> None:
    def fmt(value: Any, pattern: str) -> str:
        return "-" if value is None else pattern.format(value)

    print(f"{'cell':<26} {'part/min':>8} {'ceiling':>7} {'synth ms':>8} {'ntt_h ms':>8} {'ntt_h x':>7} "
          f"{'steady':>6} "
          f"{'b_add cv':>8} {'tail cv':>7} {'copy GB/s':>9} {'held':>5} {'kernels':>7} {'active':>6} "
          f"{'steady':>6}"
          "  verdict")
    for name, c in summary["cells"].items():
        ph = c["phases"]
        print(f"{name:<26} {c['throughput_per_min']:8.1f} {fmt(c['mutex_ceiling_per_min'], '{:.1f}'):>7} "
              f"{fmt(c['synthesis_median_ms'], '{:.0f}'):>8} "
              f"{fmt(ph.get('ntt_msm_h', {}).get('median_ms'), '{:.1f}'):>8} "
              f"{fmt(ph.get('ntt_msm_h', {}).get('spread'), '{:.2f}'):>7} "
              f"{fmt(ph.get('ntt_msm_h', {}).get('steady_spread'), '{:.2f}'):>6} "
              f"{fmt(ph.get('batch_add', {}).get('cv'), '{:.0%}'):>8} "
              f"{fmt(ph.get('tail_msm', {}).get('cv'), '{:.0%}'):>7} "
              f"{fmt(c['copy_gbps_median'], '{:.1f}'):>9} {fmt(c['mutex_held'], '{:.0%}'):>5} "
              f"{fmt(c['kernel_busy'], '{:.0%}'):>7} {fmt(c['kernel_busy_active'], '{:.0%}'):>6} "
              f"{fmt(c.get('kernel_busy_steady'), '{:.0%}'):>6}"
              f"  {c['headline']}")
    for check in summary["checks"]:
        if check["failed"]:
            print(f"what-if {check['base']} + {check['change']}: {check['failed']}")
            continue
        print(f"what-if {check['base']} + {check['change']}: predicted {check['predicted_per_min']:.1f}/min, "
              f"{check['cell']} measured {check['measured_per_min']:.1f}/min, error {check['error']:+.1%} "
              f"(replay error {check['replay_error']:+.1%}); at the measured run's synthesis speed "
              f"({fmt(check['synthesis_ratio'], '{:.2f}x')}) "
              f"{fmt(check['predicted_same_synthesis_per_min'], '{:.1f}/min')}, "
              f"error {fmt(check['error_same_synthesis'], '{:+.1%}')}")


if __name__ == "__main__":
    main()
