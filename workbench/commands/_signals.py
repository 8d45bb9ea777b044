"""SIGTERM and SIGHUP stop a run as Ctrl-C does: the pipeline stops within the phase in flight
and the trace of everything recorded is saved (a service manager's stop, a closed terminal).

Python turns only SIGINT into KeyboardInterrupt; the others would end the process at once and
lose the trace, which lives in memory until the run ends.
"""

from __future__ import annotations

import signal
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
