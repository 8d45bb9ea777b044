"""Many hosts' files read at once: a process pool on this machine, or tasks on Ray.

Each file is one task (fleet/read.py's `read_host`), whose result is a small record, so
the parent never holds more than one record per host. Results are taken as they finish and
handed to `on_record` (a progress bar, a live table). Ctrl-C (KeyboardInterrupt, raised in
the parent or by `on_record`) stops the reading: tasks not yet started are cancelled, those
running are ended, and what was read so far is returned, marked interrupted.

Ray is optional (the `cluster` extra) and imported only for `parallel="ray"`; it is started
or joined as a sweep does it (workbench/ray_cluster.py): `address` joins a running cluster,
none uses the cluster this process is connected to, else starts a local one for the read and
stops it after, Ctrl-C included. The workers import `workbench`, so on a cluster it must be
installed on every node.

Contract: `read_fleet(files, options, parallel, workers, address, on_record) -> FleetRead`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.analysis.fleet import HostRecord, unreadable
from workbench.analysis.verdict import DiagnoseOptions
from workbench.fleet.read import host_from_name, read_host

PARALLEL = ("process", "ray", "serial")
RAY_HINT = "pip install 'workbench[cluster]'"


class FleetError(ValueError):
    """The fleet cannot be read as asked (Ray missing, no cluster at the address, ...)."""


@dataclass(frozen=True)
class FleetRead:
    records: tuple[HostRecord, ...]  # in the order they finished
    files: int  # files asked for
    interrupted: bool
    parallel: str  # how they were read: "process pool (2 workers)", "ray (the Ray cluster at ADDR)", "serial"
    seconds: float


OnRecord = Callable[[HostRecord, int, int], None]  # (record, how many done, how many in all)


def read_fleet(
    files: Sequence[str | os.PathLike[str]], options: DiagnoseOptions | None = None,
    parallel: str = "process", workers: int | None = None, address: str | None = None,
    on_record: OnRecord | None = None,
) -> FleetRead:
    if parallel not in PARALLEL:
        raise FleetError(f"parallel={parallel!r} is not allowed: one of {', '.join(PARALLEL)}")
    if workers is not None and workers < 1:
        raise FleetError(f"workers={workers} is not allowed: at least 1")
    paths = [str(Path(f)) for f in files]
    options = options or DiagnoseOptions()
    started = time.perf_counter()
    got: list[HostRecord] = []

    def take(record: HostRecord) -> None:
        got.append(record)
        if on_record is not None:
            on_record(record, len(got), len(paths))

    count = min(workers or os.cpu_count() or 1, len(paths)) or 1
    how = "serial"
    try:
        if parallel == "ray":
            how = "ray"  # what is said if a stop comes before Ray says where the read ran
            how = _on_ray(paths, options, address, workers, take)
        elif parallel == "process" and count > 1:
            how = f"process pool ({count} workers)"
            _in_processes(paths, options, count, take)
        else:
            for path in paths:
                take(read_host(path, options))
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    return FleetRead(tuple(got), len(paths), interrupted, how, time.perf_counter() - started)


def _ignore_interrupt() -> None:
    # Ctrl-C goes to the whole process group: the parent alone decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker inherits the parent's stop handlers (which hold a stop during a save);
    # the parent ends a worker with SIGTERM, so that must end it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start_method() -> str:
    """fork where the caller runs no other thread (quickest, and a script needs no main guard);
    else forkserver, whose workers start from a clean process with no thread of the caller's."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def _in_processes(paths: list[str], options: DiagnoseOptions, count: int,
                  take: Callable[[HostRecord], None]) -> None:
    context = multiprocessing.get_context(_start_method())
    pool = ProcessPoolExecutor(max_workers=count, mp_context=context, initializer=_ignore_interrupt)
    try:
        pending = {pool.submit(read_host, path, options): path for path in paths}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                path = pending.pop(future)
                try:
                    take(future.result())
                except BrokenProcessPool:
                    # A worker died (killed, out of memory): nothing more comes back from the pool.
                    for lost in [path, *pending.values()]:
                        take(unreadable(host_from_name(Path(lost)), lost,
                                        f"{lost}: the worker process reading it ended abruptly "
                                        "(killed, or out of memory?)"))
                    pending.clear()
                    break
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the pool now: queued tasks cancelled, running ones ended with their processes.

    The pool's manager thread may still start a worker after shutdown (it replaces one that
    exits as it reads the stop), so the table it fills is watched until that thread ends."""
    processes = getattr(pool, "_processes", None) or {}  # the live table, not a copy
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + 10
    while True:
        alive = [process for process in list(processes.values()) if process.is_alive()]
        for process in alive:
            process.terminate()
        for process in alive:
            process.join(timeout=5)
            if process.is_alive():  # stuck in a system call that ignores SIGTERM
                process.kill()
                process.join(timeout=5)
        if manager is None or not manager.is_alive() or time.monotonic() > deadline:
            return
        manager.join(0.05)


def _on_ray(paths: list[str], options: DiagnoseOptions, address: str | None, workers: int | None,
            take: Callable[[HostRecord], None]) -> str:
    """Every file a task; `workers` caps the tasks in flight (so the worker processes Ray
    starts for them, each importing the package), else Ray runs as many as it has cores."""
    try:
        import ray
    except ImportError:
        raise FleetError(f"--parallel ray needs Ray, which is not installed: {RAY_HINT}") from None
    from workbench.ray_cluster import RayUnreachable, connect

    try:
        connection = connect(address, purpose="this read")
    except RayUnreachable as err:
        raise FleetError(str(err)) from None
    try:
        task: Any = ray.remote(read_host)
        waiting = list(reversed(paths))
        pending: list[Any] = []
        try:
            while waiting or pending:
                while waiting and len(pending) < (workers or len(paths)):
                    pending.append(task.remote(waiting.pop(), options))
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    take(ray.get(ref))
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        connection.close()
    return f"ray ({connection.where})"
