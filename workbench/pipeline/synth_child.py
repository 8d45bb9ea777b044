"""A synthesis process (see pipeline/synth_processes.py): the program each one runs, and the
block layout it shares with the pipeline.

It reads `P` (write partition P into the shared block) or `P SIZES` (into the four buffers
whose descriptors come over the socket) on stdin, and answers `done P` or `error MESSAGE`
on stdout; while it synthesises it says `beat` now and then, so the pipeline can tell a
slow process from one that makes no progress at all.

It never acts on a stop signal itself: it runs in a session of its own (a terminal's Ctrl-C
or hang-up reaches only the pipeline), ignores SIGINT, SIGTERM and SIGHUP sent to it anyway,
and is ended by the pipeline, which closes its input and kills it if busy. When the pipeline
is gone (its end of the pipes closed: its next `beat` or answer fails, or its input ends) it
leaves without a word, removing the shared block's name on its way out.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from workbench.prover import circuit as circuit_module
from workbench.prover import field
from workbench.prover.circuit import SyntheticCircuit
from workbench.prover.shared_arrays import map_shared

FIELDS = ("witness", "a", "b", "c")
# numpy chunk sizes (field elements, constraints) inside a synthesis process. Threads need
# large ones (each numpy call retakes the interpreter lock); a process has the lock to itself,
# and chunks whose scratch stays in the core's cache are faster alone and scale better side by
# side: at 2^20 on the 2-core development machine (three sittings), one process took 0.57-0.60 s
# a partition against 0.69-0.83 s with the threads' sizes, and two processes made 2.81-3.41
# partitions a second against 1.98-2.37.
PROCESS_CHUNKS = (8192, 1 << 14)
CHUNKS_VARIABLE = "WORKBENCH_SYNTH_CHUNKS"
# At most this often a `beat` while synthesising (the circuit asks between chunks): often
# enough to tell a stall within seconds, rarely enough to cost the pipeline nothing.
BEAT_S = 0.2


@dataclass(frozen=True)
class Params:
    log2: int
    bool_fraction: float
    terms: int
    seed: int


def map_block(path: str, size: int, create: bool) -> mmap.mmap:
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(path, flags, 0o600)
    try:
        if create:
            os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def block_views(block: mmap.mmap, n: int, m: int) -> dict[str, np.ndarray]:
    sizes = {"witness": m, "a": n, "b": n, "c": n}
    out, offset = {}, 0
    for name in FIELDS:
        count = sizes[name] * 4
        out[name] = np.frombuffer(block, dtype=np.uint64, count=count, offset=offset).reshape(-1, 4)
        offset += sizes[name] * 32
    return out


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


class _Beat:
    """The circuit's `cancelled` callback: never cancels, says `beat` at most every BEAT_S."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.last = out, time.monotonic()

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self.last >= BEAT_S:
            self.last = now
            self.out.write("beat\n")
            self.out.flush()
        return False


def _serve(path: str, params: Params, sock_fd: int, out: TextIO) -> None:
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
        beat = _Beat(out)
        try:
            words = line.split()
            partition = int(words[0])
            if len(words) == 1:
                if target is None:
                    block = map_block(path, 32 * (circuit.m + 3 * circuit.n), create=False)
                    target = _Target(block_views(block, circuit.n, circuit.m))
                circuit.synthesize(partition, target, beat)
            else:
                blocks, direct = _direct_target(sock, [int(w) for w in words[1:]])
                try:
                    circuit.synthesize(partition, direct, beat)
                finally:
                    del direct
                    for b in blocks:
                        b.close()
        except BrokenPipeError:
            raise
        except Exception as err:
            message = f"{type(err).__name__}: {err}".replace("\n", " ")
            out.write(f"error {message}\n")
        else:
            out.write(f"done {partition}\n")
        out.flush()


def main(argv: list[str]) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    params = Params(int(argv[1]), float(argv[2]), int(argv[3]), int(argv[4]))
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionError):  # the pipeline went away
            _serve(argv[0], params, int(argv[5]), sys.stdout)
    finally:
        # The block's name is needed only to map it: gone now, whoever made it. A pipeline
        # killed outright (SIGKILL) cannot remove it, and /dev/shm would keep it until reboot.
        with contextlib.suppress(OSError):
            os.unlink(argv[0])
    # No flush at exit: a closed pipe would print an error nobody asked for.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
