"""The shareable report: one self-contained HTML file for a trace.

Bokeh's JavaScript and CSS are written into the file, so it opens from a mail attachment
or a laptop without network. Order follows the reader's questions: what is holding the GPU
back (verdict), what was run (configuration), how it went (tables), then the evidence
(Gantt, per-phase distributions).
"""

from __future__ import annotations

import time
from html import escape

from bokeh.embed import components
from bokeh.layouts import column
from bokeh.resources import Resources

from workbench.analysis import verdict as analysis_verdict
from workbench.analysis.role_summary import is_pipeline, role_summary
from workbench.analysis.summary import summarize
from workbench.trace.container import Trace
from workbench.viz.bars import trace_bars
from workbench.viz.distributions import distribution_figure
from workbench.viz.findings import verdict_html, view_of
from workbench.viz.gantt import DEFAULT_MAX_BARS
from workbench.viz.tables import CSS, config_table, role_summary_html, summary_html
from workbench.viz.timeline import gantt_figure

# Bokeh's core and its widgets (the Gantt's search, toggles and panels); no tables, WebGL or
# LaTeX, which would more than double the bytes.
RESOURCES = Resources(mode="inline", components=["bokeh", "bokeh-widgets"])

SKIPPED = "<p class='wb-note'><em>verdict left out of this report (asked for without it)</em></p>"

PAGE_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 20px 0 6px; }
.wb-meta { color: #666; font-size: 12px; } .wb-note { color: #8a5a00; }
.wb-columns { display: flex; gap: 32px; flex-wrap: wrap; align-items: flex-start; }
""" + CSS

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
{resources}
<style>
{css}
</style>
</head>
<body>
<h1>{title}</h1>
<div class="wb-meta">{meta}</div>
{body}
</body>
</html>
"""

BODY = """<h2>Verdict</h2>
{verdict}
<h2>Run</h2>
<div class="wb-columns"><div>{config}</div><div>{summary}</div></div>
<h2>Timeline</h2>
{emulated}
{plots_div}
{plots_script}"""


def html_page(title: str, facts: list[str], body: str, extra_css: str = "") -> str:
    """A self-contained page: Bokeh inline, our style, a heading and a line of facts; shared by
    the run report and the case-study report (viz/study_report.py)."""
    return PAGE.format(title=escape(title), resources=RESOURCES.render(), css=PAGE_CSS + extra_css,
                       meta=escape(" · ".join(facts)), body=body)


def render_report(
    trace: Trace, title: str | None = None, max_bars: int = DEFAULT_MAX_BARS, verdict: bool = True,
) -> str:
    """The report as one HTML string; `verdict=False` leaves the diagnosis out (it is the
    slow part on traces of millions of spans) and says so in its place."""
    summary = summarize(trace)
    meta = trace.meta
    pipeline = is_pipeline(trace)
    label = str(meta.get("label") or "")  # the run's name (its file's, for a loaded one)
    if pipeline:
        done = f"{summary.outcome}, {summary.partitions_done} partitions"
        heading = title or f"{label or 'workbench run'}: {done}"
        tables = summary_html(summary)
    else:
        roles = role_summary(trace)
        heading = title or f"{label or roles.source or 'trace'}: {sum(r.spans for r in roles.roles):,} spans"
        tables = role_summary_html(roles)
    bars = trace_bars(trace)
    name = title or str(meta.get("label") or heading)
    found = analysis_verdict.diagnose(trace) if verdict else None
    layout = column(gantt_figure(trace, max_bars=max_bars, bars=bars, label=name, verdict=found),
                    distribution_figure(trace, bars, label=name),
                    sizing_mode="stretch_width")
    script, div = components(layout)
    facts = [f"report written {time.strftime('%Y-%m-%d %H:%M:%S')}", f"{len(trace.spans):,} spans"]
    if meta.get("device"):
        facts.append(str(meta["device"]))
    emulated = ""
    if meta.get("memory_emulated"):
        emulated = ("<p class='wb-note'>Memory modes were emulated on the CPU backend: copies are "
                    "host memcpys, no PCIe link is involved, so copy bandwidths are not a link's.</p>")
    return html_page(heading, facts, BODY.format(
        verdict=verdict_html(view_of(found, trace)) if verdict else SKIPPED,
        config=config_table(trace.config, meta),
        summary=tables, emulated=emulated, plots_div=div, plots_script=script,
    ))
