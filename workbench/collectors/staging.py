"""Host-to-device copies from pageable arrays with their staging made visible.

`cupy.asarray(numpy_array)` first copies a pageable array into a pinned bounce buffer (a
host memcpy no trace shows), then lets the device pull it at full link speed: the device
record says "pinned", the time went into the memcpy. `staged_asarray` and `staged_set` do
the same two steps themselves and record them: the bounce as a `staging_copy` span with
`hidden=True` (the staging that plain CuPy would have hidden), the transfer as an `h2d_copy`
span with `staged=True`. A source that is already pinned (or already on the device) gets no
staging span, as in CuPy.

The workbench's own pipeline copies with a runtime memcpy instead, where the driver stages
pageable memory itself; that cost shows as the host `h2d_copy` span's length minus the
device copy's (`host_overhead_ms` on the device record, see `attribution`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.trace.scope import Scope

UNREGISTERED = 0  # cudaMemoryTypeUnregistered: ordinary pageable memory


def is_pinned(array: np.ndarray, xp: Any) -> bool:
    """Whether the driver knows this host memory (pinned or registered): no staging needed."""
    attributes = xp.cuda.runtime.pointerGetAttributes(array.ctypes.data)
    return int(attributes.type) != UNREGISTERED


def staged_asarray(host: Any, scope: Scope, stream: Any = None, xp: Any = None) -> Any:
    """`cupy.asarray(host)` with its staging recorded; returns once the copy is done."""
    xp = xp or _cupy()
    if isinstance(host, xp.ndarray):
        return host
    host = np.ascontiguousarray(host)
    out = xp.empty(host.shape, dtype=host.dtype)
    staged_set(out, host, scope, stream, xp)
    return out


def staged_set(device: Any, host: np.ndarray, scope: Scope, stream: Any = None, xp: Any = None) -> None:
    """`device.set(host)` through a pinned bounce buffer, both steps recorded; blocking."""
    xp = xp or _cupy()
    stream = stream if stream is not None else xp.cuda.get_current_stream()
    host = np.ascontiguousarray(host)
    source = host
    if not is_pinned(host, xp):
        memory = xp.cuda.alloc_pinned_memory(host.nbytes)
        source = np.frombuffer(memory, dtype=host.dtype, count=host.size).reshape(host.shape)
        with scope.span("staging_copy", hidden=True, bytes=host.nbytes):
            np.copyto(source, host)
    with scope.span("h2d_copy", bytes=host.nbytes, source="pinned", staged=source is not host):
        device.set(source, stream=stream)
        # The bounce buffer goes back to CuPy's pool when `source` dies: the copy must be done.
        stream.synchronize()


def _cupy() -> Any:
    from workbench.gpu import kernels

    return kernels.require_cupy()
