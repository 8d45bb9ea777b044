"""A sweep folder read back: every finished run's trace, verdict and figures (analysis/grid.py),
the spread of each cell's figures across its repeats, and the grid's what-if checks.

A folder written by `workbench sweep` has an index (sweep/index.py) saying which run is which
cell and repeat; a folder of traces alone (the case study's, from before sweeps) is read as one
run per `<cell>.wbtrace`, or `<cell>.r<k>.wbtrace` for repeats. Nothing here runs a pipeline.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.analysis.grid import CellMetrics, PredictionCheck, cell_metrics, check_prediction
from workbench.analysis.verdict import Verdict, diagnose
from workbench.analysis.whatif import Change, WhatIfOptions
from workbench.sweep.cell import COMPLETED
from workbench.sweep.grid import Check
from workbench.sweep.index import INDEX, SweepIndex, read_index
from workbench.trace.container import Trace

REPEAT = re.compile(r"^(?P<cell>.+)\.r(?P<k>\d+)$")

# The figures whose spread across a cell's repeats the table gives: (name, how to read it).
SPREAD_COLUMNS: dict[str, Callable[[CellMetrics], float | None]] = {
    "throughput_per_min": lambda m: m.throughput_per_min,
    "mutex_ceiling_per_min": lambda m: m.mutex_ceiling_per_min,
    "synthesis_median_ms": lambda m: m.synthesis_median_ms,
    "ntt_msm_h_ms": lambda m: m.phases["ntt_msm_h"].median_ms if "ntt_msm_h" in m.phases else None,
    "copy_gbps_median": lambda m: m.copy_gbps_median,
    "mutex_held": lambda m: m.mutex_held,
    "kernel_busy": lambda m: m.kernel_busy,
    "kernel_busy_steady": lambda m: m.kernel_busy_steady,
}


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    count: int


@dataclass
class Study:
    traces: dict[str, Trace]  # run label -> trace, finished runs only
    verdicts: dict[str, Verdict]
    metrics: dict[str, CellMetrics]
    cells: dict[str, list[str]]  # cell -> its finished runs' labels, by repeat
    checks: list[tuple[str, str, PredictionCheck]]
    index: SweepIndex | None = None
    report: dict[str, Any] = field(default_factory=dict)

    def representative(self, cell: str) -> str:
        """The run of `cell` whose throughput is the median (the lower middle one of an even count)."""
        labels = self.cells[cell]
        ranked = sorted(labels, key=lambda label: self.metrics[label].throughput_per_min)
        return ranked[(len(ranked) - 1) // 2]

    @property
    def runs(self) -> dict[str, Trace]:
        """One trace per cell, its representative run's."""
        return {cell: self.traces[self.representative(cell)] for cell in self.cells}

    def spreads(self, cell: str) -> dict[str, Spread]:
        out = {}
        for column, read in SPREAD_COLUMNS.items():
            values = [v for label in self.cells[cell] if (v := read(self.metrics[label])) is not None]
            if values:
                out[column] = Spread(statistics.median(values), min(values), max(values), len(values))
        return out

    def problems(self) -> list[dict[str, Any]]:
        """Runs of the index that did not complete: label, status and message."""
        if self.index is None:
            return []
        return [{"label": e.label, "status": e.status, "error": e.error, "host": e.host}
                for e in self.index.entries if e.status != COMPLETED]


def read_study(folder: str | Path, checks: Iterable[Check] | None = None, link_gbps: float | None = None,
               report: Mapping[str, Any] | None = None) -> Study:
    """`checks` and `report` (title, intro, pairs): a grid's, for a folder without an index (an
    index brings its own); `link_gbps`: the host link's speed for a replay of a trace that
    measured none."""
    from workbench.trace import load

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no sweep folder at {folder}")
    index = read_index(folder) if (folder / INDEX).exists() else None
    found: list[tuple[str, str, int, Path]] = []  # label, cell, repeat, file
    if index is not None:
        for e in index.entries:
            if e.status == COMPLETED and e.trace:
                found.append((e.label, e.cell, e.repeat, folder / e.trace))
        grid = index.grid
        checks = [Check(c["base"], c["cell"], dict(c.get("change", {}))) for c in grid.get("checks", [])]
        link_gbps = link_gbps or grid.get("link_gbps")
        report = dict(grid.get("report", {}))
    else:
        for path in sorted(folder.glob("*.wbtrace")):
            match = REPEAT.match(path.stem)
            cell, k = (match["cell"], int(match["k"])) if match else (path.stem, 0)
            found.append((path.stem, cell, k, path))
        report = dict(report or {})
    if not found:
        raise ValueError(f"{folder}: no finished runs to read (no completed run in {INDEX}, or no .wbtrace)")
    traces = {label: load(path) for label, _, _, path in found}
    verdicts = {label: diagnose(trace) for label, trace in traces.items()}
    metrics = {label: cell_metrics(traces[label], verdicts[label]) for label in traces}
    cells: dict[str, list[str]] = {}
    for label, cell, _, _ in sorted(found, key=lambda f: (f[1], f[2])):
        cells.setdefault(cell, []).append(label)
    study = Study(traces, verdicts, metrics, cells, [], index, report)
    study.checks = _checks(study, list(checks or ()), link_gbps)
    return study


def _checks(study: Study, checks: list[Check],
            link_gbps: float | None) -> list[tuple[str, str, PredictionCheck]]:
    out = []
    for check in checks:
        if check.base in study.cells and check.cell in study.cells:
            base = study.traces[study.representative(check.base)]
            measured = study.traces[study.representative(check.cell)]
            # A GPU run measures its link at setup; a CPU dry run borrows the figure it is given.
            options = WhatIfOptions(link_gbps=base.meta.get("link_gbps") or link_gbps)
            found = check_prediction(base, Change(**check.change), measured, options)
            out.append((check.base, check.cell, found))
    return out


def summary_of(study: Study) -> dict[str, Any]:
    """Every cell's figures (its representative run's), their spreads across repeats, the
    what-if checks and the runs that did not complete, as plain data (for JSON)."""
    cells = {}
    for cell in study.cells:
        figures = asdict(study.metrics[study.representative(cell)])
        figures["runs"] = len(study.cells[cell])
        figures["spreads"] = {k: asdict(v) for k, v in study.spreads(cell).items()}
        cells[cell] = figures
    checks = [{"base": base, "cell": cell, **asdict(check), "error": check.error,
               "error_same_synthesis": check.error_same_synthesis} for base, cell, check in study.checks]
    return {"cells": cells, "checks": checks, "problems": study.problems()}


def index_summary(index: SweepIndex) -> Mapping[str, int]:
    """How many runs ended in each status."""
    counts: dict[str, int] = {}
    for entry in index.entries:
        counts[entry.status] = counts.get(entry.status, 0) + 1
    return counts
