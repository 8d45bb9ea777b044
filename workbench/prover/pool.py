"""A pool of processes for the key's setup (fixed-base combs, point encodings): one a core,
and stopped at once by Ctrl-C or any error.

A plain `with ProcessPoolExecutor()` waits, on the way out of an exception, for every job
already handed to it: Ctrl-C during a 2^16 key's setup went on for the whole minute. Here
the jobs not begun are dropped and the processes killed. The processes ignore Ctrl-C,
SIGTERM and SIGHUP (a terminal sends Ctrl-C to all of them): the caller's process is told
too, stops, and ends them; a forked process would otherwise print a KeyboardInterrupt of its
own, or end first and turn the stop into a broken pool.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from workbench.trace.journal import THREAD_NAME as JOURNAL_THREAD
from workbench.trace.rows_codec import FEED_THREADS

T = TypeVar("T")


STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FORK_SAFE_THREADS = (JOURNAL_THREAD, *FEED_THREADS)


PARENT_WATCH_S = 0.25


def _ignore_stops(parent: int) -> None:
    for signum in STOPS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # the mask forked from _stops_blocked
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    exit_with_parent(parent)


def exit_with_parent(parent: int) -> None:
    """Watch, on a thread of its own, for the process `parent` to be gone, and leave then."""
    threading.Thread(target=_watch_parent, args=(parent,), name="workbench-parent-watch", daemon=True).start()


def _watch_parent(parent: int) -> None:
    """End this process when the one that started it is gone (SIGKILL, the OOM killer): nobody
    else ends it then, and a worker waiting for its next job would wait forever."""
    while os.getppid() == parent:
        time.sleep(PARENT_WATCH_S)
    os._exit(0)


def parallel_map(fn: Callable[[Any], T], jobs: Iterable[Any], workers: int) -> list[T]:
    """`[fn(job) for job in jobs]` on `workers` processes (`fn` must be picklable)."""
    # Forking is cheap and safe while the caller is single-threaded (a script, the CLI); with
    # other threads running a fork may copy a lock mid-use, so a notebook's run spawns. The
    # run's journal thread does not count, nor a live view's feeding threads: a forked worker
    # never touches the journal or the feed, and leaves by os._exit (no exit hooks). Spawning
    # beside it lost the race to a stop signal: a child started at that moment was left with
    # no start-up data and printed a traceback.
    others = [t for t in threading.enumerate()
              if t is not threading.current_thread() and t.name not in FORK_SAFE_THREADS]
    method = "fork" if threading.current_thread() is threading.main_thread() and not others else "spawn"
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method),
                               initializer=_ignore_stops, initargs=(os.getpid(),))
    try:
        with _stops_blocked():  # map hands out every job at once, starting the processes
            answers = pool.map(fn, jobs)
        results = list(answers)
    except BaseException:
        _kill(pool)
        raise
    pool.shutdown(wait=True)
    return results


@contextlib.contextmanager
def _stops_blocked() -> Iterator[None]:
    """The three signals wait (blocked, delivered after) while processes start: a Ctrl-C
    between a fork and the pool's record of it would leave a process nobody ends. Blocking
    is enough when this is the only thread, as when the pool forks; else (a notebook, which
    spawns) another thread may take the signal, and the window is only narrowed."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _kill(pool: ProcessPoolExecutor) -> None:
    # The executor has no public way to end its processes before Python 3.14 (kill_workers).
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        while True:  # a Ctrl-C again meanwhile must not leave a process behind
            try:
                if process.is_alive():
                    process.kill()
                process.join(5.0)
                break
            except KeyboardInterrupt:
                continue
