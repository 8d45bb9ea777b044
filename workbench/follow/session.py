"""One following of a growing cuzk log: read, make the trace, judge it, feed the views.

`step()` reads what came (importers/log_tail.py) into the incremental reader
(importers/cuzk_follow.py). The trace of what was read so far is made again at a bounded
rate (at least `TRACE_EVERY_S` apart, and four times as long as the last one took, so it
never takes more than a fifth of the time however long the log), and the verdict over it
the same way (`VERDICT_EVERY_S`; without the what-if replays, which `workbench diagnose`
of the saved trace adds).

Two recorders carry the spans on: `live` gets every span not shown before, for the live
view (a call still running may show a bar that its later lines move: the saved trace is
right); `settled` gets the spans of calls that later lines no longer change (complete, and
`LOOKAHEAD` complete calls after them), for the journal, so a killed follow leaves a journal
of settled calls. One exception: in a log of several jobs the batch import numbers partitions
in the order of the jobs' names, so a later job whose name sorts first renumbers them, and a
journal recovered after a kill may number them apart from the log's import. The trace saved
at the end is made from every line read, as the batch import makes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from workbench.clock import FakeClock
from workbench.importers.cuzk_follow import CuzkFollower
from workbench.importers.report import ImportFailed
from workbench.trace.container import Trace
from workbench.trace.recorder import Recorder

POLL_S = 0.1  # how long a read waits for new bytes
TRACE_EVERY_S = 0.5
VERDICT_EVERY_S = 1.0
COST_FACTOR = 4  # wait this many times what the last trace or verdict took


class Tail(Protocol):
    @property
    def ended(self) -> bool: ...

    @property
    def mid_line(self) -> bool: ...

    def read(self, timeout: float) -> tuple[bytes, str]: ...

    def close(self) -> None: ...


@dataclass
class Progress:
    """What the views show beside the Gantt."""

    lines: int = 0
    kept: int = 0
    calls: int = 0
    spans: int = 0
    segments: int = 1
    files: int = 1
    headline: str = "waiting for the first cuzk timing line"
    notes: list[str] = field(default_factory=list)
    trace_ms: float = 0.0  # what the last trace and verdict took
    verdict_ms: float = 0.0


class FollowSession:
    def __init__(self, tail: Tail, source: str, until_idle_s: float | None = None,
                 judge: Callable[[Trace], str] | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.tail = tail
        self.follower = CuzkFollower(source)
        if tail.mid_line:
            self.follower.begin_mid_line()
        self.until_idle_s = until_idle_s
        self.judge = judge or headline_of
        self.now = now
        self.live = Recorder(clock=FakeClock(0), nvtx=False)
        self.settled = Recorder(clock=FakeClock(0), nvtx=False)
        self.trace: Trace | None = None
        self.progress = Progress()
        self.changed = False  # the progress moved since the views last looked
        self.busy = False  # between reading bytes and having filed them (a stop waits for the end)
        self._clocks = (self.live.clock, self.settled.clock)
        self._shown: set[tuple[Any, ...]] = set()
        self._settled_partitions: set[int] = set()
        self._last_growth = now()
        self._next_trace = 0.0
        self._next_verdict = 0.0
        self._stale = False  # lines came since the last trace

    @property
    def idle_s(self) -> float:
        return self.now() - self._last_growth

    @property
    def ended(self) -> bool:
        """The input ended (a pipe closed) or stayed still for --until-idle."""
        if self.tail.ended:
            return True
        return self.until_idle_s is not None and self.idle_s >= self.until_idle_s

    def step(self, timeout: float = POLL_S) -> None:
        data, why = self.tail.read(timeout)
        self.busy = True
        try:
            self._take(data, why)
        finally:
            self.busy = False

    def _take(self, data: bytes, why: str) -> None:
        if why:
            self.follower.end_of_file(why)
            self._stale = True
        if data:
            self.follower.feed(data)
            self._last_growth = self.now()
            self._stale = True
        if self._stale and self.now() >= self._next_trace:
            self.refresh()

    def refresh(self, verdict: bool = False) -> None:
        """Make the trace of what was read (and the verdict, when due or asked for)."""
        began = self.now()
        self._stale = False
        try:
            trace, settled = self.follower.snapshot()
        except ImportFailed:
            trace, settled = None, set()
        p = self.progress
        f = self.follower
        p.lines, p.kept, p.files, p.notes = f.lines, f.kept, f.files, list(f.notes)
        if trace is not None:
            self.trace = trace
            p.spans = len(trace.spans)
            segments = trace.meta["import"].get("segments")
            p.segments = len(segments) if segments else 1
            p.calls = self._feed(trace, settled)
        took = self.now() - began  # the trace and the views' share of it
        self._next_trace = self.now() + max(TRACE_EVERY_S, COST_FACTOR * took)
        p.trace_ms = took * 1e3
        self.changed = True
        if trace is not None and (verdict or self.now() >= self._next_verdict):
            began = self.now()
            p.headline = self.judge(trace)
            took = self.now() - began
            p.verdict_ms = took * 1e3
            self._next_verdict = self.now() + max(VERDICT_EVERY_S, COST_FACTOR * took)

    def _feed(self, trace: Trace, settled: set[int]) -> int:
        """New spans to the recorders; returns how many calls the trace has (their finishes)."""
        fresh = settled - self._settled_partitions
        self._settled_partitions |= fresh
        latest = calls = 0
        for s in trace.iter_spans():
            calls += s.name == "finish"
            row = (s.track, s.name, s.start_ns, s.end_ns, s.partition, s.worker, s.attrs)
            key = row[:6]
            latest = max(latest, s.end_ns)
            if key not in self._shown:
                self._shown.add(key)
                self.live.spans.append(row)
            if s.partition in fresh:
                self.settled.spans.append(row)
        for clock in self._clocks:
            if isinstance(clock, FakeClock) and latest > clock.now_ns():
                clock.set(latest)
        return calls

    def finish(self) -> Trace:
        """The input is done: the last line left open is dropped, the final trace and verdict
        made; ImportFailed (naming the source) when no cuzk line was read."""
        self.follower.stop()
        self.tail.close()
        self.refresh(verdict=True)
        if self.trace is None:
            self.follower.snapshot()  # raises, saying what was read instead
        assert self.trace is not None
        return self.trace


def headline_of(trace: Trace) -> str:
    from workbench.analysis.verdict import DiagnoseOptions, diagnose

    return diagnose(trace, DiagnoseOptions(whatif=False)).headline


def open_source(source: str, from_start: bool = True, sleep: Callable[[float], object] = time.sleep) -> Tail:
    """The log to follow: `-` for stdin, else a file (ValueError naming it when it cannot be read)."""
    import sys

    from workbench.importers.log_tail import FileTail, PipeTail

    if source == "-":
        return PipeTail(sys.stdin.fileno())
    if not source.strip():
        raise ValueError("follow: the path is empty (name a log file, or - for stdin)")
    try:
        return FileTail(source, from_start=from_start, sleep=sleep)
    except OSError as err:
        raise ValueError(f"{source}: cannot follow it ({err.strerror or err})") from None


class FollowThread:
    """A following on a thread of its own (the notebook's): reads until the input ends, goes
    quiet for `until_idle_s` or `stop()` is called, then saves the trace to `target` through
    the journal (journaled while it reads, as the command does)."""

    def __init__(self, session: FollowSession, target: Any, fresh: bool = False) -> None:
        import threading

        from workbench.trace.journal import Journal

        self.session = session
        meta = {"outcome": "running", "follow": session.follower.report.source}
        self.journal = Journal.create(target, session.settled, meta=meta)
        self.fresh = fresh
        self.trace_path: Any = None
        self.error: BaseException | None = None
        self.stopped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="workbench-follow", daemon=True)

    def start(self) -> FollowThread:
        self.journal.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopped = True
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set() and not self.session.ended:
                self.session.step()
            trace = self.session.finish()
            trace.meta["outcome"] = "stopped" if self.stopped else "completed"
            self.trace_path = self.journal.finish(trace, fresh=self.fresh)
        except BaseException as err:  # said by the view; the journal keeps what was settled
            self.error = err
            self.journal.close()
