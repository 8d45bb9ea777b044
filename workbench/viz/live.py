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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from bokeh.core.property.validation import validate
from bokeh.layouts import column

from workbench.trace.container import Trace
from workbench.trace.recorder import Recorder
from workbench.viz.aggregate import overview
from workbench.viz.bars import BarBuilder, Bars
from workbench.viz.counters import CounterView
from workbench.viz.distributions import TITLE, DistributionView
from workbench.viz.gantt import PHASE_KINDS, GanttView, wire
from workbench.viz.palette import pipeline_kinds

PERIOD_S = 0.1
BOX_REFRESH_S = 1.0  # quantiles are recomputed over every duration seen: not every tick
FOLLOW_MARGIN = 1.03  # the axis is extended once the run comes this close to its end
FOLLOW_STEP = 1.25  # to this factor past the run's time so far
VIEW_SHARE = 0.03  # the live view's updates may take this share of the interpreter's time
FULL_RATE_BARS = 400  # bars the browser redraws at ten updates a second (then fewer, to 1 Hz)
SLOWEST_S = 1.0  # however dear, the view updates at least once a second
# The browser redraws every bar it holds at each update: past LIVE_BARS the oldest spans are
# shown binned (as a report's overview: each bin its busiest phase, as opaque as it was busy,
# its hover counting the spans) and the newest RECENT_BARS stay span by span.
LIVE_BARS = 4_000  # chromium takes about 40 µs a bar per update on a 2-core host
RECENT_BARS = 1_500
BIN_BARS = 1_000
# The strip of points under each phase's box: boxes use every duration, points the first few.
LIVE_POINTS = 150


@dataclass
class UpdateStats:
    """What the live view cost the UI side, for the benchmark and the curious."""

    updates: int = 0
    deferred: int = 0  # polls that left their spans for a later update
    spans: int = 0
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the updating thread's CPU seconds
    # CPU seconds by part of an update, summed: serialising a change for a server's sessions
    # happens as it is made, so each part's figure includes it.
    parts: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        began = time.thread_time()
        try:
            yield
        finally:
            self.parts[name] = self.parts.get(name, 0.0) + time.thread_time() - began

    @property
    def cpu_mean_ms(self) -> float:
        return 1e3 * sum(self.cpu) / len(self.cpu) if self.cpu else 0.0

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
        paced: bool = True,
    ) -> None:
        self.recorder = recorder
        self.paced = paced  # False: an update at every poll, whatever it costs (for measuring)
        self.origin_ns = recorder.origin_ns
        self.cursor = (0, 0, 0)
        self.builder = BarBuilder(self.origin_ns, nesting=False, worker_gpu=worker_gpu)
        self.gantt = GanttView(lanes, title=title, name=name, kinds=pipeline_kinds())
        self.counters = CounterView(x_range=self.gantt.figure.x_range)
        self.distributions = DistributionView(label=label, points_per_phase=LIVE_POINTS)
        if label:
            self.distributions.title.text += f" (points: the first {LIVE_POINTS:,} of each phase)"
        else:
            self.distributions.title.text = f"{TITLE} (points: the first {LIVE_POINTS:,} of each phase)"
        self.layout = column(self.gantt.figure, self.counters.layout, self.distributions.figure,
                             sizing_mode="stretch_width")
        self.stats = UpdateStats()
        self.following = True
        # Values this view put on the axis; the browser may echo one back after the next is set.
        self._placed: deque[float] = deque([0.0, 1.0], maxlen=64)
        self._last_boxes = 0.0
        self._due = 0.0
        self._spent = (0.0, -1)  # the updating thread's CPU seconds when its last update ended
        self._built: list[Bars] = []  # every bar so far, span by span
        self._recent: list[Bars] = []  # those the browser holds span by span
        self._bins: Bars | None = None  # the older ones, binned
        self._binned_span_s = 1.0
        self.binned_spans = 0
        self._title = title
        self._gantt_title: Any = self.gantt.figure.title  # a Title (typed as Title | str)
        self.binned_before_s = 0.0  # bars starting before this are shown binned
        self.compactions = 0
        x_range = self.gantt.x_range
        x_range.on_change("start", self._range_moved)
        x_range.on_change("end", self._range_moved)

    def _range_moved(self, attr: str, old: Any, new: Any) -> None:
        if new is None or not any(abs(new - v) <= 1e-9 * max(1.0, abs(v)) for v in self._placed):
            self.following = False

    def tick(self, final: bool = False) -> int:
        """A poll (ten a second): update now when due, else leave what arrived for a later
        poll; the last poll (`final`) always updates. Returns how many spans were streamed.

        Due when the last update is PERIOD_S old, and also no sooner than its cost over
        VIEW_SHARE (the poller shares the interpreter with the pipeline's threads): the CPU
        this thread spent since the last update ended, so that sending that update's changes
        (a server's loop writes them after the update returns) counts too; nor while
        the browser holds more bars than it redraws at ten a second without taking a core's
        share of its own (it redraws every bar at each update): past FULL_RATE_BARS the
        updates slow in proportion. Everything recorded still arrives, in fewer batches."""
        began = time.perf_counter()
        if not final and not self.due():
            self.stats.deferred += 1
            return 0
        streamed = self.update(final)
        # CPU, not wall, time: a loaded host must not slow the view.
        spent, thread = time.thread_time(), threading.get_ident()
        cost = spent - self._spent[0] if self._spent[1] == thread else self.stats.cpu[-1]
        self._spent = (spent, thread)
        crowd = self.gantt.bar_count() / FULL_RATE_BARS
        wait = max(PERIOD_S * 0.9, cost / VIEW_SHARE, PERIOD_S * crowd) if self.paced else PERIOD_S * 0.9
        self._due = began + min(wait, SLOWEST_S)
        return streamed

    def due(self) -> bool:
        """Whether the next poll would update (not one to leave for later): a poller on another
        thread than the document's can ask before taking the document's lock."""
        return time.perf_counter() >= self._due

    def update(self, final: bool = False) -> int:
        """Stream what was recorded since the last call; returns how many spans that was."""
        began, began_cpu = time.perf_counter(), time.thread_time()
        spans, _, counters, self.cursor = self.recorder.drain(self.cursor)
        part = self.stats.part
        with validate(False):  # the columns are ours, built to fit (the flag is the process's)
            if spans:
                with part("bars"):
                    bars = self.builder.build(Trace.from_rows(spans))
                with part("gantt"):
                    if self.builder.relabelled:  # kernels that overtook others take their entries
                        self.gantt.relabel(self.builder.relabelled)
                        # The bars kept for compaction too: it sends the recent ones afresh.
                        for held in {id(b): b for b in (*self._built, *self._recent)}.values():
                            held.relabel(self.builder.relabelled, PHASE_KINDS)
                        for phase, (_, color) in self.builder.relabelled.items():
                            self.distributions.colors[phase] = color
                    self.gantt.stream(bars)
                self._built.append(bars)
                self._recent.append(bars)
                if self.gantt.bar_count() > LIVE_BARS:
                    with part("compaction"):
                        self._compact()
                refresh = final or began - self._last_boxes >= BOX_REFRESH_S
                with part("distributions"):
                    self.distributions.stream(bars, refresh_boxes=refresh)
                if refresh:
                    self._last_boxes = began
            elif final:
                with part("distributions"):
                    self.distributions.boxes.data = self.distributions.boxes_data()
            if counters:
                with part("counters"):
                    self.counters.stream(counters, self.origin_ns)
            if self.following:
                with part("axis"):
                    self._follow()
        self.stats.updates += 1
        self.stats.spans += len(spans)
        self.stats.seconds.append(time.perf_counter() - began)
        self.stats.cpu.append(time.thread_time() - began_cpu)
        return len(spans)

    def _compact(self) -> None:
        """Bin all but the newest RECENT_BARS bars, sending the Gantt's bars afresh: now and
        then, instead of a browser redrawing ever more bars ten times a second. Only the
        stretch that became old since the last time is binned (at the same bin width), unless
        the bins have doubled since they were last made from every old span."""
        recent = Bars.concat(self._recent)
        cut = float(np.sort(recent.left)[-RECENT_BARS])
        old = recent.left < cut
        if self._bins is None or len(self._bins) > 2 * BIN_BARS:
            everything = self.spans_built()
            before = everything.left < cut
            self._bins = overview(everything.take(before), BIN_BARS).bars
            self._binned_span_s = max(cut - float(everything.left.min()), 1e-9)
            self.binned_spans = int(before.sum())
        else:
            budget = max(int(BIN_BARS * (cut - self.binned_before_s) / self._binned_span_s), 20)
            self._bins = Bars.concat([self._bins, overview(recent.take(old), budget).bars])
            self.binned_spans += int(old.sum())
        self._recent = [recent.take(~old)]
        shown = Bars.concat([self._bins, self._recent[0]])
        for source, data in zip(self.gantt.sources, self.gantt.columns(shown), strict=True):
            source.data = wire(data)
        self.binned_before_s = cut
        self.compactions += 1
        # Short: the title shares its line with the toolbar.
        self._gantt_title.text = (f"{self._title} (before {cut:.1f} s: {self.binned_spans:,} spans binned, "
                                  f"busiest phase, hover for counts)")

    def spans_built(self) -> Bars:
        """Every bar the view has built, span by span (the browser may hold some binned)."""
        if len(self._built) > 1:
            self._built = [Bars.concat(self._built)]
        return self._built[0] if self._built else Bars.empty()

    def _follow(self) -> None:
        # The axis grows in steps, not at every update: each change redraws every figure on it.
        now_s = (self.recorder.now_ns() - self.origin_ns) / 1e9
        x_range = self.gantt.x_range
        if now_s * FOLLOW_MARGIN <= x_range.end and x_range.start == 0.0:
            return
        end = max(now_s * FOLLOW_STEP, 0.5)
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
        self.cpu_s = 0.0  # its thread's CPU seconds so far (what polling has cost)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                ticked = self.tick()
                self.cpu_s = time.thread_time()
                if not ticked:
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
