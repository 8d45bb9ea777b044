"""A case study's report: several runs in one self-contained HTML file.

The grid of runs (analysis/grid.py) first, then the two runs the study is about on one time
scale, their phase distributions and verdicts, then the what-if replays next to the runs
that made the change. Bokeh's JavaScript is inline, as in the single-run report.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape

from bokeh.embed import components

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
<h2>Verdicts: {label_a} and {label_b}</h2>
<div class="wb-columns"><div>{verdict_a}</div><div>{verdict_b}</div></div>
<h2>What-if replays next to the runs that made the change</h2>
{checks}
<h2>{label_a} and {label_b} on one time scale</h2>
{compare_div}
<h2>Phase distributions: {label_a}</h2>
{dist_a}
<h2>Phase distributions: {label_b}</h2>
{dist_b}
{plots_script}"""


def render_study(
    title: str, intro_html: str, runs: Mapping[str, Trace], pair: tuple[str, str],
    checks: Sequence[tuple[str, str, PredictionCheck]] = (), verdicts: Mapping[str, Verdict] | None = None,
) -> str:
    """`verdicts`: the runs' verdicts where the caller has them already."""
    found = {name: (verdicts or {}).get(name) or diagnose(trace) for name, trace in runs.items()}
    a, b = (runs[name] for name in pair)
    # Plain figures only: the inline resources hold Bokeh's core, not its widgets.
    script, divs = components({"compare": compare_figure(a, b, pair, with_summaries=False),
                               "a": distribution_figure(a), "b": distribution_figure(b)})
    devices = sorted({str(t.meta.get("device")) for t in runs.values() if t.meta.get("device")})
    facts = [f"written {time.strftime('%Y-%m-%d %H:%M:%S')}", f"{len(runs)} runs", *devices]
    gpu_use = {name: v.utilisation[0] for name, v in found.items() if v.utilisation}
    return html_page(title, facts, BODY.format(
        intro=intro_html, cells=cells_table({k: cell_metrics(t, found[k]) for k, t in runs.items()}),
        utilisation=utilisation_table(gpu_use), label_a=escape(pair[0]), label_b=escape(pair[1]),
        verdict_a=verdict_html(view_of(found[pair[0]], a)),
        verdict_b=verdict_html(view_of(found[pair[1]], b)),
        checks=checks_table(checks) if checks else "<p>none</p>", compare_div=divs["compare"],
        dist_a=divs["a"], dist_b=divs["b"], plots_script=script,
    ), extra_css=".wb-columns > div { flex: 1 1 600px; }\n")
