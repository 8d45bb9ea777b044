"""The interface a prover backend implements (pipeline/backends.py picks one for a run).

A backend owns "device" memory and the arithmetic of the GPU-side phases. The CPU backend
computes everything with numpy and the independent curve library, emulating device memory
with host arrays; the GPU backend (kernels/) runs the same phases on the device. The
pipeline only ever talks to this interface, so backends drop in.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.config import RunConfig
from workbench.prover.prep import PrepResult
from workbench.trace.scope import Scope


class BackendUnavailable(RuntimeError):
    """The asked-for backend cannot run here; the message says why and what to install."""


@dataclass
class DeviceBuffers:
    """One worker's device-side vectors, allocated once and reused for every partition."""

    a: Any
    b: Any
    c: Any
    staging: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # pinned mode only
    extra: dict[str, Any] = field(default_factory=dict)
    gpu: int = 0  # the device these buffers live on


class Deferred:
    """A GPU phase's result whose last step is host-only (an MSM's window combination):
    the pipeline resolves it after releasing the GPU mutex, so the host arithmetic does not
    hold the GPU idle under the lock."""

    __slots__ = ("_compute",)

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute = compute

    def resolve(self) -> Any:
        return self._compute()


def settle(value: Any) -> Any:
    """`value` with every Deferred in it (at the top or as a dict value) resolved."""
    if isinstance(value, Deferred):
        return value.resolve()
    if isinstance(value, dict):
        return {k: settle(v) for k, v in value.items()}
    return value


class HostMemory(ABC):
    """Host allocations as a backend provides them (really pinned on a GPU, emulated on CPU)."""

    emulated: bool

    # shared=True: the array's memory can be handed to a synthesis process, which then
    # writes it in place (pipeline/shared_arrays.py).
    @abstractmethod
    def pageable(self, shape: tuple[int, ...], shared: bool = False) -> np.ndarray: ...

    @abstractmethod
    def pinned(self, shape: tuple[int, ...], shared: bool = False) -> np.ndarray: ...

    @abstractmethod
    def register(self, array: np.ndarray) -> None: ...

    @abstractmethod
    def unregister(self, array: np.ndarray) -> None: ...


B_G2 = "b_g2"
"""The key under which batch_add and tail_msm return the G2 part of B, where they compute it."""


class Backend(ABC):
    name: str
    host: HostMemory
    # True when batch_add and tail_msm also sum B's G2 query (under B_G2 in their results),
    # so the pipeline adds the two parts instead of running the b_g2_msm phase.
    b_g2_in_gpu_phases: bool = False

    def check(self, config: RunConfig) -> None:
        """Raise ConfigError for settings this backend cannot run."""

    @abstractmethod
    def setup(self, config: RunConfig, scope: Scope) -> None:
        """Once per run, before any partition: the proving key, twiddles, kernels."""

    @abstractmethod
    def new_device_buffers(self, worker: int, with_staging: bool, gpu: int = 0) -> DeviceBuffers: ...

    def warm_up(self, buffers: DeviceBuffers) -> None:
        """Run the GPU phases once on made-up data (during setup), so a worker's first
        partition does not pay for first launches and memory-pool growth. Nothing to do
        where nothing is launched."""

    @abstractmethod
    def copy_to_device(
        self, buffers: DeviceBuffers, device_array: Any, host_array: np.ndarray, scope: Scope,
    ) -> float | None:
        """Host to device copy of one vector, complete when this returns. Returns the copy's
        device-side duration in ms where the backend can measure it (None otherwise)."""

    @abstractmethod
    def ntt_msm_h(self, buffers: DeviceBuffers, scope: Scope) -> Any:
        """h from a, b, c already on the device, then its MSM with the H query."""

    @abstractmethod
    def h_vector(self, buffers: DeviceBuffers) -> np.ndarray:
        """A host copy of the h last computed in these buffers (for checking results)."""

    @abstractmethod
    def batch_add(self, buffers: DeviceBuffers, prep: PrepResult, scope: Scope) -> dict[str, Any]: ...

    @abstractmethod
    def tail_msm(self, buffers: DeviceBuffers, prep: PrepResult, scope: Scope) -> dict[str, Any]: ...

    @abstractmethod
    def b_g2_msm(self, witness: np.ndarray, prep: PrepResult, scope: Scope) -> Any: ...

    @abstractmethod
    def finish(self, parts: dict[str, Any], partition: int, scope: Scope) -> Any: ...

    def describe(self) -> dict[str, Any]:
        """Facts about the backend for the trace's metadata (device name, versions, ...)."""
        return {"backend": self.name}

    def close(self) -> None:
        pass
