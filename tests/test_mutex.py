import threading

import pytest
from conftest import wait_until

from workbench.clock import FakeClock
from workbench.trace import InstrumentedMutex, MutexAborted, Recorder, Trace


def make(clock=None):
    recorder = Recorder(clock=clock or FakeClock(), nvtx=False)
    return recorder, InstrumentedMutex("gpu0", recorder)


def test_wait_hold_and_handoff_are_recorded_with_exact_times():
    clock = FakeClock(1_000)
    recorder, mutex = make(clock)
    mutex.acquire(worker=0, partition=0)
    clock.advance(10)

    got = threading.Event()

    def second():
        mutex.acquire(worker=1, partition=1)
        got.set()
        mutex.release()

    t = threading.Thread(target=second)
    t.start()
    wait_until(lambda: mutex.statistics().waiting == 1)
    assert not got.is_set()
    clock.advance(40)
    mutex.release()
    t.join(5)
    assert got.is_set()

    trace = Trace.from_recorder(recorder)
    waits = trace.select(name="wait")
    holds = trace.select(name="hold")
    assert [(s.worker, s.start_ns, s.end_ns) for s in waits] == [(0, 1000, 1000), (1, 1010, 1050)]
    assert [(s.worker, s.partition, s.start_ns, s.end_ns) for s in holds] == [
        (0, 0, 1000, 1050), (1, 1, 1050, 1050)]
    (handoff,) = [i for i in trace.iter_instants() if i.name == "handoff"]
    assert handoff.attrs == {"from_worker": 0, "to_worker": 1}
    assert handoff.ts_ns == 1050
    stats = mutex.statistics()
    assert (stats.acquisitions, stats.handoffs, stats.held_ns, stats.waited_ns) == (2, 1, 50, 40)
    assert stats.owner is None and stats.waiting == 0


def test_waiters_are_served_first_come_first_served():
    _, mutex = make()
    mutex.acquire(worker=9)
    order = []

    def take(worker):
        mutex.acquire(worker)
        order.append(worker)
        mutex.release()

    threads = []
    for worker in (3, 1, 2):
        t = threading.Thread(target=take, args=(worker,))
        t.start()
        threads.append(t)
        waiting = len(threads)
        wait_until(lambda: mutex.statistics().waiting == waiting)  # noqa: B023
    mutex.release()
    for t in threads:
        t.join(5)
    assert order == [3, 1, 2]


def test_abort_wakes_waiters_and_refuses_new_ones():
    _, mutex = make()
    mutex.acquire(worker=0)
    errors = []

    def waiter():
        try:
            mutex.acquire(worker=1)
        except MutexAborted as err:
            errors.append(str(err))

    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: mutex.statistics().waiting == 1)
    mutex.abort("test stop")
    t.join(5)
    assert not t.is_alive()
    assert errors and "test stop" in errors[0]
    with pytest.raises(MutexAborted):
        mutex.acquire(worker=2)
    mutex.release()  # the holder can still give it back
    assert mutex.statistics().aborted


def test_release_without_hold_is_an_error():
    _, mutex = make()
    with pytest.raises(RuntimeError, match="not held"):
        mutex.release()


def test_disabled_recorder_records_nothing_but_lock_still_works():
    recorder = Recorder(enabled=False)
    mutex = InstrumentedMutex("gpu0", recorder)
    with mutex.hold(worker=0):
        assert mutex.statistics().owner == 0
    assert recorder.spans == [] and recorder.instants == []
