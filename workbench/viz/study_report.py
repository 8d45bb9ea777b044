"""A case study's report: several runs in one self-contained HTML file.

The grid of runs (analysis/grid.py) first, the what-if replays next to the runs that made
the change, then each pair of runs the study compares: verdicts side by side, both on one
time scale, their phase distributions. Bokeh's JavaScript is inline, as in the single-run report.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape

from bokeh.embed import components
from bokeh.model import Model

from workbench.analysis.grid import PredictionCheck, cell_metrics
from workbench.analysis.verdict import Verdict, diagnose
from workbench.trace.container import Trace
from workbench.viz.compare import compare_figure
from workbench.viz.distributions import distribution_figure
from workbench.viz.findings import verdict_html, view_of
from workbench.viz.grid_tables import cells_table, checks_table, utilisation_table
from workbench.viz.report import html_page

BODY = """{intro}
<h2>The runs</h2>
{cells}
<h2>Utilisation, named for what it measures</h2>
{utilisation}
<h2>What-if replays next to the runs that made the change</h2>
{checks}
{pairs}
{plots_script}"""

PAIR = """<h2>{label_a} against {label_b}</h2>
<h3>Verdicts</h3>
<div class="wb-columns"><div>{verdict_a}</div><div>{verdict_b}</div></div>
<h3>On one time scale</h3>
{compare_div}
<h3>Phase distributions: {label_a}</h3>
{dist_a}
<h3>Phase distributions: {label_b}</h3>
{dist_b}"""


def render_study(
    title: str, intro_html: str, runs: Mapping[str, Trace], pairs: Sequence[tuple[str, str]],
    checks: Sequence[tuple[str, str, PredictionCheck]] = (), verdicts: Mapping[str, Verdict] | None = None,
) -> str:
    """`pairs`: the runs compared side by side, each pair in its own section. `verdicts`: the
    runs' verdicts where the caller has them already."""
    missing = sorted({name for pair in pairs for name in pair} - set(runs))
    if missing:
        raise KeyError(f"no runs named {', '.join(missing)}")
    found = {name: (verdicts or {}).get(name) or diagnose(trace) for name, trace in runs.items()}
    figures: dict[str, Model] = {}
    for k, (name_a, name_b) in enumerate(pairs):
        a, b = runs[name_a], runs[name_b]
        # Plain figures only: the inline resources hold Bokeh's core, not its widgets.
        figures[f"compare{k}"] = compare_figure(a, b, (name_a, name_b), with_summaries=False)
        figures[f"a{k}"], figures[f"b{k}"] = (distribution_figure(a, label=name_a),
                                              distribution_figure(b, label=name_b))
    script, divs = components(figures) if figures else ("", {})  # a sweep may compare no pairs
    sections = [PAIR.format(
        label_a=escape(name_a), label_b=escape(name_b),
        verdict_a=verdict_html(view_of(found[name_a], runs[name_a])),
        verdict_b=verdict_html(view_of(found[name_b], runs[name_b])),
        compare_div=divs[f"compare{k}"], dist_a=divs[f"a{k}"], dist_b=divs[f"b{k}"],
    ) for k, (name_a, name_b) in enumerate(pairs)]
    devices = sorted({str(t.meta.get("device")) for t in runs.values() if t.meta.get("device")})
    facts = [f"written {time.strftime('%Y-%m-%d %H:%M:%S')}", f"{len(runs)} runs", *devices]
    gpu_use = {name: v.utilisation[0] for name, v in found.items() if v.utilisation}
    return html_page(title, facts, BODY.format(
        intro=intro_html, cells=cells_table({k: cell_metrics(t, found[k]) for k, t in runs.items()}),
        utilisation=utilisation_table(gpu_use),
        checks=checks_table(checks) if checks else "<p>none</p>", pairs="\n".join(sections),
        plots_script=script,
    ), extra_css=".wb-columns > div { flex: 1 1 600px; }\n")
