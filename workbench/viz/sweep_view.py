"""The notebook's view of a sweep: the grid's table filling in as runs end, each finished row
with its throughput and its verdict's headline, a Stop button, and any finished run's Gantt a
choice and a click away. The sweep runs on a thread of its own, so the notebook stays free.

The view is the sweep's listener (sweep/run.py): the driver calls it from the sweep's thread,
and it redraws its widgets from there (ipywidgets sends the change to the page at once).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

from workbench.sweep.index import Entry, SweepIndex
from workbench.sweep.run import Driver, Executor, Listener
from workbench.viz.deps import require
from workbench.viz.tables import CSS, table

REDRAW_S = 0.3  # at most this often for progress alone; a run's start or end redraws at once


class SweepView(Listener):
    def __init__(self, folder: Path, open_gantt: Callable[[Path], Any]) -> None:
        widgets = require("ipywidgets")
        self.folder = folder
        self.open_gantt = open_gantt
        self.driver: Driver | None = None
        self.index: SweepIndex | None = None
        self.error: BaseException | None = None
        self.headlines: dict[str, tuple[float, str]] = {}  # label -> (partitions/min, verdict headline)
        self.status = widgets.HTML(value="starting")
        self.table = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop", button_style="danger", icon="stop")
        self.choice = widgets.Dropdown(options=[], description="run")
        self.gantt_button = widgets.Button(description="Gantt", icon="bar-chart", disabled=True)
        self.output = widgets.Output()
        self.stop_button.on_click(lambda _: self.stop())
        self.gantt_button.on_click(lambda _: self.show_gantt())
        self.widget = widgets.VBox([widgets.HBox([self.status, self.stop_button]), self.table,
                                    widgets.HBox([self.choice, self.gantt_button]), self.output])
        self._thread: threading.Thread | None = None
        self._drawn = 0.0

    # -- running -------------------------------------------------------------------------------
    def start(self, driver: Driver, executor: Executor) -> None:
        self.driver = driver
        self._thread = threading.Thread(target=self._run, args=(driver, executor), name="workbench-sweep",
                                        daemon=True)
        self._thread.start()

    def _run(self, driver: Driver, executor: Executor) -> None:
        try:
            driver.run(executor)
        except BaseException as err:  # shown in the view; the driver has saved the index
            self.error = err
            self.status.value = f"<b>sweep ended</b>: {escape(type(err).__name__)}: {escape(str(err))}"

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.stop()
            self.status.value = ("stopping: runs not started are cancelled, running ones stop at their "
                                 "next step")

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @property
    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    # -- what the driver tells -------------------------------------------------------------------
    def began(self, index: SweepIndex) -> None:
        self.index = index
        self._draw(force=True)

    def started(self, entry: Entry) -> None:
        self._draw(force=True)

    def progress(self, entry: Entry) -> None:
        self._draw()

    def finished(self, entry: Entry) -> None:
        if entry.trace and entry.status == "completed":
            from workbench.analysis.verdict import diagnose
            from workbench.trace import load

            verdict = diagnose(load(self.folder / entry.trace))
            self.headlines[entry.label] = (verdict.summary.throughput_per_min, verdict.headline)
        if entry.trace:
            self.choice.options = [*self.choice.options, entry.label]
            self.gantt_button.disabled = False
        self._draw(force=True)

    def ended(self, index: SweepIndex) -> None:
        self.stop_button.disabled = True
        self._draw(force=True)

    # -- drawing ---------------------------------------------------------------------------------
    def show_gantt(self) -> None:
        if self.index is None or not self.choice.value:
            return
        entry = next(e for e in self.index.entries if e.label == self.choice.value)
        self.output.clear_output()
        with self.output:
            self.open_gantt(self.folder / str(entry.trace))

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.index is None or (not force and now - self._drawn < REDRAW_S):
            return
        self._drawn = now
        self.table.value = f"<style>{CSS}</style>" + rows_html(self.index, self.headlines)
        counts: dict[str, int] = {}
        for e in self.index.entries:
            counts[e.status] = counts.get(e.status, 0) + 1
        said = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items())
        state, executor = escape(self.index.status), escape(self.index.executor)
        self.status.value = f"<b>sweep {state}</b> ({executor}): {said}"


def rows_html(index: SweepIndex, headlines: dict[str, tuple[float, str]]) -> str:
    rows = []
    for e in index.entries:
        rate, headline = headlines.get(e.label, (None, e.error or ""))
        where = (e.host or "-") + (f" GPU {','.join(map(str, e.gpus))}" if e.gpus else "")
        rows.append([e.label, e.status.replace("_", " "), where, f"{e.partitions_done}/{e.partitions}",
                     "-" if e.wall_s is None else f"{e.wall_s:.1f}", "-" if rate is None else f"{rate:.1f}",
                     headline])
    return table(["run", "status", "host", "partitions", "wall s", "partitions/min", "verdict"], rows,
                 caption=f"{len(index.entries)} runs in the order they start; the folder's index.json "
                         "says the same")
