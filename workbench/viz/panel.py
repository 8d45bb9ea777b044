"""The control panel: knobs, Run and Stop, a status line, the live views and past runs.

A run goes on a background thread (runner.py); a poller thread of the UI side (live.py)
keeps the status line and the progress bar current. Where the live view is made
(`live_view`):
- `"process"` (the default): a process of its own (view_process.py) that the run does not pay
  for; the kernel ships it the rows and passes its patches on, as they came, to the widget the
  notebook draws (comm_relay.py), so it works wherever the notebook does;
- `"kernel"`: in the kernel (live.py's LiveView), sharing the run's interpreter;
- `"page"`: a process of its own, its page served by it and shown in a frame (the browser
  must reach 127.0.0.1 of the kernel's host); the kernel passes nothing on.
The controls, the status line and the progress bar stay in the kernel. Whatever goes wrong
in a click (a setting that cannot run, a backend that is not here, a failing phase) is
said in the panel's message line, never raised into the notebook's output.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

from workbench.config import ConfigError, RunConfig
from workbench.prover.backend import BackendUnavailable
from workbench.trace import output
from workbench.viz.comm_relay import RelayedView
from workbench.viz.compare import compare_figure, summaries_html
from workbench.viz.deps import require
from workbench.viz.fallback import fallback_html
from workbench.viz.findings import diagnose, verdict_html
from workbench.viz.gantt import LANE_PX
from workbench.viz.kernel_widget import KernelDocument
from workbench.viz.knobs import Knobs
from workbench.viz.lanes import expected_lanes
from workbench.viz.live import LiveView, Poller
from workbench.viz.live_summary import RunningSummary, SummaryPacer
from workbench.viz.progress import ProgressBar, final_figures, live_figures, static_html
from workbench.viz.report import render_report
from workbench.viz.runner import BackgroundRun, RunRecord
from workbench.viz.tables import CSS, summary_html
from workbench.viz.timeline import gantt_figure
from workbench.viz.view_process import ViewProcess

widgets = require("ipywidgets")

# The panel is for watching a run: its own defaults make one that lasts about 10-20 s on the
# CPU backend of a 2-core machine, the progress bar and the Gantt moving all the while (the
# configuration's own defaults are a quick run, over in a few seconds).
WATCHED = {"partitions": 24, "log2_constraints": 13}
FALLBACK_BARS = 4_000  # the static copy's Gantt: an overview and a detail window past this
LIVE_NAME = "live"  # its data sources are live_bars_0..2 (scripts and tests find them by name)
STYLE = f"<style>{CSS} .wb-problem {{ color: #b00020; }} .wb-hint {{ color: #666; }}</style>"
LIVE_VIEWS = ("process", "kernel", "page")
LIVE_VIEW_ENV = "WORKBENCH_LIVE_VIEW"  # the default of `live_view` where it is not given
FRAME_MARGIN_PX = 1_000  # a framed view's height past its Gantt's lanes: counters, boxes, summary


def guarded(handler: Callable[..., None]) -> Callable[..., None]:
    """Button and knob handlers report failures in the panel instead of raising."""

    @functools.wraps(handler)
    def run(self: ControlPanel, *args: Any) -> None:
        try:
            handler(self, *args)
        except Exception as err:
            self.say(f"{type(err).__name__}: {err}", problem=True)

    return run


class ControlPanel:
    def __init__(self, defaults: RunConfig | None = None, report_dir: str | Path = "reports",
                 trace_dir: str | Path | None = None, live_view: str | None = None) -> None:
        live_view = live_view or os.environ.get(LIVE_VIEW_ENV) or LIVE_VIEWS[0]
        if live_view not in LIVE_VIEWS:
            raise ValueError(f"live_view is {live_view!r}: one of {', '.join(LIVE_VIEWS)}")
        self.live_view = live_view
        self.view_process: ViewProcess | None = None
        self.knobs = Knobs(defaults or RunConfig().replace(**WATCHED))
        self.report_dir = Path(report_dir)
        # Where each run's trace is saved (a new name a run; journaled while it runs), if anywhere.
        self.trace_dir = None if trace_dir is None else Path(trace_dir)
        self.history: list[RunRecord] = []
        self.current: BackgroundRun | None = None
        self.live: LiveView | None = None
        self._poller: Poller | None = None
        self._summaries = SummaryPacer()
        self._running: RunningSummary | None = None
        # Called with the panel after each run has ended (the notebook keeps a static copy).
        self.finished_listeners: list[Callable[[ControlPanel], None]] = []
        self._idle = threading.Event()
        self._idle.set()
        # Set once the run's view is in place (or has failed to start): the progress bar and the
        # status line follow the run from its start, while a view's process is still starting.
        self._view_placed = threading.Event()

        self.run_button = widgets.Button(description="Run", button_style="success", icon="play")
        self.stop_button = widgets.Button(description="Stop", button_style="danger", icon="stop",
                                          disabled=True)
        self.report_button = widgets.Button(description="Save report", icon="file", disabled=True)
        self.progress = ProgressBar()
        self.status = widgets.HTML(value="idle")
        self.message = widgets.HTML()
        self.view_box = widgets.VBox()
        self.summary = widgets.HTML()
        self.compare_a = widgets.Dropdown(description="A", options=[])
        self.compare_b = widgets.Dropdown(description="B", options=[])
        self.compare_button = widgets.Button(description="Compare", disabled=True)
        self.compare_box = widgets.VBox()
        self.run_button.on_click(self._on_run)
        self.stop_button.on_click(self._on_stop)
        self.report_button.on_click(self._on_report)
        self.compare_button.on_click(self._on_compare)
        self.knobs.observe(self._on_knob)
        self.widget = widgets.VBox([
            widgets.HTML(STYLE), self.knobs.box,
            widgets.HBox([self.run_button, self.stop_button, self.report_button]),
            self.progress.widget, self.status, self.message, self.view_box, self.summary,
            widgets.HTML("<b>compare runs</b>"),
            widgets.HBox([self.compare_a, self.compare_b, self.compare_button]), self.compare_box,
        ])
        self._validate()

    # -- messages -------------------------------------------------------------------------------
    def say(self, text: str, problem: bool = False) -> None:
        kind = "wb-problem" if problem else "wb-hint"
        self.message.value = f"<span class='{kind}'>{escape(text)}</span>" if text else ""

    def _validate(self) -> bool:
        check = self.knobs.check()
        running = not self._idle.is_set()
        if not check.ok:
            self.say(f"cannot run: {check.problem}", problem=True)
        else:
            self.say("; ".join(check.notes))
        self.run_button.disabled = running or not check.ok
        return check.ok

    @guarded
    def _on_knob(self, change: Any) -> None:
        self._validate()

    # -- running --------------------------------------------------------------------------------
    @guarded
    def _on_run(self, button: Any = None) -> None:
        if not self._idle.is_set() or not self._validate():
            return
        config = self.knobs.check().config
        assert config is not None
        try:
            trace_path = None if self.trace_dir is None else output.fresh_run_path(self.trace_dir)
            run = BackgroundRun(config, number=len(self.history) + 1, trace_path=trace_path, fresh=True)
        except (ConfigError, BackendUnavailable, output.OutputError) as err:
            self.say(f"cannot run: {err}", problem=True)
            return
        self._idle.clear()
        self.current = run
        lanes = expected_lanes(config.synth_threads, config.workers, config.gpu_workers)
        worker_gpu = {w: config.gpu_of(w) for w in range(config.workers)} if config.gpus > 1 else None
        title, label = f"run {run.number}: live Gantt", f"run {run.number}"
        self.close_view()
        self.live = None
        self.summary.value = ""
        self._running = RunningSummary(run.recorder)
        self.progress.reset(f"run {run.number}")
        self.knobs.enable(False)
        self.run_button.disabled = True
        self.report_button.disabled = True
        self.stop_button.disabled = False
        self.status.value = f"run {run.number}: setting up (proving key, twiddles)"
        self._view_placed.clear()
        if self.live_view == "kernel":
            self._kernel_view(run, lanes, title, label, worker_gpu)
        run.start()  # its setup goes on while a view's process starts: what it records waits for it
        self._poller = Poller(self._tick)
        self._poller.start()
        try:
            self._place_view(run, lanes, title, label, worker_gpu)
        finally:
            self._view_placed.set()

    def _place_view(self, run: BackgroundRun, lanes: list[str], title: str, label: str,
                    worker_gpu: dict[int, int] | None) -> None:
        if self.live_view != "kernel":
            try:
                self.view_process = ViewProcess(
                    run.recorder, lanes, title=title, name=LIVE_NAME, label=label, worker_gpu=worker_gpu,
                    summary=True, page_title=f"workbench: {label}", say=self._view_lost,
                    relay=self.live_view == "process").start()
            except OSError as err:
                self.say(f"{err}; the view is the kernel's for this run", problem=True)
                self._kernel_view(run, lanes, title, label, worker_gpu)
        view = self.view_process
        if view is not None and view.relay:
            shown = RelayedView(view.bundle, on_event=view.send_event)
            view.attach(shown.relay, shown.keep)
            self.view_box.children = [shown]
        elif view is not None:
            height = 70 + LANE_PX * len(lanes) + FRAME_MARGIN_PX
            self.view_box.children = [widgets.HTML(
                f"<iframe src='{view.url}' title='{escape(title)}' "
                f"style='width: 100%; height: {height}px; border: 0'></iframe>")]

    def _kernel_view(self, run: BackgroundRun, lanes: list[str], title: str, label: str,
                     worker_gpu: dict[int, int] | None) -> None:
        self.live = LiveView(run.recorder, lanes, title=title, name=LIVE_NAME, worker_gpu=worker_gpu,
                             label=label)
        self.view_box.children = [KernelDocument(self.live.layout)]

    def _view_lost(self, line: str) -> None:
        self.say(line, problem=True)

    def close_view(self) -> None:
        """End the last run's view process, if it has one (a page's frame goes blank; a
        relayed view's process has ended with its run)."""
        if self.view_process is not None:
            self.view_process.close()
            self.view_process = None

    def _tick(self) -> bool:
        """One poll on the UI side: stream new records, refresh the status; False when done."""
        run = self.current
        assert run is not None
        done = run.done  # read first: a final drain after the end misses nothing
        if done:  # the view's last update needs the view: one still starting is waited for
            self._view_placed.wait()
        live, view = self.live, self.view_process
        try:
            if live is not None:
                live.tick(final=done)
            elif done and view is not None:
                view.finish()  # the last rows, and the view's last update, in its process
                if view.relay:  # the widget holds the last view: nothing more to relay
                    view.close()
            if not done:
                self.progress.show(live_figures(run))
                self.status.value = self._status_line(run)
                if live is not None and self._summaries.due():  # a view's process makes its own
                    with self._summaries.timed():
                        self._show_live_summary(run)
        except Exception as err:  # the run goes on even if a view cannot follow it
            self.say(f"the live view failed ({type(err).__name__}: {err}); the run goes on", problem=True)
        if done:
            self._finish(run)
            return False
        return True

    def _status_line(self, run: BackgroundRun) -> str:
        progress = run.pipeline.progress
        if not progress.started_ns:
            return f"run {run.number}: setting up (proving key, twiddles) {run.elapsed_s():.1f} s"
        elapsed = (run.recorder.now_ns() - progress.started_ns) / 1e9
        rate = progress.done / elapsed * 60 if elapsed > 0 else 0.0
        state = "stopping" if run.pipeline.stopping else "running"
        return (f"run {run.number} {state}: {progress.done}/{progress.total} partitions done, "
                f"{progress.synthesised} synthesised · {elapsed:.1f} s · {rate:.1f} partitions/min")

    def _show_live_summary(self, run: BackgroundRun) -> None:
        if self._running is None or self._running.trace.recorder is not run.recorder:
            self._running = RunningSummary(run.recorder)
        self.summary.value = self._running.html()

    def _finish(self, run: BackgroundRun) -> None:
        try:
            record = run.record()
        finally:
            self._idle.set()
            self.knobs.enable(True)
            self.stop_button.disabled = True
            self._validate()
        self.history.append(record)
        self.progress.show(final_figures(record, run))  # the summary's figures: the same rate
        s = record.summary
        # The run's own window, as the summary and the progress bar count it; setup apart.
        setup_s = max(record.wall_s - s.wall_s, 0.0)
        line = (f"run {record.number} {record.outcome}: {s.partitions_done}/{record.config.partitions} "
                f"partitions in {s.wall_s:.2f} s (after {setup_s:.2f} s of setup) · "
                f"{s.throughput_per_min:.1f} partitions/min · GPU mutex held {s.mutex_held_fraction:.0%}")
        if record.error:
            line += f" · {record.error}"
        if run.error is not None:
            line += f" · the run failed: {type(run.error).__name__}: {run.error}"
        if record.trace_path is not None:
            line += f" · trace {record.trace_path}"
        if run.save_error is not None:
            line += f" · the trace was not saved: {run.save_error}"
        self.status.value = escape(line)
        self.summary.value = "<h4>verdict</h4>" + verdict_html(diagnose(record.trace)) + summary_html(s)
        self.report_button.disabled = False
        options = [(r.label, i) for i, r in enumerate(self.history)]
        self.compare_a.options = options
        self.compare_b.options = options
        if len(self.history) >= 2:
            self.compare_a.value, self.compare_b.value = len(self.history) - 2, len(self.history) - 1
            self.compare_button.disabled = False
        for listener in self.finished_listeners:
            listener(self)

    def static_copy(self) -> str:
        """The last run's view as a hidden static copy (see fallback.py): status, progress,
        Gantt and verdict, for a notebook reopened without its kernel."""
        record = self.last
        if record is None:
            return ""
        figures = self.progress.figures
        bar = static_html(figures, f"run {record.number}") if figures is not None else ""
        html = f"{STYLE}{bar}<p>{self.status.value}</p>{self.summary.value}"
        layout = gantt_figure(record.trace, max_bars=FALLBACK_BARS, label=record.label)
        return fallback_html(html, layout, note="the panel's last run, as it was (the kernel that ran it "
                                                "is gone: run the cell again for a live panel)")

    @guarded
    def _on_stop(self, button: Any = None) -> None:
        if self.current is not None and not self._idle.is_set():
            self.current.stop("stopped from the panel")
            self.stop_button.disabled = True
            self.status.value = f"run {self.current.number}: stopping at the next step"

    @guarded
    def _on_report(self, button: Any = None) -> None:
        path = self.save_report()
        self.say(f"report written to {path} (one file, opens without network)")

    @guarded
    def _on_compare(self, button: Any = None) -> None:
        a, b = self.history[self.compare_a.value], self.history[self.compare_b.value]
        layout = compare_figure(a.trace, b.trace, (a.label, b.label), with_summaries=False)
        self.compare_box.children = [
            widgets.HTML(summaries_html(a.trace, b.trace, (a.label, b.label))),
            KernelDocument(layout),
        ]

    # -- for notebooks and tests ----------------------------------------------------------------
    def run(self) -> None:
        """Press Run."""
        self.run_button.click()

    def stop(self) -> None:
        """Press Stop."""
        self.stop_button.click()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the current run and its last view update are done."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for joinable in (self.current, self._poller):
            if joinable is None:
                continue
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not joinable.join(left):
                return False
        return self._idle.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))

    @property
    def running(self) -> bool:
        return not self._idle.is_set()

    @property
    def last(self) -> RunRecord | None:
        return self.history[-1] if self.history else None

    def save_report(self, path: str | Path | None = None) -> Path:
        record = self.last
        if record is None:
            raise ValueError("no finished run to report on yet")
        target = Path(path) if path is not None else self.report_dir / f"run-{record.number}.html"
        return output.write_text(target, render_report(record.trace, title=record.label))

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
