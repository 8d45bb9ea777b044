"""A fleet in HTML: the ranked table (notebook and report), and the report around it.

The report is one self-contained file (viz/report.py's page: Bokeh inline, no network): the
hosts per bound in a line and as a chart with each host's cost, the ranked table, then each
host's finding with its evidence (log lines or trace spans), key numbers and notes.
"""

from __future__ import annotations

import time
from html import escape

from bokeh.embed import components
from bokeh.layouts import row
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Range1d
from bokeh.models.layouts import LayoutDOM
from bokeh.plotting import figure

from workbench.analysis.fleet import FleetView, HostRecord
from workbench.viz.report import html_page
from workbench.viz.tables import table

HEADERS = ["#", "host", "input", "bound", "cost", "throughput", "window s", "evidence", "finding"]
BOUND_COLOR = "#e15759"
HOST_COLOR = "#4e79a7"
CAPTION = ("cost: the share of the host's run its bound accounts for (a GPU-bound host's: the share its GPU "
           "computes); evidence: the first log line or trace span that shows it")

BODY = """<p class='wb-headline'>{sentence}</p>
{interrupted}
<h2>Hosts per bound</h2>
{plots_div}
<h2>Hosts ranked by what bounds each</h2>
{table}
<h2>Each host's finding</h2>
{hosts}
{plots_script}"""

HOST = """<h3 id="host-{anchor}">{rank}. {host}: {label}</h3>
<p class='wb-meta'>{source} · {kind}</p>
<p>{headline}</p>
{evidence}
{numbers}
{notes}"""


def _rate(r: HostRecord) -> str:
    return "-" if r.throughput is None else f"{r.throughput:.1f} {r.unit}"


def _row(rank: int, r: HostRecord) -> list[object]:
    if not r.readable:
        return [rank, r.host, "-", r.label, "-", "-", "-", "-", r.error]
    where = r.evidence[0].where(r.source) if r.evidence else "-"
    return [rank, r.host, r.kind, r.label, r.cost_text, _rate(r), f"{r.window_s:.1f}", where, r.title]


def fleet_table(view: FleetView) -> str:
    """The one-line count per bound and the ranked table, as HTML (for the notebook and report)."""
    return (f"<p class='wb-headline'>{escape(view.sentence)}</p>"
            + table(HEADERS, [_row(i, r) for i, r in enumerate(view.records, start=1)],
                    caption=CAPTION))


def _host_section(rank: int, r: HostRecord) -> str:
    if not r.readable:
        return (f"<h3 id='host-{rank}'>{rank}. {escape(r.host)}: unreadable</h3>"
                f"<p class='wb-meta'>{escape(r.source)}</p><p class='wb-note'>{escape(r.error)}</p>")
    evidence = ("<ul>" + "".join(f"<li><code>{escape(e.describe(r.source))}</code></li>" for e in r.evidence)
                + "</ul>") if r.evidence else ""
    numbers = table(["number", "value"], [[k, v] for k, v in r.numbers.items()]) if r.numbers else ""
    notes = ("<ul class='wb-meta'>" + "".join(f"<li>{escape(n)}</li>" for n in r.notes) + "</ul>"
             if r.notes else "")
    return HOST.format(anchor=rank, rank=rank, host=escape(r.host), label=escape(r.label),
                       source=escape(r.source), kind=escape(r.kind), headline=escape(r.headline),
                       evidence=evidence, numbers=numbers, notes=notes)


def distribution_figures(view: FleetView) -> LayoutDOM:
    """Hosts per bound (bars) beside each host's cost by bound (one dot a host)."""
    labels = [c.label for c in view.counts][::-1]  # the commonest on top
    height = 80 + 28 * len(labels)
    counts = ColumnDataSource({"label": labels, "hosts": [c.hosts for c in view.counts][::-1]})
    factors = FactorRange(factors=labels)
    bars = figure(y_range=factors, height=height, width=420, title="hosts", toolbar_location=None,
                  tools="")
    bars.hbar(y="label", right="hosts", height=0.7, source=counts, color=BOUND_COLOR)
    bars.x_range = Range1d(start=0, end=max((c.hosts for c in view.counts), default=1) * 1.1)
    readable = [r for r in view.records if r.readable]
    dots = ColumnDataSource({"label": [r.label for r in readable], "cost": [r.cost for r in readable],
                             "host": [r.host for r in readable]})
    cost = figure(y_range=factors, height=height, width=420, title="cost of each host's bound",
                  x_axis_label="share of the host's run (GPU-bound: the share it computes)",
                  x_range=Range1d(start=0, end=1), toolbar_location=None, tools="")
    cost.scatter(x="cost", y="label", source=dots, size=8, alpha=0.6, color=HOST_COLOR)
    cost.add_tools(HoverTool(tooltips=[("host", "@host"), ("cost", "@cost{0%}")]))
    return row(bars, cost)


def render_fleet_report(view: FleetView, title: str | None = None, interrupted: bool = False,
                        files: int | None = None, how: str = "") -> str:
    script, div = components(distribution_figures(view))
    cut = (f"<p class='wb-note'>interrupted: {len(view.records)} of {files} hosts read; the rest are "
           "not in this report</p>") if interrupted else ""
    facts = [f"written {time.strftime('%Y-%m-%d %H:%M:%S')}", f"{len(view.records)} hosts",
             f"{view.read} read"] + ([how] if how else [])
    body = BODY.format(
        sentence=escape(view.sentence), interrupted=cut, plots_div=div,
        table=table(HEADERS, [_row(i, r) for i, r in enumerate(view.records, start=1)],
                    caption=CAPTION),
        hosts="\n".join(_host_section(i, r) for i, r in enumerate(view.records, start=1)),
        plots_script=script)
    return html_page(title or f"fleet: {len(view.records)} hosts", facts, body)
