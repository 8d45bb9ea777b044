"""Case-study cells through `workbench sweep` against the same cells run directly, in one sitting.

    python benchmarks/sweep_gpu.py [--cells NAME ...] [--repeats 2] [--partitions 12] [--log2 22]
                                   [--backend gpu] [--executor auto|ray|local] [--set KNOB=VALUE ...]
                                   [--budget-s 150] [--work DIR] [--json FILE]

Each cell of benchmarks/case_study.toml named (the four main ones by default), with the
command line's sizes, is run `--repeats` times each way, the two ways interleaved: a pair per
cell and repeat, and within a pair the way that goes first alternates (sweep first in one pair,
direct first in the next), so drift across the sitting falls on both columns alike.

- Through the sweep: a one-run grid of the cell handed to the sweep machinery (`Driver` and
  the executor `workbench sweep` picks: Ray's when Ray is installed, else the local one, which
  is said). The executor is opened once for the sitting (a Ray cluster's start, timed apart,
  is once a sweep); each cell then pays what a sweep pays per run (index written when the run
  starts and ends, the trace and proofs written into the folder, and on Ray a runner's start).
  The cell's wall is the driver's, from handing the grid over to getting the index back.
- Directly: the same RunConfig (same seed) as `workbench run` runs it, a pipeline in this
  process, its trace and proofs then written (`save s`, what `workbench run` also pays),
  then the pipeline let go (`free s`: its buffers freed, which the sweep's overhead holds).

Per pair: the partitions/min of each run's trace (the run window, setup out), their ratio
(sweep / direct), the run's own wall inside the sweep (its setup in), the scheduling overhead
(the cell's wall as the sweep saw it minus the run's own wall) and its share of the cell's
wall (issue 19's target: at most 2%), and whether the two runs' proofs are equal byte for
byte. A first direct run (`--warmup-partitions`, not counted) pays what a process pays once:
the key setup, kernel builds, the compiled synthesis code. `--budget-s` bounds the sitting:
a pair whose estimated time would pass it is not started, and is listed as skipped.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from case_study import GRID, grid_data  # benchmarks/ is no package

MAIN_CELLS = ["pageable_t14_w2", "zerocopy_t14_w2", "pageable_t14_w2_load14", "zerocopy_t14_w2_load14"]
TARGET = 0.02


class Held:
    """The sitting's executor, opened once and closed at the end rather than after each cell."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, inner.name

    def open(self) -> list[str]:
        return list(self.inner.open())

    def execute(self, runs: Any, keep_proofs: bool, driver: Any) -> None:
        self.inner.execute(runs, keep_proofs, driver)

    def close(self) -> None:
        pass


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def cell_grid(args: argparse.Namespace, name: str) -> Any:
    from workbench.sweep import parse_grid

    ns = argparse.Namespace(backend=args.backend, log2=args.log2, partitions=args.partitions,
                            bool_fraction=0.9, synth_terms=4, verify=False, cells=[name])
    data = grid_data(ns)
    data["base"].update(dict(args.set))
    data.update(repeats=1, proofs=True, checks=[])
    data.pop("report", None)
    return parse_grid(data, str(GRID))


def through_sweep(grid: Any, executor: Held, folder: Path) -> dict[str, Any]:
    from workbench.sweep import Driver
    from workbench.trace import load

    folder.mkdir(parents=True)
    began = time.perf_counter()
    index = Driver(grid, folder, executor.name).run(executor)
    cell_wall = time.perf_counter() - began
    entry = index.entries[0]
    if entry.status != "completed" or entry.trace is None:
        raise SystemExit(f"sweep of {entry.label}: {entry.status}: {entry.error or 'no trace'}")
    from workbench.analysis.summary import summarize

    summary = summarize(load(folder / entry.trace))
    return {"cell_wall_s": cell_wall, "run_wall_s": entry.wall_s, "seed": entry.seed,
            "per_min": summary.throughput_per_min, "partitions": summary.partitions_done,
            "proofs": (folder / entry.proofs).read_bytes() if entry.proofs else b"", "host": entry.host}


def directly(config: Any, folder: Path, label: str) -> dict[str, Any]:
    from workbench.analysis.summary import summarize
    from workbench.pipeline.backends import select_backend
    from workbench.pipeline.proofs import proofs_json
    from workbench.pipeline.run import Pipeline
    from workbench.trace import output, store

    folder.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    pipeline = Pipeline(config, select_backend(config))
    result = pipeline.run()
    run_wall = time.perf_counter() - began
    if not result.ok:
        raise SystemExit(f"direct run of {label}: {result.error}")
    saving = time.perf_counter()
    store.save(result.trace, folder / f"{label}.wbtrace")
    text = proofs_json(pipeline, result.proofs)[0] if result.proofs else ""
    output.write_text(folder / f"{label}.proofs.json", text)
    save_s = time.perf_counter() - saving
    summary = summarize(result.trace)
    # Inside the sweep the run's pipeline is let go before the driver has the outcome (its
    # device buffers and host memory freed, within the cell's wall): timed here too.
    freeing = time.perf_counter()
    del pipeline, result
    gc.collect()
    free_s = time.perf_counter() - freeing
    return {"run_wall_s": run_wall, "save_s": save_s, "free_s": free_s, "seed": config.seed,
            "partitions": summary.partitions_done, "per_min": summary.throughput_per_min,
            "proofs": (folder / f"{label}.proofs.json").read_bytes()}


def pair_row(name: str, repeat: int, first: str, s: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    overhead = s["cell_wall_s"] - s["run_wall_s"]
    return {"cell": name, "repeat": repeat, "first": first,
            "sweep_per_min": s["per_min"], "direct_per_min": d["per_min"],
            "ratio": s["per_min"] / d["per_min"] if d["per_min"] else float("nan"),
            "sweep_cell_wall_s": s["cell_wall_s"], "sweep_run_wall_s": s["run_wall_s"],
            "direct_run_wall_s": d["run_wall_s"], "direct_save_s": d["save_s"], "direct_free_s": d["free_s"],
            "overhead_s": overhead, "overhead_share": overhead / s["cell_wall_s"],
            "partitions": [s["partitions"], d["partitions"]], "seeds": [s["seed"], d["seed"]],
            "proofs_equal": bool(s["proofs"]) and s["proofs"] == d["proofs"], "proof_bytes": len(d["proofs"])}


HEADER = (f"{'cell':<24} {'rep':>3} {'first':>6} {'sweep /min':>10} {'direct /min':>11} {'ratio':>6} "
          f"{'cell wall s':>11} {'run wall s':>10} {'direct s':>8} {'save s':>6} {'free s':>6} "
          f"{'overhead s':>10} {'share':>6} {'proofs':>6}")


def line(r: dict[str, Any]) -> str:
    return (f"{r['cell']:<24} {r['repeat']:>3} {r['first']:>6} {r['sweep_per_min']:10.1f} "
            f"{r['direct_per_min']:11.1f} {r['ratio']:6.3f} {r['sweep_cell_wall_s']:11.2f} "
            f"{r['sweep_run_wall_s']:10.2f} {r['direct_run_wall_s']:8.2f} {r['direct_save_s']:6.3f} "
            f"{r['direct_free_s']:6.3f} "
            f"{r['overhead_s']:10.3f} {r['overhead_share']:6.2%} "
            f"{'equal' if r['proofs_equal'] else 'DIFFER':>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", default=MAIN_CELLS)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--log2", type=int, default=22)
    parser.add_argument("--backend", default="gpu")
    parser.add_argument("--executor", choices=("auto", "ray", "local"), default="auto",
                        help="auto: Ray's when Ray is installed, else the local one (as `workbench sweep`)")
    parser.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                        type=lambda t: (t.partition("=")[0], parse_value(t.partition("=")[2])),
                        help="change a knob of the grid's base (a dry run on a small machine)")
    parser.add_argument("--warmup-partitions", type=int, default=2)
    parser.add_argument("--budget-s", type=float, default=float("inf"))
    parser.add_argument("--work", type=Path, help="folder for the traces (default: a temporary one, removed)")
    parser.add_argument("--json", type=Path, help="the figures as JSON, rewritten after every pair")
    args = parser.parse_args()
    from workbench.sweep import make_executor
    from workbench.sweep.local import LocalExecutor

    began = time.perf_counter()
    work = args.work or Path(tempfile.mkdtemp(prefix="sweep-gpu-"))
    grids = {name: cell_grid(args, name) for name in args.cells}
    inner = LocalExecutor() if args.executor == "local" else make_executor()
    if args.executor == "ray" and inner.name != "ray":
        raise SystemExit(f"--executor ray: {inner.open()[0]}")
    executor = Held(inner)
    opened = time.perf_counter()
    notes = executor.open()
    ready_s = time.perf_counter() - opened
    say = [f"{args.backend} backend, 2^{args.log2}, {args.partitions} partitions a run, cells "
           f"{', '.join(args.cells)}, {args.repeats} repeats each way; executor {executor.name} "
           f"(ready in {ready_s:.1f} s){': ' + '; '.join(notes) if notes else ''}; {os.cpu_count()} cores, "
           f"load average {os.getloadavg()[0]:.1f}"]
    print(say[0], flush=True)
    first = grids[args.cells[0]].runs()[0].config
    warm = directly(first.replace(partitions=args.warmup_partitions), work / "warmup", "warmup")
    print(f"warm-up (direct, {args.warmup_partitions} partitions, not counted): {warm['run_wall_s']:.1f} s",
          flush=True)
    print(HEADER, flush=True)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    report: dict[str, Any] = {"setup": say[0], "ready_s": ready_s, "warmup_s": warm["run_wall_s"],
                              "rows": rows, "skipped": skipped}
    spent: dict[str, float] = {}
    k = 0
    try:
        for repeat in range(args.repeats):
            for name in args.cells:
                estimate = spent.get(name, statistics.mean(spent.values()) if spent else 0.0)
                if time.perf_counter() - began + estimate > args.budget_s:
                    skipped.append(f"{name} r{repeat}")
                    continue
                pair_began = time.perf_counter()
                config = grids[name].runs()[0].config
                order = ("sweep", "direct") if k % 2 == 0 else ("direct", "sweep")
                k += 1
                got: dict[str, dict[str, Any]] = {}
                for way in order:
                    label = f"{name}.r{repeat}"
                    got[way] = (through_sweep(grids[name], executor, work / "sweep" / label) if way == "sweep"
                                else directly(config, work / "direct", label))
                rows.append(pair_row(name, repeat, order[0], got["sweep"], got["direct"]))
                spent[name] = time.perf_counter() - pair_began
                print(line(rows[-1]), flush=True)
                if args.json:
                    args.json.write_text(json.dumps(report, indent=2))
    finally:
        executor.inner.close()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if rows:
        shares = [r["overhead_share"] for r in rows]
        ratios = [r["ratio"] for r in rows]
        report["summary"] = {
            "pairs": len(rows), "proofs_equal": sum(r["proofs_equal"] for r in rows),
            "overhead_s_median": statistics.median(r["overhead_s"] for r in rows),
            "overhead_share_median": statistics.median(shares), "overhead_share_max": max(shares),
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
        m = report["summary"]
        print(f"{m['pairs']} pairs; proofs equal in {m['proofs_equal']}; overhead median "
              f"{m['overhead_s_median']:.3f} s, share median {m['overhead_share_median']:.2%}, max "
              f"{m['overhead_share_max']:.2%} (target at most "
              f"{TARGET:.0%}: {'met' if m['overhead_share_max'] <= TARGET else 'not met'}); sweep/direct "
              f"partitions/min median {m['ratio_median']:.3f} ({m['ratio_min']:.3f}-{m['ratio_max']:.3f})")
    if skipped:
        print(f"skipped (over --budget-s {args.budget_s:g}): {', '.join(skipped)}")
    print(f"sitting: {time.perf_counter() - began:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
