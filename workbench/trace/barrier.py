"""An instrumented, reusable barrier for a fixed set of named parties.

Each party's wait (arrival to release) is a span on the barrier's track carrying the party's
name and its arrival order; every release is an instant naming the last to arrive, so
arrival skew (who waited for whom, and how long) can be read straight from the trace.
`abort()` breaks the barrier: every waiter, and every later arrival, gets BarrierBroken.

    barrier = InstrumentedBarrier(("gpu", "prep"), recorder, track=barrier_track(0))  # model/tracks.py
    barrier.wait("prep", partition=3)   # in the prep thread
    barrier.wait("gpu", partition=3)    # in the GPU thread
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.events import NO_ID
from workbench.trace.recorder import Recorder


class BarrierBroken(RuntimeError):
    """The barrier was aborted while this party waited at it (or before it arrived)."""


@dataclass(frozen=True)
class BarrierStatistics:
    track: str
    parties: tuple[str, ...]
    waiting: tuple[str, ...]  # parties that have arrived in the current round
    rounds: int  # completed releases
    waited_ns: dict[str, int]  # total wait per party over completed rounds
    last_to_arrive: dict[str, int]  # how often each party was the one everyone waited for
    broken: bool


class InstrumentedBarrier:
    def __init__(
        self, parties: Sequence[str], recorder: Recorder, track: str, worker: int = NO_ID,
    ) -> None:
        if len(parties) < 2 or len(set(parties)) != len(parties):
            raise ValueError(f"a barrier needs two or more distinct parties, got {parties!r}")
        self.parties = tuple(parties)
        self.track = track
        self.worker = worker
        self._recorder = recorder
        self._clock = recorder.clock
        self._cond = threading.Condition(threading.Lock())
        self._arrived: dict[str, int] = {}
        self._round = 0
        self._released_ns = 0
        self._broken: str | None = None
        self._waited = dict.fromkeys(self.parties, 0)
        self._last = dict.fromkeys(self.parties, 0)

    def wait(self, party: str, partition: int = NO_ID) -> int:
        """Block until every party has arrived; returns the wait in ns."""
        if party not in self._waited:
            raise ValueError(f"unknown barrier party {party!r}; parties are {self.parties}")
        recorder = self._recorder
        with self._cond:
            if self._broken is not None:
                raise BarrierBroken(f"barrier {self.track} broken: {self._broken}")
            if party in self._arrived:
                raise RuntimeError(f"party {party!r} arrived twice at {self.track}")
            arrived = self._clock.now_ns()
            order = len(self._arrived)
            self._arrived[party] = arrived
            my_round = self._round
            recorder.nvtx.push("barrier_wait")
            try:
                if len(self._arrived) == len(self.parties):
                    self._release(party, arrived, partition)
                else:
                    while self._round == my_round:
                        if self._broken is not None:
                            self._arrived.pop(party, None)
                            raise BarrierBroken(f"barrier {self.track} broken: {self._broken}")
                        self._cond.wait()
            finally:
                recorder.nvtx.pop()
            released = self._released_ns
        recorder.add_span(
            self.track, "wait", arrived, released, partition, self.worker,
            {"party": party, "arrival": order},
        )
        return released - arrived

    def _release(self, last: str, now: int, partition: int) -> None:
        for party, arrived in self._arrived.items():
            self._waited[party] += now - arrived
        self._last[last] += 1
        self._released_ns = now
        self._arrived = {}
        self._round += 1
        self._cond.notify_all()
        self._recorder.instant(
            self.track, "release", partition, self.worker, {"last": last}, ts_ns=now,
        )

    def abort(self, reason: str = "stopped") -> None:
        with self._cond:
            self._broken = reason
            self._cond.notify_all()

    def statistics(self) -> BarrierStatistics:
        with self._cond:
            return BarrierStatistics(
                track=self.track, parties=self.parties, waiting=tuple(self._arrived),
                rounds=self._round, waited_ns=dict(self._waited),
                last_to_arrive=dict(self._last), broken=self._broken is not None,
            )
