"""SIGTERM and SIGHUP stop a run as Ctrl-C does: the pipeline stops within the phase in flight
and the trace of everything recorded is saved (a service manager's stop, a closed terminal).

Python turns only SIGINT into KeyboardInterrupt; the others would end the process at once and
lose the trace of the run (its journal keeps all but the last second: trace/journal.py); during
the save, `deferred` holds every signal back so the trace is written whole.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOPPING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


@contextmanager
def signals_as_interrupt(received: list[str]) -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread; the name of
    each signal received is appended to `received`."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in STOPPING}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def deferred(received: list[str], notice: str) -> Iterator[None]:
    """While inside (a save), SIGINT, SIGTERM and SIGHUP are noted in `received` and `notice`
    is said once on stderr, but nothing is interrupted: what is being written is written whole."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: FrameType | None) -> None:
        if not received:
            print(f"workbench: {notice}", file=sys.stderr, flush=True)
        received.append(signal.Signals(signum).name)

    previous = {s: signal.signal(s, note) for s in (signal.SIGINT, *STOPPING)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
