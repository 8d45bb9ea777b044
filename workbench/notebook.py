"""What the notebooks call: the control panel, runs, figures, comparisons and reports.

    import workbench.notebook as wb
    panel = wb.panel()                    # knobs, Run / Stop, progress bar, live Gantt
    first = wb.run(memory_mode="pageable") # a run to the end, from a cell
    wb.gantt(first); wb.summary(first); wb.verdict(first)
    wb.compare(first, wb.run(memory_mode="zerocopy"))
    rec = wb.record(["./my-daemon"])      # an unmodified program, its live Gantt; rec.wait()
    wb.report(first, "first.html")
    hosts = wb.fleet(["logs/"]).records    # many hosts' logs ranked by what bounds each
    view = wb.sweep("grid.toml")          # the grid's table filling in live, Stop, any run's Gantt
    live = wb.follow("daemon.log")        # a growing cuzk log: live Gantt, running verdict, Stop saves

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
from workbench.viz.distributions import distribution_figure
from workbench.viz.findings import diagnose, verdict_html
from workbench.viz.panel import WATCHED, ControlPanel
from workbench.viz.recording import LiveRecording
from workbench.viz.report import render_report
from workbench.viz.runner import RunRecord, run_to_end
from workbench.viz.tables import CSS, config_table, role_summary_html, side_by_side, summary_html
from workbench.viz.timeline import gantt_figure

_state = {"bokeh_loaded": False, "runs": 0}
VERDICT_SPANS = 200_000  # past these the diagnosis is slow; the Gantt goes without its words

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
    """Display a Bokeh figure or layout as a widget; returns the handle of the widget. Beside
    it goes a hidden static copy, which a notebook reopened without its kernel shows instead
    of the widget's "model not found"."""
    from IPython.display import HTML, display

    from workbench.viz.fallback import fallback_html

    setup()
    from workbench.viz.kernel_widget import KernelDocument

    shown = _display(KernelDocument(layout))
    display(HTML(fallback_html("", layout, note="a static copy (the kernel that drew this figure is gone)")))
    return shown


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


def panel(trace_dir: str | Path | None = None, live_view: str | None = None, **settings: Any) -> ControlPanel:
    """Show the control panel, its knobs set to the panel's defaults (a run of about 10-20 s on
    the CPU backend, long enough to watch: panel.WATCHED) with `settings` changed; with
    `trace_dir`, each run's trace is saved there (journaled while it runs). `live_view` (or
    $WORKBENCH_LIVE_VIEW): "process" (the default), the live view made in a process of its own
    that the run does not pay for, its changes passed on by the kernel; "kernel", made in the
    kernel; "page", in a process of its own that serves it, shown in a frame from 127.0.0.1
    (the browser must reach the kernel's host)."""
    from IPython.display import HTML, display

    setup()
    control = ControlPanel(config(**{**WATCHED, **settings}), trace_dir=trace_dir, live_view=live_view)
    _display(control.widget)
    # Beside it, a static copy of its last run, updated as runs end: what a reopened notebook shows.
    copy = display(HTML(""), display_id=True)
    if copy is not None:
        control.finished_listeners.append(lambda done: copy.update(HTML(done.static_copy())))
    return control


def run(save: str | Path | bool = False, progress: bool = True, **settings: Any) -> RunRecord:
    """Run the pipeline to the end (the CPU backend unless a GPU can run here), showing a
    progress bar (partitions, rate, time left) that ends on the summary's figures and stays in
    the output as a static line. `save`: a trace file to write (or True: a new name in runs/),
    journaled while the run goes on so a dead kernel loses at most the last second; the
    record's `trace_path` says where it went."""
    _state["runs"] += 1
    number = _state["runs"]
    path = output.fresh_run_path() if save is True else (save or None)
    chosen = config(**settings)
    if not progress:
        return run_to_end(chosen, number=number, trace_path=path, fresh=save is True)
    from IPython.display import HTML, display

    from workbench.viz.progress import ProgressBar, final_figures, live_figures, static_html

    bar = ProgressBar(f"run {number}")
    handle = display(bar.widget, display_id=True)
    runs: list[Any] = []

    def watch(running: Any) -> None:
        runs[:] = [running]
        bar.show(live_figures(running))

    record = run_to_end(chosen, number=number, trace_path=path, fresh=save is True, watch=watch)
    # The widget gives way to its last state in plain HTML: what a saved notebook keeps.
    final = final_figures(record, runs[0] if runs else None)
    bar.show(final)
    if handle is not None:
        handle.update(HTML(static_html(final, f"run {number}")))
    return record


def record(command: Sequence[str], save: str | Path | bool = False, cuda: bool = True,
           locks: str = "contended", cuda_kinds: str = "all", cuda_mode: str = "activity") -> LiveRecording:
    """Record an unmodified program as `workbench record` does, its live Gantt shown here while
    it runs; returns at once. `.wait()` gives the trace (saved to `save`, or a new name in runs/
    with True), `.stop()` passes SIGTERM on to the program, `.exit_code` is its exit code.
    `locks`: contended (each mutex from its first wait), all or none, as `workbench record --locks`;
    `cuda_kinds`: the CUDA activity recorded, as `--cuda-kinds` ("kernel,memcpy", "all", "none");
    `cuda_mode`: how kernels are recorded, as `--cuda-mode` ("activity", "launches", "sampled")."""
    setup()
    path = output.fresh_run_path(prefix="record") if save is True else (save or None)
    recording = LiveRecording(list(command), path, cuda=cuda, locks=locks, cuda_kinds=cuda_kinds,
                              cuda_mode=cuda_mode)
    _display(recording.widget)
    return recording.start()


def gantt(item: TraceLike, **options: Any) -> Shown:
    """The Gantt with its details, range statistics and search; a large trace's detail view
    asks the kernel for the spans in view as it is zoomed (so keep the kernel running)."""
    from workbench.analysis.role_summary import is_pipeline
    from workbench.analysis.verdict import diagnose as analysis_diagnose

    trace = _trace(item)
    options.setdefault("label", _label(item, ""))
    options.setdefault("requery", True)
    if "verdict" not in options and is_pipeline(trace) and len(trace.spans) <= VERDICT_SPANS:
        options["verdict"] = analysis_diagnose(trace)  # its words go in each partition's details
    return show(gantt_figure(trace, **options))


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


def fleet(paths: Sequence[str | Path] | str | Path, parallel: str = "process", workers: int | None = None,
          address: str | None = None, link_gbps: float | None = None, copy_bytes: float | None = None,
          whatif: bool = True) -> Shown:
    """Many hosts' logs, exports or traces (files or directories) read at once, as `workbench
    fleet` does: shows the hosts per bound and the ranked table (saying so when Ctrl-C or Stop cut
    the reading short); through the handle, `records` are the hosts' records in rank order and
    `counts` the hosts per bound (`value` is the whole view, analysis/fleet.py's FleetView)."""
    from IPython.display import HTML

    from workbench.analysis.fleet import rank
    from workbench.analysis.verdict import DiagnoseOptions
    from workbench.fleet import expand, read_fleet
    from workbench.viz.fleet_report import fleet_table

    given = [paths] if isinstance(paths, str | Path) else list(paths)
    read = read_fleet(expand(given), DiagnoseOptions(link_gbps, copy_bytes, whatif=whatif), parallel,
                      workers, address)
    view = rank(read.records)
    cut = (f"<p class='wb-note'>interrupted: {len(read.records)} of {read.files} hosts read</p>"
           if read.interrupted else "")
    _display(HTML(f"<style>{CSS}</style>{cut}" + fleet_table(view)))
    return Shown(view)

def sweep(grid: str | Path | Mapping[str, Any], out: str | Path | None = None, *, local: bool = False,
          address: str | None = None, exclusive_host: bool = False, wait: bool = False) -> Any:
    """Run a grid (a grid file, or its table as a dict) as `workbench sweep` does, on Ray when it
    is installed: shows the table filling in as runs end, a Stop button, and a Gantt of any
    finished run. Returns the view: `view.join()` waits, `view.index` says what ran, and
    `wb.sweep_table(view.folder)` reads the finished folder's table. `wait`: return once done."""
    from workbench.sweep import Driver, load_grid, make_executor, parse_grid, prepare_folder
    from workbench.viz.sweep_view import SweepView

    found = load_grid(grid) if isinstance(grid, str | Path) else parse_grid(dict(grid), "grid")
    executor = make_executor(local, address, exclusive_host)
    folder = prepare_folder(out, Path(found.source).name)
    view = SweepView(folder, open_gantt=gantt)
    driver = Driver(found, folder, executor.name, view)
    executor.open()  # on this thread: Ray sets signal handlers only from the main thread
    _display(view.widget)
    view.start(driver, executor)
    if wait:
        try:
            while not view.join(0.2):
                pass
        except KeyboardInterrupt:
            view.stop()
            view.join()
    return view


def follow(source: str | Path, trace: str | Path | None = None, until_idle: float | None = None,
           from_start: bool = True) -> Any:
    """A growing cuzk log followed as `workbench follow` does (live Gantt, running verdict, Stop
    saves the trace); returns the following: `stop()`, `wait()`, `trace`, `trace_path`."""
    from workbench.viz.follow_view import start_following

    return start_following(source, trace, until_idle, from_start, show=show)


def sweep_table(folder: str | Path) -> Shown:
    """A sweep folder's grid table (one row a cell, its median run), the spreads across repeats
    and the what-if checks of its grid."""
    from IPython.display import HTML

    from workbench.sweep import read_study
    from workbench.viz.grid_tables import cells_table, checks_table, spreads_table

    study = read_study(folder)
    cells = {cell: study.metrics[study.representative(cell)] for cell in study.cells}
    parts = [cells_table(cells), spreads_table({c: study.spreads(c) for c in study.cells})]
    if study.checks:
        parts.append(checks_table(study.checks))
    return _display(HTML(f"<style>{CSS}</style>" + "".join(parts)))
