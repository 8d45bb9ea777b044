"""The CPU backend: the GPU-side phases computed on the host, for real.

Field vectors and NTTs run in numpy (prover/field.py, prover/ntt.py); curve sums run in the
independent curve library. "Device" buffers are ordinary host arrays and every memory mode
keeps its buffer flow over ordinary memory, so traces from this backend say
`memory_emulated`: copies here are real memcpys, but no PCIe link is involved.
"""

from __future__ import annotations

import platform
from typing import Any

import numpy as np

from workbench.config import ConfigError, RunConfig
from workbench.prover import curve, ntt, srs
from workbench.prover.backend import Backend, DeviceBuffers, HostMemory
from workbench.prover.host_curve import HostCurvePhases
from workbench.prover.shared_arrays import shared_empty
from workbench.trace.scope import Scope

# Beyond this the CPU's MSMs and the key's setup take minutes (the setup: 2^16 about a minute
# on the 2-core development box, once; it is cached on disk).
MAX_LOG2_CPU = 18


class EmulatedHostMemory(HostMemory):
    emulated = True

    def pageable(self, shape: tuple[int, ...], shared: bool = False) -> np.ndarray:
        return shared_empty(shape) if shared else np.empty(shape, dtype=np.uint64)

    def pinned(self, shape: tuple[int, ...], shared: bool = False) -> np.ndarray:
        # Touch every page now, as pinning does, so first use is not a page-fault storm.
        array = self.pageable(shape, shared)
        array[...] = 0
        return array

    def register(self, array: np.ndarray) -> None:
        pass

    def unregister(self, array: np.ndarray) -> None:
        pass


class CpuBackend(HostCurvePhases, Backend):
    name = "cpu"

    def __init__(self) -> None:
        self.host = EmulatedHostMemory()
        self.key: srs.Srs | None = None
        self.setup_notices: list[str] = []
        self.domain: ntt.Domain | None = None

    def check(self, config: RunConfig) -> None:
        if config.log2_constraints > MAX_LOG2_CPU:
            raise ConfigError(
                "log2_constraints", config.log2_constraints,
                f"at most {MAX_LOG2_CPU} on the CPU backend (larger sizes need the GPU backend)",
            )

    def setup(self, config: RunConfig, scope: Scope) -> None:
        self.load_groth16_key(config, scope)
        self.parse_key_points(scope)
        with scope.span("twiddles"):
            self.domain = ntt.Domain(config.log2_constraints)

    def new_device_buffers(self, worker: int, with_staging: bool, gpu: int = 0) -> DeviceBuffers:
        assert self.domain is not None, "setup() first"
        shape = (self.domain.size, 4)
        staging = tuple(self.host.pinned(shape) for _ in range(3)) if with_staging else None
        return DeviceBuffers(
            np.zeros(shape, np.uint64), np.zeros(shape, np.uint64), np.zeros(shape, np.uint64),
            staging,  # type: ignore[arg-type]
            gpu=gpu,
        )

    def copy_to_device(
        self, buffers: DeviceBuffers, device_array: Any, host_array: np.ndarray, scope: Scope,
    ) -> float | None:
        np.copyto(device_array, host_array)
        return None

    def ntt_msm_h(self, buffers: DeviceBuffers, scope: Scope) -> Any:
        assert self.domain is not None and self.key is not None
        h = compute_h_recorded(buffers.a, buffers.b, buffers.c, self.domain, scope)
        buffers.extra["h"] = h
        with scope.span("msm_h", points=len(h)):
            return curve.msm(self.key.h, h)

    def h_vector(self, buffers: DeviceBuffers) -> np.ndarray:
        return np.array(buffers.extra["h"])

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "device": f"CPU ({platform.machine()}); GPUs emulated"}


# The CPU's stages as the cuzk NTT_H line reports them: the six forward transforms with the
# pointwise step, then the final coset inverse.
STAGE_SPANS = {"forward": ("ntt", 6), "inverse": ("coset_intt", 1)}


def compute_h_recorded(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, domain: ntt.Domain, scope: Scope,
) -> np.ndarray:
    """h = (A·B − C)/Z with the prover's 7 NTTs, each stage recorded as its own span."""

    def stage(name: str) -> Any:
        span, transforms = STAGE_SPANS[name]
        return scope.span(span, transforms=transforms)

    return ntt.compute_h(a, b, c, domain, stage)
