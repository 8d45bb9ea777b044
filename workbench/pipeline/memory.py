"""Memory modes: where synthesis writes a, b, c and how they reach the device.

| mode        | synthesis writes into            | upload                                        |
|-------------|----------------------------------|-----------------------------------------------|
| pageable    | fresh ordinary arrays            | plain copy (the runtime stages it internally) |
| pinned      | fresh ordinary arrays            | recorded memcpy into pinned staging, then DMA |
| zerocopy    | buffers checked out of a pinned  | DMA straight from the pool buffer, which goes |
|             | pool                             | back to the pool after the copy               |
| registered  | fresh arrays, registered with    | DMA; registration and unregistration recorded |
|             | the driver after allocation      |                                               |

With synthesis in processes (`synthesis=processes`) every buffer synthesis writes is
allocated so that a synthesis process can map it and write it in place
(prover/shared_arrays.py); the pinned pool's buffers are then registered with the driver
after allocation, which page-locks them as the driver's own pinned allocation does.

On the CPU backend the same buffer flow runs (pool checkout and return, staging copies,
registration calls) over ordinary memory, and every copy span says `emulated=True`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from workbench.prover.backend import Backend, DeviceBuffers, HostMemory
from workbench.trace.scope import Scope

VECTORS = ("a", "b", "c")


class PoolClosed(RuntimeError):
    """The pool was closed while a thread waited for a buffer."""


@dataclass
class PartitionBuffers:
    """What synthesis writes for one partition: the witness and the a, b, c vectors."""

    witness: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    slot: int = -1  # pool slot for zerocopy, -1 otherwise
    released: bool = field(default=False)

    def vectors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.a, self.b, self.c


@dataclass(frozen=True)
class PoolStatistics:
    capacity: int
    in_use: int
    max_in_use: int
    checkouts: int
    returns: int


class PinnedPool:
    """A fixed set of pinned a/b/c buffer triples, checked out by synthesis, returned after upload."""

    def __init__(self, host: HostMemory, capacity: int, shape: tuple[int, int], shared: bool = False) -> None:
        self._free = list(range(capacity))
        self._buffers = [tuple(host.pinned(shape, shared) for _ in VECTORS) for _ in range(capacity)]
        self._cond = threading.Condition()
        self._capacity = capacity
        self._in_use = 0
        self._max_in_use = 0
        self._checkouts = 0
        self._returns = 0
        self._closed: str | None = None

    def checkout(self) -> tuple[int, tuple[np.ndarray, ...]]:
        with self._cond:
            while not self._free:
                if self._closed is not None:
                    raise PoolClosed(f"pinned pool closed: {self._closed}")
                self._cond.wait()
            if self._closed is not None:
                raise PoolClosed(f"pinned pool closed: {self._closed}")
            slot = self._free.pop()
            self._in_use += 1
            self._checkouts += 1
            self._max_in_use = max(self._max_in_use, self._in_use)
            return slot, self._buffers[slot]

    def give_back(self, slot: int) -> None:
        with self._cond:
            if slot in self._free or not 0 <= slot < self._capacity:
                raise RuntimeError(f"pinned pool slot {slot} returned twice or never checked out")
            self._free.append(slot)
            self._in_use -= 1
            self._returns += 1
            self._cond.notify()

    def close(self, reason: str) -> None:
        with self._cond:
            self._closed = reason
            self._cond.notify_all()

    def statistics(self) -> PoolStatistics:
        with self._cond:
            return PoolStatistics(
                self._capacity, self._in_use, self._max_in_use, self._checkouts, self._returns
            )


class MemoryMode(ABC):
    name: ClassVar[str]

    def __init__(self, backend: Backend, n: int, m: int, shared: bool = False) -> None:
        self.backend = backend
        self.host = backend.host
        self.shape = (n, 4)
        self.witness_shape = (m, 4)
        # Buffers synthesis processes write in place (prover/shared_arrays.py).
        self.shared = shared

    @property
    def needs_staging(self) -> bool:
        return False

    @abstractmethod
    def checkout(self, scope: Scope) -> PartitionBuffers:
        """Buffers for synthesis to write one partition into (synthesis thread)."""

    def upload(self, buffers: PartitionBuffers, device: DeviceBuffers, scope: Scope) -> None:
        """Copy a, b, c to the worker's device buffers, recording each copy (worker thread)."""
        for vector, host_array, device_array in zip(
            VECTORS, buffers.vectors(), (device.a, device.b, device.c), strict=True
        ):
            self._upload_one(vector, host_array, device_array, device, scope)
        self.after_upload(buffers, scope)

    def _upload_one(
        self, vector: str, host_array: np.ndarray, device_array: object,
        device: DeviceBuffers, scope: Scope,
    ) -> None:
        with scope.span("h2d_copy", vector=vector, bytes=host_array.nbytes, source=self.source,
                        emulated=self.host.emulated) as span:
            device_ms = self.backend.copy_to_device(device, device_array, host_array, scope)
            if device_ms is not None:
                span.set("device_ms", device_ms)

    source: ClassVar[str] = "pageable"

    def after_upload(self, buffers: PartitionBuffers, scope: Scope) -> None:
        buffers.released = True

    def discard(self, buffers: PartitionBuffers, scope: Scope | None = None) -> None:
        """Give back what a partition still holds: after its proof's GPU phases (the worker,
        once the mutex is released, with its scope) or when it will never be uploaded."""
        if not buffers.released:
            buffers.released = True

    def close(self, reason: str) -> None:
        pass


class PageableMode(MemoryMode):
    name = "pageable"

    def checkout(self, scope: Scope) -> PartitionBuffers:
        host = self.host
        a, b, c = (host.pageable(self.shape, self.shared) for _ in VECTORS)
        return PartitionBuffers(host.pageable(self.witness_shape, self.shared), a, b, c)


class PinnedStagingMode(PageableMode):
    name = "pinned"
    source = "pinned"

    @property
    def needs_staging(self) -> bool:
        return True

    def _upload_one(
        self, vector: str, host_array: np.ndarray, device_array: object,
        device: DeviceBuffers, scope: Scope,
    ) -> None:
        assert device.staging is not None, "pinned mode needs staging buffers on every worker"
        staging = device.staging[VECTORS.index(vector)]
        with scope.span("staging_copy", vector=vector, bytes=host_array.nbytes,
                        emulated=self.host.emulated):
            np.copyto(staging, host_array)
        super()._upload_one(vector, staging, device_array, device, scope)


class ZeroCopyMode(MemoryMode):
    name = "zerocopy"
    source = "pinned"

    def __init__(self, backend: Backend, n: int, m: int, capacity: int, shared: bool = False) -> None:
        super().__init__(backend, n, m, shared)
        self.pool = PinnedPool(self.host, capacity, self.shape, shared)

    def checkout(self, scope: Scope) -> PartitionBuffers:
        with scope.span("pool_checkout") as span:
            slot, (a, b, c) = self.pool.checkout()
            span.set("slot", slot)
        return PartitionBuffers(self.host.pageable(self.witness_shape, self.shared), a, b, c, slot=slot)

    def after_upload(self, buffers: PartitionBuffers, scope: Scope) -> None:
        self._give_back(buffers)
        scope.instant("pool_return", slot=buffers.slot)

    def discard(self, buffers: PartitionBuffers, scope: Scope | None = None) -> None:
        self._give_back(buffers)

    def _give_back(self, buffers: PartitionBuffers) -> None:
        if not buffers.released:
            buffers.released = True
            self.pool.give_back(buffers.slot)

    def close(self, reason: str) -> None:
        self.pool.close(reason)


class RegisteredMode(PageableMode):
    name = "registered"
    source = "pinned"

    def checkout(self, scope: Scope) -> PartitionBuffers:
        buffers = super().checkout(scope)
        for array in buffers.vectors():
            with scope.span("host_register", bytes=array.nbytes, emulated=self.host.emulated):
                self.host.register(array)
        return buffers

    def after_upload(self, buffers: PartitionBuffers, scope: Scope) -> None:
        # Unregistered in discard, once the worker has released the mutex: unregistering right
        # after the copy held the lock for it (coarse scope) and made ntt_msm_h swing 4.8x on
        # the H200.
        pass

    def discard(self, buffers: PartitionBuffers, scope: Scope | None = None) -> None:
        self._unregister(buffers, scope)

    def _unregister(self, buffers: PartitionBuffers, scope: Scope | None) -> None:
        if buffers.released:
            return
        buffers.released = True
        for array in buffers.vectors():
            if scope is None:
                self.host.unregister(array)
                continue
            with scope.span("host_unregister", bytes=array.nbytes, emulated=self.host.emulated):
                self.host.unregister(array)


def make_memory_mode(name: str, backend: Backend, n: int, m: int, pool_capacity: int,
                     shared: bool = False) -> MemoryMode:
    """shared: synthesis processes write the buffers in place."""
    if name == "zerocopy":
        return ZeroCopyMode(backend, n, m, pool_capacity, shared)
    modes: dict[str, type[MemoryMode]] = {
        "pageable": PageableMode, "pinned": PinnedStagingMode, "registered": RegisteredMode,
    }
    return modes[name](backend, n, m, shared)
