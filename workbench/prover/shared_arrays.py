"""Host arrays that a synthesis process can write in place.

Each array lives in its own anonymous memory file (memfd); the pipeline process keeps its
descriptor open while the array lives and hands it to a synthesis process over a socket, so
the process maps the very pages the memory mode handed out: fresh pageable memory, a slot
of the pinned pool (registered with the driver after allocation) or registered memory. No
copy stands between synthesis and the upload, as in the production prover, and no file is
ever left behind (the memory file has no name; it goes with its last descriptor and mapping).
"""

from __future__ import annotations

import mmap
import os
import tempfile
import threading
import weakref
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SharedRef:
    fd: int
    nbytes: int
    shape: tuple[int, ...]


_refs: dict[int, SharedRef] = {}
_lock = threading.Lock()


def _memory_file() -> int:
    if hasattr(os, "memfd_create"):
        return os.memfd_create("workbench-host", os.MFD_CLOEXEC)
    folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd, path = tempfile.mkstemp(prefix="workbench-host-", dir=folder)
    os.unlink(path)  # the descriptor keeps it; nothing to clean up later
    return fd


def shared_empty(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised uint64 array another process can map (see `ref_of`)."""
    count = int(np.prod(shape))
    nbytes = count * 8
    fd = _memory_file()
    try:
        os.ftruncate(fd, max(nbytes, 8))
        block = mmap.mmap(fd, max(nbytes, 8))
    except BaseException:
        os.close(fd)
        raise
    array = np.frombuffer(block, dtype=np.uint64, count=count).reshape(shape)
    key = id(array)
    with _lock:
        _refs[key] = SharedRef(fd, nbytes, tuple(shape))
    weakref.finalize(array, _release, key, fd)
    return array


def _release(key: int, fd: int) -> None:
    with _lock:
        _refs.pop(key, None)
    os.close(fd)


def ref_of(array: np.ndarray) -> SharedRef | None:
    """Where a process can find `array`'s memory; None unless it came from `shared_empty`."""
    with _lock:
        return _refs.get(id(array))


def map_shared(fd: int, nbytes: int, shape: tuple[int, ...]) -> tuple[mmap.mmap, np.ndarray]:
    """In the synthesis process: the array behind a received descriptor (the descriptor can
    be closed once mapped)."""
    block = mmap.mmap(fd, max(nbytes, 8))
    return block, np.frombuffer(block, dtype=np.uint64, count=nbytes // 8).reshape(shape)
