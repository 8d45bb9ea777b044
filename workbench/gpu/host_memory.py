"""Host memory as the GPU sees it: pageable arrays, real pinned allocations, registration."""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.gpu import kernels
from workbench.prover.backend import HostMemory


class CudaHostMemory(HostMemory):
    emulated = False

    def __init__(self) -> None:
        self._cp: Any = kernels.require_cupy()

    def pageable(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.empty(shape, dtype=np.uint64)

    def pinned(self, shape: tuple[int, ...]) -> np.ndarray:
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
