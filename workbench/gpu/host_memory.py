"""Host memory as the GPU sees it: pageable arrays, real pinned allocations, registration."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from workbench.gpu import kernels
from workbench.prover.backend import HostMemory
from workbench.prover.shared_arrays import shared_empty


class CudaHostMemory(HostMemory):
    emulated = False

    def __init__(self) -> None:
        self._cp: Any = kernels.require_cupy()

    def pageable(self, shape: tuple[int, ...], shared: bool = False) -> np.ndarray:
        return shared_empty(shape) if shared else np.empty(shape, dtype=np.uint64)

    def pinned(self, shape: tuple[int, ...], shared: bool = False) -> np.ndarray:
        if shared:
            # Memory a synthesis process can map, page-locked by registering it: pinned
            # as an allocation of the driver's would be, and unregistered before it goes.
            array = shared_empty(shape)
            array[...] = 0  # touch every page now, not in the first timed copy
            self.register(array)
            done = weakref.finalize(array, self._cp.cuda.runtime.hostUnregister, array.ctypes.data)
            done.atexit = False  # at exit the driver may be gone already; the process frees all
            return array
        count = int(np.prod(shape))
        memory = self._cp.cuda.alloc_pinned_memory(count * 8)
        # The array keeps the pinned allocation alive through the buffer it views.
        array = np.frombuffer(memory, dtype=np.uint64, count=count).reshape(shape)
        array[...] = 0  # touch every page now, not in the first timed copy
        return array

    def register(self, array: np.ndarray) -> None:
        self._cp.cuda.runtime.hostRegister(array.ctypes.data, array.nbytes, 0)

    def unregister(self, array: np.ndarray) -> None:
        self._cp.cuda.runtime.hostUnregister(array.ctypes.data)
