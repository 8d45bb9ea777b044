"""The H200 case study's grid (benchmarks/case_study.toml), run with one command on a GPU machine.

    python benchmarks/case_study.py [--log2 22] [--partitions 40] [--synth-terms 4] [--cells all|NAME ...]
                                    [--data notebooks/data/h200_2e22] [--out summary.json] [--report FILE]
                                    [--verify]
    python benchmarks/case_study.py --summarize [--data DIR] [--report FILE]   # no GPU needed

The same as `workbench sweep benchmarks/case_study.toml --out DIR` (with Ray, spread over a
cluster's GPUs; here one cell after another in this process), with the grid's sizes changed
from the command line. Each cell is one run on the GPU backend (`--backend cpu` makes a dry
run) with device activity and counters on; its trace is saved (compressed, loadable without
a GPU) under --data with the sweep's index.json, where notebooks/03_case_study.ipynb reads
it. The table printed last has, per cell, throughput, the mutex ceiling, the spread of
ntt_msm_h against the variation of batch_add and tail_msm, the copy rates, kernel-busy time
over the run and while the GPU had work, and the verdict's headline; then the what-if
replays next to the cells that made the change. `--summarize` prints the same from traces
already saved (a folder from before sweeps, without an index, too); `--report` writes the
case study's self-contained HTML report. Why these cells: see case_study.toml.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

GRID = Path(__file__).with_name("case_study.toml")


def grid_data(args: argparse.Namespace) -> dict[str, Any]:
    """The case study's grid with the command line's sizes and cells."""
    data = tomllib.loads(GRID.read_text())
    data["base"].update(backend=args.backend, log2_constraints=args.log2, partitions=args.partitions,
                        bool_fraction=args.bool_fraction, synth_terms=args.synth_terms, verify=args.verify)
    if args.cells != ["all"]:
        unknown = [n for n in args.cells if n not in data["cells"]]
        if unknown:
            raise SystemExit(f"unknown cells {unknown}; known: {', '.join(data['cells'])}")
        data["cells"] = {n: data["cells"][n] for n in args.cells}
        data["checks"] = [c for c in data["checks"] if {c["base"], c["cell"]} <= set(args.cells)]
        data["report"]["pairs"] = [p for p in data["report"]["pairs"] if set(p) <= set(args.cells)]
    return data


def main() -> None:
    from workbench.sweep import Driver, Listener, parse_grid, read_study, summary_of
    from workbench.sweep.local import LocalExecutor
    from workbench.sweep.text import table_lines

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
    data = grid_data(args)
    grid = parse_grid(data, str(GRID))
    if not args.summarize:
        args.data.mkdir(parents=True, exist_ok=True)

        class Say(Listener):
            def started(self, entry: Any) -> None:
                print(f"running {entry.label} ...", file=sys.stderr, flush=True)

            def finished(self, entry: Any) -> None:
                if entry.status != "completed":
                    raise SystemExit(f"cell {entry.label} did not complete: {entry.error}")
                if args.verify and entry.trace:
                    from workbench.analysis.summary import summarize
                    from workbench.trace import load

                    trace = load(args.data / entry.trace)
                    verify_s = sum(s.duration_ns for s in trace.select(name="verify")) / 1e9
                    summary = summarize(trace)
                    print(f"{entry.label}: {summary.proofs_verified} of {summary.partitions_done} proofs "
                          f"verified ({verify_s:.2f} s of verify spans)", file=sys.stderr, flush=True)

        Driver(grid, args.data, "local", Say()).run(LocalExecutor())
    study = read_study(args.data, grid.checks, grid.link_gbps, grid.report)
    summary = summary_of(study)
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2, default=str))
    print("\n".join(table_lines(summary)))
    if args.report:
        from workbench.viz.sweep_report import render_sweep

        if not study.report.get("pairs"):
            raise SystemExit("the report needs at least one pair of cells of the grid's [report] pairs")
        args.report.write_text(render_sweep(study), encoding="utf-8")
        print(f"report: {args.report} ({args.report.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
