"""Ctrl-C, SIGTERM and SIGHUP stop every command the same way: a KeyboardInterrupt in the main
thread, so a run stops within the phase in flight and saves its trace, an import ends at
once, and the command exits 130 with one line (a service manager's stop, a closed terminal).

Python turns only SIGINT into KeyboardInterrupt; the others would end the process at once,
without a word, and lose the last second the run's journal had not flushed. Once a run
has ended and its trace is being made and saved, the signals are held instead (noted, not
raised): a second Ctrl-C must not throw away what the first one stopped the run to keep. The
command then exits 130 as soon as the trace is on disk.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

STOPPING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)
ALL = (signal.SIGINT, *STOPPING)


def _never() -> bool:
    return False


@dataclass
class Stops:
    """The stop signals a command received, and whether they are held right now."""

    received: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # those that came while holding
    holding: Callable[[], bool] = _never

    def handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        if self.holding():
            if not self.held:  # said once: a second Ctrl-C that seems to do nothing is explained
                print("workbench: saving the trace: it is written whole first, then the command stops",
                      file=sys.stderr, flush=True)
            self.held.append(name)
            return
        raise KeyboardInterrupt

    @contextmanager
    def hold(self, when: Callable[[], bool] = lambda: True) -> Iterator[list[str]]:
        """While inside, signals that come when `when()` is true are only noted (in the list
        returned); the predicate is asked in the handler, so it must not take locks."""
        self.holding = when
        try:
            yield self.held
        finally:
            self.holding = _never

    def said(self, names: list[str] | None = None) -> str:
        """How the stop is told: by the first signal's name; Ctrl-C's, as ever, without one."""
        names = self.received if names is None else names
        return f" by {names[0]}" if names and names[0] != "SIGINT" else ""


@contextmanager
def signals_as_interrupt() -> Iterator[Stops]:
    """While inside, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread
    (unless held); each one's name is noted in the Stops returned."""
    stops = Stops()
    if threading.current_thread() is not threading.main_thread():
        yield stops  # signal handlers can only be set from the main thread
        return
    previous = {s: signal.signal(s, stops.handle) for s in ALL}
    try:
        yield stops
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
