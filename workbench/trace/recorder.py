"""The recorder: a thread-safe, cheap append-only log of spans, instants and counters.

Appending a tuple to a list is atomic under the interpreter lock, so recording needs no
lock of its own; readers take consistent prefixes by length (`drain`) while writers go on.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from workbench.clock import DEFAULT_CLOCK, Clock, MonotonicClock
from workbench.events import NO_ID
from workbench.trace.nvtx_ranges import NoNvtx, Nvtx, load_nvtx

# Raw rows, kept as tuples because building them is the whole per-event cost.
SpanRow = tuple[str, str, int, int, int, int, "dict[str, Any] | None"]
InstantRow = tuple[str, str, int, int, int, "dict[str, Any] | None"]
CounterRow = tuple[str, str, int, float]


class SpanScope:
    """Context manager for one span; `attrs` may be filled in while the span is open."""

    __slots__ = ("_now", "_spans", "attrs", "name", "partition", "start_ns", "track", "worker")

    def __init__(
        self, recorder: Recorder, track: str, name: str, partition: int, worker: int,
        attrs: dict[str, Any] | None,
    ) -> None:
        self._now = recorder.now_ns
        self._spans = recorder.spans
        self.track = track
        self.name = name
        self.partition = partition
        self.worker = worker
        self.attrs = attrs
        self.start_ns = 0

    def __enter__(self) -> SpanScope:
        self.start_ns = self._now()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        end = self._now()
        attrs = self.attrs
        if exc_type is not None:
            attrs = dict(attrs or {})
            attrs["error"] = f"{exc_type.__name__}: {exc}"
        self._spans.append((self.track, self.name, self.start_ns, end, self.partition, self.worker, attrs))

    def set(self, key: str, value: Any) -> None:
        if self.attrs is None:
            self.attrs = {}
        self.attrs[key] = value


class NvtxSpanScope(SpanScope):
    """A span that is also an NVTX range (only used when nvtx imported)."""

    __slots__ = ("_nvtx",)

    def __init__(
        self, recorder: Recorder, track: str, name: str, partition: int, worker: int,
        attrs: dict[str, Any] | None,
    ) -> None:
        super().__init__(recorder, track, name, partition, worker, attrs)
        self._nvtx = recorder.nvtx

    def __enter__(self) -> SpanScope:
        self._nvtx.push(self.name)
        self.start_ns = self._now()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        super().__exit__(exc_type, exc, tb)
        self._nvtx.pop()


class NullScope:
    """What a disabled recorder hands out: enters and exits, records nothing."""

    __slots__ = ("attrs",)

    def __init__(self) -> None:
        self.attrs: dict[str, Any] | None = None

    def __enter__(self) -> NullScope:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        return None

    def set(self, key: str, value: Any) -> None:
        pass


class Recorder:
    def __init__(
        self, clock: Clock = DEFAULT_CLOCK, enabled: bool = True, nvtx: bool = True,
    ) -> None:
        self.clock = clock
        self.enabled = enabled
        self.nvtx: Nvtx | NoNvtx = load_nvtx(nvtx and enabled)
        # The monotonic clock's reading is called directly: a method hop costs ~10% a span.
        self.now_ns = time.perf_counter_ns if isinstance(clock, MonotonicClock) else clock.now_ns
        self._scope = NvtxSpanScope if self.nvtx.available else SpanScope
        self.spans: list[SpanRow] = []
        self.instants: list[InstantRow] = []
        self.counters: list[CounterRow] = []
        self.thread_names: dict[str, str] = {}
        self.origin_ns = clock.now_ns()
        self._names_lock = threading.Lock()

    def span(
        self, track: str, name: str, partition: int = NO_ID, worker: int = NO_ID,
        attrs: dict[str, Any] | None = None,
    ) -> SpanScope | NullScope:
        if not self.enabled:
            return NullScope()
        return self._scope(self, track, name, partition, worker, attrs)

    def add_span(
        self, track: str, name: str, start_ns: int, end_ns: int, partition: int = NO_ID,
        worker: int = NO_ID, attrs: dict[str, Any] | None = None,
    ) -> None:
        if self.enabled:
            self.spans.append((track, name, start_ns, end_ns, partition, worker, attrs))

    def add_spans(self, rows: list[SpanRow]) -> None:
        """Many finished spans at once (a drain of a recorded program's ring)."""
        if self.enabled:
            self.spans.extend(rows)

    def instant(
        self, track: str, name: str, partition: int = NO_ID, worker: int = NO_ID,
        attrs: dict[str, Any] | None = None, ts_ns: int | None = None,
    ) -> None:
        if self.enabled:
            ts = self.now_ns() if ts_ns is None else ts_ns
            self.instants.append((track, name, ts, partition, worker, attrs))

    def counter(self, track: str, name: str, value: float, ts_ns: int | None = None) -> None:
        if self.enabled:
            ts = self.now_ns() if ts_ns is None else ts_ns
            self.counters.append((track, name, ts, float(value)))

    def name_track(self, track: str, thread_name: str) -> None:
        """Remember which thread a track belongs to (exporters write it as metadata)."""
        with self._names_lock:
            self.thread_names[track] = thread_name

    def thread_names_now(self) -> dict[str, str]:
        """A copy of the thread names, safe to read while threads name their tracks."""
        with self._names_lock:
            return dict(self.thread_names)

    def drain(self, cursor: tuple[int, int, int]) -> tuple[
        list[SpanRow], list[InstantRow], list[CounterRow], tuple[int, int, int]
    ]:
        """Rows recorded since `cursor`, and the cursor to pass next time (UI side polling)."""
        s, i, c = len(self.spans), len(self.instants), len(self.counters)
        return (
            self.spans[cursor[0]:s], self.instants[cursor[1]:i], self.counters[cursor[2]:c],
            (s, i, c),
        )
