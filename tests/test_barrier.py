import threading

import pytest
from conftest import wait_until

from workbench.clock import FakeClock
from workbench.trace import BarrierBroken, InstrumentedBarrier, Recorder, Trace


def make():
    clock = FakeClock(0)
    recorder = Recorder(clock=clock, nvtx=False)
    return clock, recorder, InstrumentedBarrier(("gpu", "prep"), recorder, "barrier/worker0", worker=0)


def test_arrivals_waits_and_release_are_recorded():
    clock, recorder, barrier = make()
    t = threading.Thread(target=barrier.wait, args=("gpu", 5))
    clock.advance(100)
    t.start()
    wait_until(lambda: barrier.statistics().waiting == ("gpu",))
    clock.advance(250)
    assert barrier.wait("prep", 5) == 0
    t.join(5)
    trace = Trace.from_recorder(recorder)
    waits = {s.attrs["party"]: s for s in trace.select(name="wait")}
    assert (waits["gpu"].start_ns, waits["gpu"].end_ns, waits["gpu"].attrs["arrival"]) == (100, 350, 0)
    assert (waits["prep"].start_ns, waits["prep"].end_ns, waits["prep"].attrs["arrival"]) == (350, 350, 1)
    (release,) = list(trace.iter_instants())
    assert release.attrs == {"last": "prep"} and release.ts_ns == 350 and release.partition == 5
    stats = barrier.statistics()
    assert stats.rounds == 1 and stats.waited_ns == {"gpu": 250, "prep": 0}
    assert stats.last_to_arrive == {"gpu": 0, "prep": 1}


def test_barrier_is_reusable_round_after_round():
    _, _, barrier = make()
    for _ in range(3):
        t = threading.Thread(target=barrier.wait, args=("prep",))
        t.start()
        wait_until(lambda: barrier.statistics().waiting == ("prep",))
        barrier.wait("gpu")
        t.join(5)
    assert barrier.statistics().rounds == 3


def test_abort_breaks_waiters_and_later_arrivals():
    _, _, barrier = make()
    errors = []

    def waiter():
        try:
            barrier.wait("gpu")
        except BarrierBroken as err:
            errors.append(err)

    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: barrier.statistics().waiting == ("gpu",))
    barrier.abort("phase failed")
    t.join(5)
    assert not t.is_alive() and errors
    with pytest.raises(BarrierBroken, match="phase failed"):
        barrier.wait("prep")


def test_unknown_party_and_double_arrival_are_errors():
    _, _, barrier = make()
    with pytest.raises(ValueError, match="unknown barrier party"):
        barrier.wait("dma")
    def first_arrival():
        with pytest.raises(BarrierBroken):
            barrier.wait("gpu")

    t = threading.Thread(target=first_arrival)
    t.start()
    wait_until(lambda: barrier.statistics().waiting == ("gpu",))
    with pytest.raises(RuntimeError, match="arrived twice"):
        barrier.wait("gpu")
    barrier.abort("done")
    t.join(5)


def test_needs_two_distinct_parties():
    recorder = Recorder(nvtx=False)
    with pytest.raises(ValueError):
        InstrumentedBarrier(("gpu",), recorder, "b")
    with pytest.raises(ValueError):
        InstrumentedBarrier(("gpu", "gpu"), recorder, "b")
