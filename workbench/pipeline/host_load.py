"""Host memory load beside the pipeline: threads streaming through host memory.

A proving host rarely runs the prover alone (sealing layers that hash through tens of GB,
other provers' synthesis, sorting). That work competes with the host-to-device copies for
memory bandwidth, which is what slowed the pageable copies in production. Our compiled
synthesis is latency-bound (scattered witness reads) and barely loads the memory system: on
the H200 host pageable copies ran at 4.7 GB/s with one synthesis process and 4.6 with
fourteen. `RunConfig.host_load_threads` adds the neighbours back, each thread copying a
buffer far larger than the caches back and forth.

Recorded: `host_load` on track `host/load` (the load's whole life, with bytes moved and the
mean rate) and a counter `host/load` `GB/s` every SAMPLE_S, so a Gantt shows when the load
ran and the analysis can name it.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from workbench.config import ConfigError
from workbench.model.tracks import HOST_LOAD_TRACK as TRACK
from workbench.prover import native
from workbench.trace.recorder import Recorder

SAMPLE_S = 0.25
BLOCK_BYTES = 256 << 20  # per buffer, two a thread: past any last-level cache (the H200 host's is 300 MB)


# The load may take at most this share of the memory available: the run needs the rest.
MEMORY_SHARE = 0.5


def available_bytes() -> int | None:
    """What the kernel says can be allocated without swapping (MemAvailable); None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def check_memory(threads: int, block_bytes: int | None = None, available: int | None = None) -> None:
    """Refuse, before the run starts, a load that would ask for more memory than the host can give."""
    if threads < 1:
        return
    per_thread = 2 * (block_bytes or BLOCK_BYTES)
    available = available_bytes() if available is None else available
    if available is None or threads * per_thread <= available * MEMORY_SHARE:
        return
    fits = int(available * MEMORY_SHARE // per_thread)
    raise ConfigError(
        "host_load_threads", threads,
        f"it would ask for {threads * per_thread / 2**30:.1f} GiB of host memory (2 x {per_thread >> 21} "
        f"MiB a thread), more than half of the {available / 2**30:.1f} GiB available; use at most {fits}")


class HostLoad:
    def __init__(self, threads: int, block_bytes: int | None = None) -> None:
        if threads < 1:
            raise ValueError(f"host load needs at least one thread, got {threads}")
        self.threads = threads
        self.words = max(1, (block_bytes or BLOCK_BYTES) // 8)
        self._stop = threading.Event()
        self._moved = [0] * threads  # bytes per thread; each slot written by one thread only
        self._workers: list[threading.Thread] = []
        self._sampler: threading.Thread | None = None
        self._recorder: Recorder | None = None
        self._started_ns = 0
        self.errors: list[str] = []  # what kept a thread from loading, for the run's notices

    def start(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._started_ns = recorder.now_ns()
        lib = native.library()
        for i in range(self.threads):
            t = threading.Thread(target=self._stream, args=(i, lib), name=f"host-load-{i}", daemon=True)
            t.start()
            self._workers.append(t)
        self._sampler = threading.Thread(target=self._sample, name="host-load-sampler", daemon=True)
        self._sampler.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._workers:
            t.join()
        if self._sampler is not None:
            self._sampler.join()
        if self._recorder is not None:
            end = self._recorder.now_ns()
            moved = sum(self._moved)
            self._recorder.add_span(TRACK, "host_load", self._started_ns, end, attrs={
                "threads": self.threads, "bytes": moved, "block_bytes": self.words * 8,
                "gbps": moved / max(end - self._started_ns, 1)})

    def _stream(self, i: int, lib: object) -> None:
        try:
            src = np.ones(self.words, np.uint64)  # written, so every page is really there
            dst = np.zeros(self.words, np.uint64)
        except MemoryError:
            self.errors.append(f"host load thread {i} could not allocate its 2 x {self.words * 8 >> 20} "
                               "MiB buffers and did not run")
            return
        nbytes = 2 * src.nbytes  # each call copies the block there and back
        while not self._stop.is_set():
            if lib is not None:
                lib.wb_stream(dst.ctypes.data, src.ctypes.data, self.words)  # type: ignore[attr-defined]
            else:  # numpy's copy also lets go of the interpreter lock
                np.copyto(dst, src)
                np.copyto(src, dst)
            self._moved[i] += nbytes

    def _sample(self) -> None:
        assert self._recorder is not None
        last_t, last = time.perf_counter(), 0
        while not self._stop.wait(SAMPLE_S):
            now_t, now = time.perf_counter(), sum(self._moved)
            self._recorder.counter(TRACK, "GB/s", (now - last) / (now_t - last_t) / 1e9)
            last_t, last = now_t, now
