"""Clocks. Everything that records time takes a clock so tests can drive it by hand."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ns(self) -> int: ...


class MonotonicClock:
    """Host wall time from the monotonic performance counter, in nanoseconds."""

    __slots__ = ()

    def now_ns(self) -> int:
        return time.perf_counter_ns()


class FakeClock:
    """A clock that only moves when told to; thread-safe so concurrency tests can share it."""

    def __init__(self, start_ns: int = 0) -> None:
        self._now = start_ns
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ns: int) -> int:
        if ns < 0:
            raise ValueError(f"a clock cannot go back (advance by {ns} ns)")
        with self._lock:
            self._now += ns
            return self._now

    def set(self, ns: int) -> None:
        with self._lock:
            if ns < self._now:
                raise ValueError(f"a clock cannot go back ({ns} < {self._now})")
            self._now = ns


DEFAULT_CLOCK = MonotonicClock()
