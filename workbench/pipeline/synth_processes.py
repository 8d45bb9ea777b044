"""Synthesis in worker processes: each synthesis thread hands its partitions to a process of
its own, so synthesis runs in parallel for real.

Why processes: synthesis is numpy over chunks, and every numpy call drops and retakes the
interpreter lock. With a dozen threads in one interpreter the lock can set the pace: on the
16-core H200 machine 14 synthesis threads took 44.7 s a 2^22 partition with the default 5 ms
switch interval (10.8-13.5 s with pipeline/switching.py's 0.2 ms and larger chunks, as in
processes, where the host's memory system set the pace). A process per thread keeps the
thread's role (it waits, records the span, takes the back-pressure permit) and moves the
arithmetic where no other thread's Python can hold it up, as the production prover's native
threads are.

The pipeline asks the memory modes for buffers a process can map (prover/shared_arrays.py):
the synthesis thread hands their descriptors to its process over a socket and the process
writes witness, a, b and c in place, into fresh pageable memory, a pinned pool slot or
memory registered with the driver, as the production prover's threads do. For buffers that
cannot be shared (made elsewhere), the process writes a block of shared memory (/dev/shm,
made on first need) instead, and the thread copies the partition out of it, recorded as
`synthesis_collect`.

A process that fails sends the error back (the partition's synthesis phase fails with its
message); one that dies is reported with how it ended (its exit code or the signal), one that
stalls (says nothing, not even its `beat`, for longer than the run's pace allows) with how
long and what the kernel says of it. A stop abandons the partition in flight; the processes
are ended when the pipeline closes (synth_child.py says why they leave stopping to it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from workbench.pipeline import synth_child
from workbench.pipeline.synth_child import CHUNKS_VARIABLE, FIELDS, PROCESS_CHUNKS, Params, block_views
from workbench.pipeline.synth_child import map_block as _map
from workbench.prover.circuit import SynthesisCancelled, SyntheticCircuit
from workbench.prover.shared_arrays import SharedRef, ref_of

__all__ = ["CHUNKS_VARIABLE", "PROCESS_CHUNKS", "ProcessSynthesis"]

POLL_S = 0.05
START_TIMEOUT_S = 120.0
# A process that says nothing (no `beat`, no answer) for this long while it holds a partition
# makes no progress: STALL_FACTOR times the longest silence measured so far in the run (the
# cost of a chunk of synthesis on this machine, under this load), never less than the floor,
# which covers a first chunk before anything is measured (page faults on fresh buffers).
STALL_FLOOR_S = 10.0
STALL_FACTOR = 20.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding workbench/


def _shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class _Pace:
    """The longest silence between two messages of any process, measured as the run goes."""

    def __init__(self) -> None:
        self.longest = 0.0

    def note(self, silence: float) -> None:
        self.longest = max(self.longest, silence)  # a lost race only loses one sample

    def stall_s(self) -> float:
        return max(STALL_FLOOR_S, STALL_FACTOR * self.longest)


def _state(pid: int) -> str:
    """What the kernel says a process is doing, where /proc tells ("" elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""
    return {"T": "stopped, by SIGSTOP or a debugger", "t": "stopped by a debugger",
            "D": "waiting on the disk or the kernel", "Z": "dead"}.get(state, "")


def _how_it_ended(code: int | None) -> str:
    if code is None:
        return "is gone"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _join(thread: threading.Thread) -> None:
    """Join `thread` (it is quick) even if Ctrl-C comes meanwhile (raised after)."""
    interrupted = False
    while thread.is_alive():
        try:
            thread.join()
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


class _Worker:
    """One synthesis process, started as `python -m` of pipeline/synth_child.py (not through
    multiprocessing, whose spawned children re-run the parent's main script)."""

    def __init__(self, index: int, params: Params, n: int, m: int, pace: _Pace) -> None:
        self.index = index
        name = f"workbench-synth-{os.getpid()}-{secrets.token_hex(4)}-{index}"
        self.path = os.path.join(_shm_dir(), name)
        self.n, self.m = n, m
        self.pace = pace
        self.views: dict[str, np.ndarray] = {}  # the block, made on first use (block_views)
        self._pending = b""  # what was read of the process's answers past the last line
        self.sock, child_sock = socket.socketpair()
        args = [sys.executable, "-m", synth_child.__name__, self.path, str(params.log2),
                repr(params.bool_fraction), str(params.terms), str(params.seed), str(child_sock.fileno())]
        # The process imports this very package, wherever the parent found it (a notebook may
        # have put it on sys.path by hand).
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        try:
            # A session of its own: a terminal's Ctrl-C or hang-up goes to the pipeline alone,
            # which stops its processes itself (else each would print a KeyboardInterrupt).
            self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                            close_fds=True, pass_fds=(child_sock.fileno(),), env=env,
                                            start_new_session=True)
        finally:
            child_sock.close()
        self.busy = False  # a partition was sent and its answer not read (abandoned by a stop)
        self.ready = False  # said it is ready: until then it may not read its input yet

    @property
    def name(self) -> str:
        return f"synthesis process {self.index} (pid {self.process.pid})"

    def block_views(self) -> dict[str, np.ndarray]:
        """The process's own block, for targets it cannot map: made the first time one comes,
        so runs whose buffers are all shared never allocate it."""
        if not self.views:
            self.views = block_views(_map(self.path, 32 * (self.m + 3 * self.n), create=True), self.n, self.m)
        return self.views

    def _line(self, wait: float) -> str | None:
        """The next whole line, or None if none came within `wait` seconds."""
        assert self.process.stdout is not None
        while b"\n" not in self._pending:
            ready, _, _ = select.select([self.process.stdout], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode(errors="replace")

    def read_line(self, cancelled: Callable[[], bool], what: str, timeout: float | None = None) -> str:
        """The next answer. Without `timeout`, the process may take as long as it keeps saying
        `beat`; silent for longer than the run's stall bound, it has stalled."""
        silence, last = 0.0, time.monotonic()
        while True:
            try:
                line = self._line(POLL_S)
            except EOFError:
                raise RuntimeError(f"{self.name} {_how_it_ended(self._wait(5.0))} {what}") from None
            now = time.monotonic()
            # Only time this thread was awake counts: a pipeline that was itself stopped
            # (Ctrl-Z) does not find its processes silent when it comes back.
            silence += min(now - last, 1.0)
            last = now
            if line is not None:
                if timeout is None:
                    self.pace.note(silence)
                if line == "beat":
                    silence = 0.0
                    continue
                return line
            if cancelled():
                raise SynthesisCancelled(f"{what} abandoned by a stop")
            bound = timeout if timeout is not None else self.pace.stall_s()
            if silence > bound:
                state = _state(self.process.pid)
                raise RuntimeError(f"{self.name} made no progress for {silence:.1f} s {what}"
                                   + (f" (its state: {state})" if state else "")
                                   + ("" if timeout is not None else
                                      f"; the stall bound is {STALL_FACTOR:g}x the slowest step so far, "
                                      f"at least {STALL_FLOOR_S:g} s"))

    def _wait(self, timeout: float) -> int | None:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def send(self, partition: int, refs: list[SharedRef] | None) -> None:
        assert self.process.stdin is not None
        try:
            line = f"{partition}\n"
            if refs is not None:
                socket.send_fds(self.sock, [b"b"], [r.fd for r in refs])
                line = f"{partition} " + " ".join(str(r.nbytes) for r in refs) + "\n"
            self.process.stdin.write(line.encode())
        except OSError:
            raise RuntimeError(f"{self.name} {_how_it_ended(self._wait(1.0))} before partition "
                               f"{partition}") from None

    def close(self) -> None:
        proc = self.process
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()  # end of input: an idle process leaves its loop
            except OSError:
                pass
            # It ignores SIGTERM (see synth_child.py); one that is busy, stopped or stuck is
            # killed, which also works on a stopped process.
            if self.busy or not self.ready or self._wait(2.0) is None:
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None and not stream.closed:
                with contextlib.suppress(OSError):  # a dead process's pipe: nothing to flush
                    stream.close()
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        # The numpy views keep the mapping alive until they are dropped; the file is gone.
        self.views = {}


class ProcessSynthesis:
    """`count` synthesis processes for a circuit; `synthesize(i, ...)` runs on process i.

    A process that stalls (stopped, stuck) or dies fails the partition it holds, naming it,
    and so the run (exit 1, the trace kept); it is not restarted. A profiler's run is a
    measurement: a partition done again by a fresh process would hide the fault the user most
    needs to see and skew every figure after it; the user decides whether to run again.
    """

    def __init__(self, circuit: SyntheticCircuit, count: int) -> None:
        params = Params(circuit.log2, circuit.bool_fraction, circuit.terms, circuit.seed)
        self.pace = _Pace()
        self.workers: list[_Worker] = []
        try:
            # Started from a thread of their own: Ctrl-C (a KeyboardInterrupt, raised only in
            # the main thread) then never falls between a process's start and its record here,
            # which would leave it unknown to the close below.
            errors: list[BaseException] = []
            starter = threading.Thread(target=self._start, args=(count, params, circuit, errors),
                                       name="synthesis-start", daemon=True)
            starter.start()
            _join(starter)
            if errors:
                raise errors[0]
            for worker in self.workers:
                line = worker.read_line(lambda: False, "while starting", timeout=START_TIMEOUT_S)
                if not line.startswith("ready"):
                    raise RuntimeError(f"{worker.name} failed to start: {line.removeprefix('error ')}")
                worker.ready = True
        except BaseException:
            self.close()
            raise

    def _start(self, count: int, params: Params, circuit: SyntheticCircuit,
               errors: list[BaseException]) -> None:
        try:
            for i in range(count):
                self.workers.append(_Worker(i, params, circuit.n, circuit.m, self.pace))
        except BaseException as err:
            errors.append(err)

    def synthesize(self, index: int, partition: int, target: Any, cancelled: Callable[[], bool],
                   collect: Callable[[], Any]) -> None:
        """Synthesise `partition` on process `index` into target's witness, a, b, c: in place
        where all four are shared arrays, else through the process's block and a copy, which
        `collect()` gives the context (a span) of."""
        worker = self.workers[index]
        if worker.busy:
            raise RuntimeError(f"{worker.name} is still busy with an abandoned partition")
        refs = [ref_of(getattr(target, name)) for name in FIELDS]
        direct = all(r is not None for r in refs)
        views = {} if direct else worker.block_views()
        worker.send(partition, [r for r in refs if r is not None] if direct else None)
        worker.busy = True
        line = worker.read_line(cancelled, f"while synthesising partition {partition}")
        worker.busy = False
        if line.startswith("error "):
            raise RuntimeError(f"in {worker.name}: {line.removeprefix('error ')}")
        if line != f"done {partition}":
            raise RuntimeError(f"{worker.name} answered {line!r} for partition {partition}")
        if direct:
            return
        with collect():
            for name in FIELDS:
                np.copyto(getattr(target, name), views[name])

    def close(self) -> None:
        """Every process ended and its block removed, even if Ctrl-C comes meanwhile (it is
        raised after)."""
        interrupted = False
        while self.workers:
            try:
                self.workers[0].close()
            except KeyboardInterrupt:
                interrupted = True
                continue
            self.workers.pop(0)
        if interrupted:
            raise KeyboardInterrupt
