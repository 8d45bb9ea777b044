"""The running summary under a live Gantt: the summary of the run so far, and when to refresh it.

A refresh summarises every span recorded so far. Its trace is grown as the run records
(trace/growing.py), so each refresh turns only the rows recorded since the one before into
columns, where rebuilding the trace from the recorder each time was most of its cost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from workbench.analysis.summary import summarize
from workbench.trace.growing import GrowingTrace
from workbench.trace.recorder import Recorder
from workbench.viz.tables import summary_html

SUMMARY_REFRESH_S = 2.0
SUMMARY_SHARE = 0.01  # the running summary may take this share of the interpreter at most


class RunningSummary:
    """The summary of a recorder's run so far, as HTML (its headline says running, not "unknown")."""

    def __init__(self, recorder: Recorder) -> None:
        self.trace = GrowingTrace(recorder, meta={"outcome": "running"})

    def html(self) -> str:
        return summary_html(summarize(self.trace.update()))


class SummaryPacer:
    """When to refresh the running summary: every SUMMARY_REFRESH_S, or less often when one
    refresh costs more than SUMMARY_SHARE of the time between them (the progress bar says the
    figures that change every moment)."""

    def __init__(self, period: float = SUMMARY_REFRESH_S) -> None:
        self.period = period
        self.count = 0
        self._next = 0.0

    def due(self) -> bool:
        return time.monotonic() >= self._next

    @contextmanager
    def timed(self) -> Iterator[None]:
        began = time.thread_time()  # CPU, not wall: a loaded host must not starve the summary
        try:
            yield
        finally:
            cost = time.thread_time() - began
            self.count += 1
            self._next = time.monotonic() + max(self.period, cost / SUMMARY_SHARE)
