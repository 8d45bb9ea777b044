"""A program recorded from a notebook (`wb.record([...])`): its live Gantt fills in while it
runs, as a run's does in the panel. The program's end is waited for on a thread of its own;
the poller (live.py) streams what the drain thread put into the recorder. Returns at once:
`wait()` gives the trace, `stop()` passes SIGTERM on to the program.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.attach.build import build_shims
from workbench.attach.session import Session
from workbench.attach.session import cuda_kinds as parse_cuda_kinds
from workbench.trace.container import Trace
from workbench.viz.live import LiveView, Poller


class LiveRecording:
    def __init__(self, command: Sequence[str], save: str | Path | None = None, cuda: bool = True,
                 locks: str = "contended", cuda_kinds: str = "all", cuda_mode: str = "activity") -> None:
        kinds = parse_cuda_kinds(cuda_kinds)
        shims = build_shims(cuda=cuda)
        self.notes = list(shims.notes)
        self.session = Session(list(command), shims, locks=locks, cuda_kinds=kinds, cuda_mode=cuda_mode)
        self.path = Path(save) if save is not None else None
        self.live = LiveView(self.session.recorder, title=f"live: {' '.join(command)[:80]}")
        self.trace: Trace | None = None
        self.trace_path: Path | None = None
        self.exit_code: int | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._waiter = threading.Thread(target=self._wait, name="workbench-record", daemon=True)
        self._poller = Poller(self._tick)
        self._journal: Any = None

    @property
    def widget(self) -> Any:
        from workbench.viz.kernel_widget import KernelDocument

        return KernelDocument(self.live.layout)

    def start(self) -> LiveRecording:
        if self.path is not None:
            from workbench.trace.journal import Journal

            self._journal = Journal.create(self.path, self.session.recorder,
                                           config={"command": self.session.argv}).start()
        try:
            self.session.start()
        except BaseException:
            if self._journal is not None:
                self._journal.close()
            self.session.close()
            raise
        self._waiter.start()
        self._poller.start()
        return self

    def _wait(self) -> None:
        try:
            self.exit_code = self.session.wait()
            self.trace = self.session.trace()
            if self._journal is not None:
                self.trace_path = Path(self._journal.finish(self.trace, fresh=True))
        except BaseException as err:  # kept for wait() to raise, on the caller's thread
            self.error = err
            if self._journal is not None:
                self._journal.close()
        finally:
            self.session.close()
            self._done.set()

    def _tick(self) -> bool:
        done = self._done.is_set()  # read first: the last update then misses nothing
        self.live.tick(final=done)
        return not done

    def stop(self) -> None:
        process = self.session.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float | None = None) -> Trace | None:
        """The trace once the program has ended (None if `timeout` passed first)."""
        if not self._done.wait(timeout):
            return None
        self._poller.join(10)
        if self.error is not None:
            raise self.error
        return self.trace
