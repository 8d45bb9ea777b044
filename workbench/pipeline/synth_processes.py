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
message); one that dies is reported with its exit code. A stop abandons the partition in
flight; the processes are ended when the pipeline closes.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import select
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.prover import circuit as circuit_module
from workbench.prover import field
from workbench.prover.circuit import SynthesisCancelled, SyntheticCircuit
from workbench.prover.shared_arrays import SharedRef, map_shared, ref_of

FIELDS = ("witness", "a", "b", "c")
POLL_S = 0.05
START_TIMEOUT_S = 120.0
PARTITION_TIMEOUT_S = 3600.0  # a hung process is reported, not waited for forever
# numpy chunk sizes (field elements, constraints) inside a synthesis process. Threads need
# large ones (each numpy call retakes the interpreter lock); a process has the lock to itself,
# and chunks whose scratch stays in the core's cache are faster alone and scale better side by
# side: at 2^20 on the 2-core development machine (three sittings), one process took 0.57-0.60 s
# a partition against 0.69-0.83 s with the threads' sizes, and two processes made 2.81-3.41
# partitions a second against 1.98-2.37.
PROCESS_CHUNKS = (8192, 1 << 14)
CHUNKS_VARIABLE = "WORKBENCH_SYNTH_CHUNKS"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding workbench/


def _shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def _map(path: str, size: int, create: bool) -> mmap.mmap:
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(path, flags, 0o600)
    try:
        if create:
            os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def _views(block: mmap.mmap, n: int, m: int) -> dict[str, np.ndarray]:
    sizes = {"witness": m, "a": n, "b": n, "c": n}
    out, offset = {}, 0
    for name in FIELDS:
        count = sizes[name] * 4
        out[name] = np.frombuffer(block, dtype=np.uint64, count=count, offset=offset).reshape(-1, 4)
        offset += sizes[name] * 32
    return out


@dataclass(frozen=True)
class _Params:
    log2: int
    bool_fraction: float
    terms: int
    seed: int


class _Target:
    def __init__(self, views: dict[str, np.ndarray]) -> None:
        self.witness, self.a, self.b, self.c = (views[k] for k in FIELDS)


def _direct_target(sock: socket.socket, sizes: list[int]) -> tuple[list[mmap.mmap], _Target]:
    """The buffers whose descriptors came over the socket, mapped (witness, a, b, c)."""
    _, fds, _, _ = socket.recv_fds(sock, 16, len(FIELDS))
    if len(fds) != len(FIELDS):
        for fd in fds:
            os.close(fd)
        raise RuntimeError(f"expected {len(FIELDS)} buffer descriptors, got {len(fds)}")
    blocks, views = [], {}
    try:
        for name, fd, nbytes in zip(FIELDS, fds, sizes, strict=True):
            block, view = map_shared(fd, nbytes, (nbytes // 32, 4))
            blocks.append(block)
            views[name] = view
    finally:
        for fd in fds:
            os.close(fd)
    return blocks, _Target(views)


def _child_main(path: str, params: _Params, sock_fd: int) -> None:
    """A synthesis process: reads `P` (write the partition into the shared block) or
    `P SIZES` (into the four buffers whose descriptors come over the socket) on stdin,
    answers `done P` or `error MESSAGE` on stdout."""
    out = sys.stdout
    try:
        field_chunk, circuit_chunk = PROCESS_CHUNKS
        if os.environ.get(CHUNKS_VARIABLE):  # benchmarks/synthesis_scaling.py --chunks
            field_chunk, circuit_chunk = (int(v) for v in os.environ[CHUNKS_VARIABLE].split(","))
        field.CHUNK = field.BLOCK = field_chunk
        circuit_module.CHUNK = circuit_chunk
        circuit = SyntheticCircuit(params.log2, params.bool_fraction, params.terms, params.seed)
        sock = socket.socket(fileno=sock_fd)
    except Exception as err:
        out.write(f"error {type(err).__name__}: {err}\n")
        out.flush()
        return
    out.write(f"ready {os.getpid()}\n")
    out.flush()
    target: _Target | None = None  # the parent's block, mapped when first asked for
    for line in sys.stdin:
        try:
            words = line.split()
            partition = int(words[0])
            if len(words) == 1:
                if target is None:
                    block = _map(path, 32 * (circuit.m + 3 * circuit.n), create=False)
                    target = _Target(_views(block, circuit.n, circuit.m))
                circuit.synthesize(partition, target)
            else:
                blocks, direct = _direct_target(sock, [int(w) for w in words[1:]])
                try:
                    circuit.synthesize(partition, direct)
                finally:
                    del direct
                    for b in blocks:
                        b.close()
        except Exception as err:
            message = f"{type(err).__name__}: {err}".replace("\n", " ")
            out.write(f"error {message}\n")
        else:
            out.write(f"done {partition}\n")
        out.flush()


class _Worker:
    """One synthesis process, started as `python -m` of this module (not through
    multiprocessing, whose spawned children re-run the parent's main script)."""

    def __init__(self, index: int, params: _Params, n: int, m: int) -> None:
        self.index = index
        name = f"workbench-synth-{os.getpid()}-{secrets.token_hex(4)}-{index}"
        self.path = os.path.join(_shm_dir(), name)
        self.n, self.m = n, m
        self.views: dict[str, np.ndarray] = {}  # the block, made on first use (block_views)
        self.sock, child_sock = socket.socketpair()
        args = [sys.executable, "-m", __name__, self.path, str(params.log2), repr(params.bool_fraction),
                str(params.terms), str(params.seed), str(child_sock.fileno())]
        # The process imports this very package, wherever the parent found it (a notebook may
        # have put it on sys.path by hand).
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        try:
            self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                            bufsize=1, close_fds=True, pass_fds=(child_sock.fileno(),),
                                            env=env)
        finally:
            child_sock.close()
        self.busy = False  # a partition was sent and its answer not read (abandoned by a stop)

    def block_views(self) -> dict[str, np.ndarray]:
        """The process's own block, for targets it cannot map: made the first time one comes,
        so runs whose buffers are all shared never allocate it."""
        if not self.views:
            self.views = _views(_map(self.path, 32 * (self.m + 3 * self.n), create=True), self.n, self.m)
        return self.views

    def read_line(self, timeout: float, cancelled: Callable[[], bool], what: str) -> str:
        assert self.process.stdout is not None
        waited = 0.0
        while True:
            ready, _, _ = select.select([self.process.stdout], [], [], POLL_S)
            if ready:
                line = self.process.stdout.readline()
                if not line:
                    code = self.process.wait(5.0)
                    raise RuntimeError(f"synthesis process {self.index} exited with code {code} {what}")
                return line.rstrip("\n")
            waited += POLL_S
            if cancelled():
                raise SynthesisCancelled(f"{what} abandoned by a stop")
            if waited > timeout:
                raise RuntimeError(f"synthesis process {self.index} gave no answer within "
                                   f"{timeout:.0f} s {what}")

    def send(self, partition: int, refs: list[SharedRef] | None) -> None:
        assert self.process.stdin is not None
        try:
            line = f"{partition}\n"
            if refs is not None:
                socket.send_fds(self.sock, [b"b"], [r.fd for r in refs])
                line = f"{partition} " + " ".join(str(r.nbytes) for r in refs) + "\n"
            self.process.stdin.write(line)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            code = self.process.poll()
            raise RuntimeError(f"synthesis process {self.index} is gone (exit code {code})") from None

    def close(self) -> None:
        proc = self.process
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()  # end of input: the process leaves its loop
                proc.wait(0.2 if self.busy else 2.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5.0)
                except subprocess.TimeoutExpired:
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
    """`count` synthesis processes for a circuit; `synthesize(i, ...)` runs on process i."""

    def __init__(self, circuit: SyntheticCircuit, count: int) -> None:
        params = _Params(circuit.log2, circuit.bool_fraction, circuit.terms, circuit.seed)
        self.workers: list[_Worker] = []
        try:
            for i in range(count):
                self.workers.append(_Worker(i, params, circuit.n, circuit.m))
            for worker in self.workers:
                line = worker.read_line(START_TIMEOUT_S, lambda: False, "while starting")
                if not line.startswith("ready"):
                    raise RuntimeError(f"synthesis process {worker.index} failed to start: "
                                       f"{line.removeprefix('error ')}")
        except BaseException:
            self.close()
            raise

    def synthesize(self, index: int, partition: int, target: Any, cancelled: Callable[[], bool],
                   collect: Callable[[], Any]) -> None:
        """Synthesise `partition` on process `index` into target's witness, a, b, c: in place
        where all four are shared arrays, else through the process's block and a copy, which
        `collect()` gives the context (a span) of."""
        worker = self.workers[index]
        if worker.busy:
            raise RuntimeError(f"synthesis process {index} is still busy with an abandoned partition")
        refs = [ref_of(getattr(target, name)) for name in FIELDS]
        direct = all(r is not None for r in refs)
        views = {} if direct else worker.block_views()
        worker.send(partition, [r for r in refs if r is not None] if direct else None)
        worker.busy = True
        line = worker.read_line(PARTITION_TIMEOUT_S, cancelled, f"while synthesising partition {partition}")
        worker.busy = False
        if line.startswith("error "):
            raise RuntimeError(f"in synthesis process {index}: {line.removeprefix('error ')}")
        if line != f"done {partition}":
            raise RuntimeError(f"synthesis process {index} answered {line!r} for partition {partition}")
        if direct:
            return
        with collect():
            for name in FIELDS:
                np.copyto(getattr(target, name), views[name])

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
        self.workers = []


if __name__ == "__main__":
    _child_main(sys.argv[1],
                _Params(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])),
                int(sys.argv[6]))
