"""A sweep's report: the case study's report (viz/study_report.py) of the sweep's cells, one
representative run each (the median by throughput), with the spread across repeats and the
runs that did not complete above it. One self-contained HTML file."""

from __future__ import annotations

from html import escape

from workbench.sweep.study import Study
from workbench.viz.grid_tables import spreads_table
from workbench.viz.study_report import render_study


def render_sweep(study: Study, name: str = "sweep") -> str:
    runs = study.runs
    pairs = [(pair[0], pair[1]) for pair in study.report.get("pairs", []) if all(p in runs for p in pair)]
    devices = sorted({str(t.meta.get("device")) for t in runs.values() if t.meta.get("device")})
    title = (study.report.get("title") or f"Sweep {name}") + (f" on {devices[0]}" if devices else "")
    intro = [str(study.report.get("intro", ""))]
    index = study.index
    if index is not None:
        grid = index.grid
        intro.append(f"<p>{len(index.entries)} runs of {len(grid.get('cells', {}))} cells, "
                     f"{grid.get('repeats', 1)} each, order {escape(str(grid.get('order')))}, "
                     f"executor {escape(index.executor)}, {escape(index.status)}. Each cell's row below is "
                     "its median run by throughput.</p>")
    if any(len(labels) > 1 for labels in study.cells.values()):
        intro.append("<h2>Across repeats</h2>" + spreads_table({c: study.spreads(c) for c in study.cells}))
    problems = study.problems()
    if problems:
        items = "".join(f"<li><b>{escape(p['label'])}</b>: {escape(p['status'].replace('_', ' '))}"
                        f"{': ' + escape(str(p['error'])) if p['error'] else ''}</li>" for p in problems)
        intro.append(f"<h2>Runs that did not complete</h2><ul>{items}</ul>")
    verdicts = {cell: study.verdicts[study.representative(cell)] for cell in study.cells}
    return render_study(title, "\n".join(intro), runs, pairs, study.checks, verdicts)
