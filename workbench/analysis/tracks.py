"""Which tracks and span names mean what, so every analysis reads a trace the same way.

Host side: `worker/<w>` (GPU thread), `worker/<w>/prep`, `synth/<t>`, `mutex/gpu<n>`,
`barrier/worker<w>`. Device side, when collected: `gpu<n>/stream/<s>` (kernels),
`gpu<n>/copy` (`h2d` / `d2h` copies), counters on `nvml/gpu<n>`.
"""

from __future__ import annotations

import re

import numpy as np

from workbench.model.pipeline import COPY_SPANS as PIPELINE_COPY_SPANS
from workbench.model.pipeline import PROVER
from workbench.trace.container import Trace

# The prover's structure, from the one pipeline model (model/pipeline.py).
COMPUTE_SPANS = PROVER.compute_spans  # GPU compute timed on the host (kernels plus their synchronisation)
LOCK_PHASES = PROVER.lock_phases  # the GPU thread's phases under the mutex, in order
GPU_PHASES = PROVER.gpu_phases  # the lock phases that run the GPU
COPY_SPANS = PIPELINE_COPY_SPANS  # host-side spans that move a, b, c towards the device
AFTER_LOCK = PROVER.after_lock  # CPU work after the mutex is released

_GPU = re.compile(r"^(?:mutex/gpu|gpu|nvml/gpu)(\d+)(?:/|$)")
_WORKER = re.compile(r"^worker/(\d+)$")


def gpus(trace: Trace) -> list[int]:
    """GPU numbers that any mutex, device or NVML track mentions."""
    found = {int(m.group(1)) for t in trace.tracks() if (m := _GPU.match(t))}
    return sorted(found)


def worker_ids(trace: Trace) -> list[int]:
    found = {int(m.group(1)) for t in trace.tracks() if (m := _WORKER.match(t))}
    return sorted(found)


def names_mask(trace: Trace, names: tuple[str, ...], track_prefix: str | None = None) -> np.ndarray:
    ids = [trace.string_id(n) for n in names]
    mask = np.isin(trace.spans.name, [i for i in ids if i >= 0])
    if track_prefix is not None:
        mask &= trace.span_mask(track_prefix=track_prefix)
    return mask


def worker_mask(trace: Trace) -> np.ndarray:
    """Spans on GPU-worker threads (`worker/<w>`, not their prep threads)."""
    ids = [i for i, s in enumerate(trace.strings.values) if _WORKER.match(s)]
    return np.isin(trace.spans.track, ids)


def kernel_mask(trace: Trace, gpu: int) -> np.ndarray:
    return trace.span_mask(track_prefix=f"gpu{gpu}/stream/")


def device_copy_mask(trace: Trace, gpu: int, name: str | None = None) -> np.ndarray:
    return trace.span_mask(track=f"gpu{gpu}/copy", name=name)


def counter_values(trace: Trace, track: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    c = trace.counters
    mask = (c.track == trace.string_id(track)) & (c.name == trace.string_id(name))
    return c.ts_ns[mask], c.value[mask]
