"""An instrumented, first-come-first-served GPU mutex.

It records, on its own track, every wait (from asking to getting), every hold (from
getting to giving back) and every hand-off (a release while someone waits, naming who gets
it next). FIFO order makes hand-offs explicit, which is what two workers taking turns need.
`abort()` wakes every waiter with `MutexAborted` so a stopping pipeline never hangs on it.

Usable on its own; the pipeline names its track by the track grammar (model/tracks.py,
`mutex_track(gpu)`), and without a track the mutex records on one named after itself:

    recorder = Recorder()
    mutex = InstrumentedMutex("gpu0", recorder, track=mutex_track(0))
    with mutex.hold(worker=0, partition=7):
        run_kernels()
    print(mutex.statistics())
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from workbench.events import NO_ID
from workbench.trace.recorder import Recorder


class MutexAborted(RuntimeError):
    """The mutex was aborted while this thread waited for it (or before it asked)."""


@dataclass(frozen=True)
class MutexStatistics:
    name: str
    owner: int | None  # worker holding it now
    waiting: int  # threads waiting now
    acquisitions: int
    handoffs: int  # releases that went straight to a waiter
    held_ns: int  # total time held (completed holds)
    waited_ns: int  # total time waited (completed waits)
    max_wait_ns: int
    aborted: bool


class _Ticket:
    __slots__ = ("granted", "worker")

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.granted = False


class InstrumentedMutex:
    def __init__(self, name: str, recorder: Recorder, track: str | None = None) -> None:
        self.name = name
        self.track = track or name
        self._recorder = recorder
        self._clock = recorder.clock
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[_Ticket] = deque()
        self._owner: int | None = None
        self._owner_partition = NO_ID
        self._acquired_ns = 0
        self._released_ns: int | None = None
        self._aborted: str | None = None
        self._acquisitions = 0
        self._handoffs = 0
        self._held_ns = 0
        self._waited_ns = 0
        self._max_wait_ns = 0

    def acquire(self, worker: int, partition: int = NO_ID) -> None:
        recorder = self._recorder
        with self._cond:
            if self._aborted is not None:
                raise MutexAborted(f"mutex {self.name} aborted: {self._aborted}")
            asked = self._clock.now_ns()
            recorder.nvtx.push("mutex_wait")
            try:
                if self._owner is not None or self._queue:
                    ticket = _Ticket(worker)
                    self._queue.append(ticket)
                    while not ticket.granted:
                        if self._aborted is not None:
                            self._queue.remove(ticket)
                            raise MutexAborted(f"mutex {self.name} aborted: {self._aborted}")
                        self._cond.wait()
            finally:
                recorder.nvtx.pop()
            got = self._clock.now_ns()
            self._owner = worker
            self._owner_partition = partition
            self._acquired_ns = got
            self._acquisitions += 1
            waited = got - asked
            self._waited_ns += waited
            self._max_wait_ns = max(self._max_wait_ns, waited)
            attrs = {"gap_ns": got - self._released_ns} if self._released_ns is not None else None
        recorder.add_span(self.track, "wait", asked, got, partition, worker, attrs)
        recorder.nvtx.push("mutex_hold")

    def release(self) -> None:
        recorder = self._recorder
        recorder.nvtx.pop()
        with self._cond:
            if self._owner is None:
                raise RuntimeError(f"mutex {self.name} released while not held")
            now = self._clock.now_ns()
            worker, partition, start = self._owner, self._owner_partition, self._acquired_ns
            self._held_ns += now - start
            self._released_ns = now
            self._owner = None
            next_worker = None
            if self._queue:
                ticket = self._queue.popleft()
                ticket.granted = True
                # Reserve the lock for the head of the queue so no late arrival barges in.
                self._owner = ticket.worker
                next_worker = ticket.worker
                self._handoffs += 1
                self._cond.notify_all()
        recorder.add_span(self.track, "hold", start, now, partition, worker)
        if next_worker is not None:
            recorder.instant(
                self.track, "handoff", partition, worker,
                {"from_worker": worker, "to_worker": next_worker}, ts_ns=now,
            )

    @contextmanager
    def hold(self, worker: int, partition: int = NO_ID) -> Iterator[None]:
        self.acquire(worker, partition)
        try:
            yield
        finally:
            self.release()

    def abort(self, reason: str = "stopped") -> None:
        """Wake every waiter with MutexAborted; later acquires fail too. The holder keeps it."""
        with self._cond:
            self._aborted = reason
            self._cond.notify_all()

    def statistics(self) -> MutexStatistics:
        with self._cond:
            # A reserved-but-not-yet-running waiter shows as owner: it is the next to run.
            return MutexStatistics(
                name=self.name, owner=self._owner, waiting=len(self._queue),
                acquisitions=self._acquisitions, handoffs=self._handoffs,
                held_ns=self._held_ns, waited_ns=self._waited_ns,
                max_wait_ns=self._max_wait_ns, aborted=self._aborted is not None,
            )
