"""The choice of prover backend for a run.

The prover (prover/backend.py) defines the interface and knows no implementation of it; the
runner's side picks one here, so the GPU backend (gpu/, which implements the interface) and
the prover never import each other.
"""

from __future__ import annotations

from workbench.config import RunConfig
from workbench.prover.backend import Backend, BackendUnavailable

__all__ = ["BackendUnavailable", "gpu_unavailable_reason", "select_backend"]


def select_backend(config: RunConfig) -> Backend:
    """The backend a config asks for; `auto` takes the GPU when its kernels can run here."""
    if config.backend in ("gpu", "auto"):
        reason = gpu_unavailable_reason()
        if reason is None:
            from workbench.gpu.backend import GpuBackend

            return GpuBackend()
        if config.backend == "gpu":
            raise BackendUnavailable(f"--backend gpu cannot run here: {reason}")
    from workbench.prover.cpu_backend import CpuBackend

    return CpuBackend()


def gpu_unavailable_reason() -> str | None:
    """Why the GPU backend cannot run here, or None when it can."""
    try:
        import cupy
    except ImportError:
        return "cupy is not installed (pip install 'workbench[gpu]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # the runtime raises its own error types when there is no driver
        return f"no usable CUDA device ({err})"
    return None if count > 0 else "no CUDA device is visible"
