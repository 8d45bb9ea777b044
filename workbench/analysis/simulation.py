"""A small discrete-event simulator: processes as generators, FIFO locks, queues, events,
and host work shared among a fixed number of cores.

A process yields what it waits for (`Work`, `Acquire`, `Get`, `WaitFor`) and is resumed
when it has it. Work items flagged `cpu` share `cores` cores (processor sharing: n items on
c < n cores each progress at c / n); other work (a GPU kernel, a DMA) runs at full rate.
Time is float nanoseconds. Deterministic: ties resolve in the order things were asked.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

Process = Generator[Any, Any, None]


@dataclass(frozen=True, slots=True)
class Work:
    ns: float
    cpu: bool = True


@dataclass(slots=True)
class Lock:
    holder: Process | None = None
    waiters: deque[Process] = field(default_factory=deque)


@dataclass(slots=True)
class Semaphore:
    free: int
    waiters: deque[Process] = field(default_factory=deque)


@dataclass(slots=True)
class Queue:
    items: deque[Any] = field(default_factory=deque)
    getters: deque[Process] = field(default_factory=deque)


@dataclass(slots=True)
class Event:
    is_set: bool = False
    waiters: list[Process] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Acquire:
    what: Lock | Semaphore


@dataclass(frozen=True, slots=True)
class Get:
    queue: Queue


@dataclass(frozen=True, slots=True)
class WaitFor:
    event: Event


class Deadlock(RuntimeError):
    """Processes are blocked and nothing is running that could free them."""


class Simulator:
    def __init__(self, cores: float | None = None) -> None:
        self.cores = cores
        self.now = 0.0
        self._ready: deque[tuple[Process, Any]] = deque()
        self._running: list[list[Any]] = []  # [remaining ns, cpu, process]
        self._blocked = 0

    def spawn(self, process: Process) -> None:
        self._ready.append((process, None))

    # Operations that never block, called by processes directly.
    def release(self, what: Lock | Semaphore) -> None:
        if isinstance(what, Lock):
            if what.waiters:
                what.holder = what.waiters.popleft()
                self._wake(what.holder, self.now)
            else:
                what.holder = None
        elif what.waiters:
            self._wake(what.waiters.popleft(), self.now)
        else:
            what.free += 1

    def put(self, queue: Queue, item: Any) -> None:
        if queue.getters:
            self._wake(queue.getters.popleft(), item)
        else:
            queue.items.append(item)

    def set(self, event: Event) -> None:
        event.is_set = True
        for process in event.waiters:
            self._wake(process, self.now)
        event.waiters.clear()

    def run(self) -> float:
        """Run until every process has ended; returns the time of the last event."""
        while True:
            while self._ready:
                process, value = self._ready.popleft()
                self._step(process, value)
            if not self._running:
                if self._blocked:
                    raise Deadlock(f"{self._blocked} processes blocked at {self.now:.0f} ns")
                return self.now
            self._advance()

    def _wake(self, process: Process, value: Any) -> None:
        self._blocked -= 1
        self._ready.append((process, value))

    def _step(self, process: Process, value: Any) -> None:
        try:
            request = process.send(value)
        except StopIteration:
            return
        if isinstance(request, Work):
            if request.ns > 0:
                self._running.append([float(request.ns), request.cpu, process])
            else:
                self._ready.append((process, None))
            return
        self._blocked += 1
        if isinstance(request, Acquire):
            what = request.what
            if isinstance(what, Lock):
                if what.holder is None and not what.waiters:
                    what.holder = process
                    self._wake(process, self.now)
                else:
                    what.waiters.append(process)
            elif what.free > 0:
                what.free -= 1
                self._wake(process, self.now)
            else:
                what.waiters.append(process)
        elif isinstance(request, Get):
            if request.queue.items:
                self._wake(process, request.queue.items.popleft())
            else:
                request.queue.getters.append(process)
        elif isinstance(request, WaitFor):
            if request.event.is_set:
                self._wake(process, self.now)
            else:
                request.event.waiters.append(process)
        else:
            raise TypeError(f"a process yielded {request!r}, not a simulator request")

    def _advance(self) -> None:
        running = self._running
        on_cpu = sum(1 for item in running if item[1])
        share = 1.0
        if self.cores is not None and on_cpu > self.cores:
            share = self.cores / on_cpu
        step = min(item[0] / (share if item[1] else 1.0) for item in running)
        self.now += step
        still = []
        for item in running:
            rate = share if item[1] else 1.0
            item[0] -= step * rate
            if item[0] <= 1e-6 * max(step, 1.0):
                self._ready.append((item[2], None))
            else:
                still.append(item)
        self._running = still
