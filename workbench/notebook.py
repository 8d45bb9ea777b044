"""What the notebooks call: the control panel, runs, figures, comparisons and reports.

    import workbench.notebook as wb
    panel = wb.panel(partitions=8)        # knobs, Run / Stop, live Gantt
    first = wb.run(memory_mode="pageable") # a run to the end, from a cell
    wb.gantt(first); wb.summary(first); wb.verdict(first)
    wb.compare(first, wb.run(memory_mode="zerocopy"))
    wb.report(first, "first.html")

Figures are shown as widgets (jupyter_bokeh), which render in JupyterLab and in the
classic notebook alike and keep streaming while the kernel is busy elsewhere. BokehJS is
written into the notebook itself, so nothing is fetched from the network.

Each helper shows its output once, where it is called, and returns a `Shown` handle: its
`value` is the widget or HTML shown, and its attributes are the value's, so a script can
keep using it; a cell that ends in `wb.summary(run)` does not show the summary a second time.
`display(handle.value)` shows it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.config import RunConfig
from workbench.trace import output
from workbench.trace.container import Trace
from workbench.viz.compare import compare_figure, summaries_html
from workbench.viz.deps import require
from workbench.viz.distributions import distribution_figure
from workbench.viz.findings import diagnose, verdict_html
from workbench.viz.gantt import gantt_figure
from workbench.viz.panel import ControlPanel
from workbench.viz.report import render_report
from workbench.viz.runner import RunRecord, run_to_end
from workbench.viz.tables import CSS, config_table, role_summary_html, side_by_side, summary_html

_state = {"bokeh_loaded": False, "runs": 0}

TraceLike = Trace | RunRecord | str | Path


def setup() -> None:
    """Load BokehJS into the page once per kernel (figures need it; no network involved)."""
    if _state["bokeh_loaded"]:
        return
    from bokeh.io import output_notebook
    from bokeh.resources import INLINE

    output_notebook(resources=INLINE, hide_banner=True)
    _state["bokeh_loaded"] = True


class Shown:
    """What a helper showed: `value`, its attributes reachable through the handle. As a cell's
    last value it shows nothing more, since the output is already on the page above."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __getattr__(self, name: str) -> Any:
        if name == "value" or name.startswith(("_repr_", "_ipython_")):
            raise AttributeError(name)  # never render the value through the handle
        return getattr(self.value, name)

    def _ipython_display_(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<shown: {type(self.value).__name__}>"


def _display(obj: Any) -> Shown:
    from IPython.display import display

    display(obj)
    return Shown(obj)


def show(layout: Any) -> Shown:
    """Display a Bokeh figure or layout as a widget; returns the handle of the widget."""
    setup()
    return _display(require("jupyter_bokeh").BokehModel(layout))


def _trace(item: TraceLike) -> Trace:
    if isinstance(item, RunRecord):
        return item.trace
    if isinstance(item, str | Path):
        return load(item)
    return item


def _label(item: TraceLike, default: str) -> str:
    """A run's own name: its record's label, its file's name, or the name `load` gave it."""
    if isinstance(item, RunRecord):
        return item.label
    if isinstance(item, str | Path):
        return Path(item).name
    return str(item.meta.get("label") or default)


def config(**settings: Any) -> RunConfig:
    """A run configuration: the defaults with `settings` changed (validated)."""
    return RunConfig().replace(**settings)


def panel(**settings: Any) -> ControlPanel:
    """Show the control panel, its knobs set to the defaults with `settings` changed."""
    setup()
    control = ControlPanel(config(**settings))
    _display(control.widget)
    return control


def run(**settings: Any) -> RunRecord:
    """Run the pipeline to the end (the CPU backend unless a GPU can run here)."""
    _state["runs"] += 1
    return run_to_end(config(**settings), number=_state["runs"])


def gantt(item: TraceLike, **options: Any) -> Shown:
    options.setdefault("label", _label(item, ""))
    return show(gantt_figure(_trace(item), **options))


def distributions(item: TraceLike) -> Shown:
    return show(distribution_figure(_trace(item), label=_label(item, "")))


def summary(item: TraceLike) -> Shown:
    from IPython.display import HTML

    from workbench.analysis.role_summary import is_pipeline, role_summary
    from workbench.analysis.summary import summarize

    trace = _trace(item)
    tables = summary_html(summarize(trace)) if is_pipeline(trace) else role_summary_html(role_summary(trace))
    html = HTML(f"<style>{CSS}</style>" + side_by_side([config_table(trace.config, trace.meta), tables]))
    return _display(html)


def verdict(item: TraceLike) -> Shown:
    """What holds the pipeline back, with its numbers and the change it suggests."""
    from IPython.display import HTML

    html = HTML(f"<style>{CSS}</style>" + verdict_html(diagnose(_trace(item))))
    return _display(html)


def compare(a: TraceLike, b: TraceLike, labels: tuple[str, str] | None = None) -> Shown:
    """Two runs on one time scale with their summaries side by side, named by `labels` or
    else by their own names (record label, file name)."""
    from IPython.display import HTML

    ta, tb = _trace(a), _trace(b)
    labels = labels or (_label(a, "run A"), _label(b, "run B"))
    _display(HTML(summaries_html(ta, tb, labels)))
    return show(compare_figure(ta, tb, labels, with_summaries=False))


def report(item: TraceLike, path: str | Path = "report.html", title: str | None = None) -> Path:
    """Write the self-contained HTML report of a run; returns where it went."""
    label = title or (item.label if isinstance(item, RunRecord) else None)
    return output.write_text(path, render_report(_trace(item), title=label))


def load(path: str | Path, roles: str | Path | Sequence[Mapping[str, str]] | None = None) -> Trace:
    """Any trace, log or export the workbench reads (the format is sniffed), with `roles` (a
    mapping file, or its rules as a list of {"role", "name", "track", "lock"}) overriding the
    roles found automatically, as `--roles FILE` does on the command line."""
    from workbench.importers import load_any
    from workbench.model.roles import load_rules, parse_rules, with_rules

    trace = load_any(path)
    trace.meta["label"] = Path(path).name  # what compare calls it
    if roles is not None:
        rules = load_rules(roles) if isinstance(roles, str | Path) else parse_rules(list(roles), "roles")
        with_rules(trace, rules)
    return trace


def grid(runs: Mapping[str, TraceLike]) -> Shown:
    """Runs side by side: throughput, phase spreads, copy rates, utilisations, first finding."""
    from IPython.display import HTML

    from workbench.analysis.grid import cell_metrics
    from workbench.viz.grid_tables import cells_table

    html = HTML(f"<style>{CSS}</style>" + cells_table({k: cell_metrics(_trace(v)) for k, v in runs.items()}))
    return _display(html)


def utilisations(runs: Mapping[str, TraceLike]) -> Shown:
    """Every utilisation measure of each run's first GPU, side by side."""
    from IPython.display import HTML

    from workbench.analysis.utilisation import utilisation
    from workbench.viz.grid_tables import utilisation_table

    found = {k: u[0] for k, v in runs.items() if (u := utilisation(_trace(v)))}
    html = HTML(f"<style>{CSS}</style>" + utilisation_table(found))
    return _display(html)


def check_predictions(checks: Sequence[tuple[TraceLike, Any, TraceLike]],
                      labels: Sequence[tuple[str, str]], link_gbps: float | None = None) -> Shown:
    """Each (base run, what-if Change, run that made the change): the replay's prediction
    next to the measured throughput."""
    from IPython.display import HTML

    from workbench.analysis.grid import check_prediction
    from workbench.analysis.whatif import WhatIfOptions
    from workbench.viz.grid_tables import checks_table

    rows = []
    for (base, change, cell), (base_label, cell_label) in zip(checks, labels, strict=True):
        options = WhatIfOptions(link_gbps=link_gbps)
        rows.append((base_label, cell_label, check_prediction(_trace(base), change, _trace(cell), options)))
    html = HTML(f"<style>{CSS}</style>" + checks_table(rows))
    return _display(html)
