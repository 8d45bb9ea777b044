"""The live view of a running pipeline, and the poller that feeds it.

Pipeline threads only append rows to the recorder. The poller, a thread of the UI side,
drains what was recorded since its last look about ten times a second and streams it into
the Bokeh sources in one batch per source, so the browser gets a handful of messages per
tick however many spans were recorded, and no pipeline thread ever touches a Bokeh object.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bokeh.layouts import column

from workbench.trace.container import Trace
from workbench.trace.recorder import Recorder
from workbench.viz.bars import BarBuilder
from workbench.viz.counters import CounterView
from workbench.viz.distributions import DistributionView
from workbench.viz.gantt import GanttView
from workbench.viz.palette import pipeline_kinds

PERIOD_S = 0.1
BOX_REFRESH_S = 0.5  # quantiles are recomputed over every duration seen: not every tick
FOLLOW_MARGIN = 1.03


@dataclass
class UpdateStats:
    """What the live view cost the UI side, for the benchmark and the curious."""

    updates: int = 0
    spans: int = 0
    seconds: list[float] = field(default_factory=list)

    @property
    def mean_ms(self) -> float:
        return 1e3 * sum(self.seconds) / len(self.seconds) if self.seconds else 0.0

    @property
    def max_ms(self) -> float:
        return 1e3 * max(self.seconds) if self.seconds else 0.0


class LiveView:
    """Gantt, counters and distributions of a recorder, brought up to date by `update()`.

    The view follows the run (the x axis grows with it) until someone zooms or pans, after
    which it leaves the axis where they put it.
    """

    def __init__(
        self, recorder: Recorder, lanes: list[str] | None = None, title: str = "live Gantt",
        name: str = "gantt", worker_gpu: Mapping[int, int] | None = None, label: str = "",
    ) -> None:
        self.recorder = recorder
        self.origin_ns = recorder.origin_ns
        self.cursor = (0, 0, 0)
        self.builder = BarBuilder(self.origin_ns, nesting=False, worker_gpu=worker_gpu)
        self.gantt = GanttView(lanes, title=title, name=name, kinds=pipeline_kinds())
        self.counters = CounterView(x_range=self.gantt.figure.x_range)
        self.distributions = DistributionView(label=label)
        self.layout = column(self.gantt.figure, self.counters.layout, self.distributions.figure,
                             sizing_mode="stretch_width")
        self.stats = UpdateStats()
        self.following = True
        # Values this view put on the axis; the browser may echo one back after the next is set.
        self._placed: deque[float] = deque([0.0, 1.0], maxlen=64)
        self._last_boxes = 0.0
        x_range = self.gantt.x_range
        x_range.on_change("start", self._range_moved)
        x_range.on_change("end", self._range_moved)

    def _range_moved(self, attr: str, old: Any, new: Any) -> None:
        if new is None or not any(abs(new - v) <= 1e-9 * max(1.0, abs(v)) for v in self._placed):
            self.following = False

    def update(self, final: bool = False) -> int:
        """Stream what was recorded since the last call; returns how many spans that was."""
        began = time.perf_counter()
        spans, _, counters, self.cursor = self.recorder.drain(self.cursor)
        if spans:
            bars = self.builder.build(Trace.from_rows(spans))
            if self.builder.relabelled:  # kernels that overtook others take their entries
                self.gantt.relabel(self.builder.relabelled)
                for phase, (_, color) in self.builder.relabelled.items():
                    self.distributions.colors[phase] = color
            self.gantt.stream(bars)
            refresh = final or began - self._last_boxes >= BOX_REFRESH_S
            self.distributions.stream(bars, refresh_boxes=refresh)
            if refresh:
                self._last_boxes = began
        elif final:
            self.distributions.boxes.data = self.distributions.boxes_data()
        if counters:
            self.counters.stream(counters, self.origin_ns)
        if self.following:
            self._follow()
        self.stats.updates += 1
        self.stats.spans += len(spans)
        self.stats.seconds.append(time.perf_counter() - began)
        return len(spans)

    def _follow(self) -> None:
        now_s = (self.recorder.now_ns() - self.origin_ns) / 1e9
        end = max(now_s * FOLLOW_MARGIN, 0.5)
        x_range = self.gantt.x_range
        self._placed.append(end)
        x_range.start = 0.0
        x_range.end = end


class Poller:
    """Calls `tick` every `period` seconds on a thread of its own until it returns False or
    `stop()` is called; what `tick` raises is kept in `error` and ends the polling."""

    def __init__(
        self, tick: Callable[[], bool], period: float = PERIOD_S, name: str = "workbench-live",
    ) -> None:
        self.tick = tick
        self.period = period
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                if not self.tick():
                    return
                self._stop.wait(max(self.period - (time.monotonic() - began), 0.0))
        except BaseException as err:  # shown by the panel; a view bug must not go unseen
            self.error = err

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
