"""Which tracks and span names mean what, so every analysis reads a trace the same way.

Track names are the grammar's (model/tracks.py builds and parses them all); the queries
here select spans by the kind of track `parse` finds (a worker, its prep thread, a mutex, a
stream of kernels, ...), never by spelling a name. The phase lists come from the pipeline
model (model/pipeline.py).
"""

from __future__ import annotations

import numpy as np

from workbench.model import tracks as tr
from workbench.model.pipeline import COPY_SPANS as PIPELINE_COPY_SPANS
from workbench.model.pipeline import PROVER
from workbench.trace.container import Trace

# The prover's structure, from the one pipeline model (model/pipeline.py).
COMPUTE_SPANS = PROVER.compute_spans  # GPU compute timed on the host (kernels plus their synchronisation)
LOCK_PHASES = PROVER.lock_phases  # the GPU thread's phases under the mutex, in order
GPU_PHASES = PROVER.gpu_phases  # the lock phases that run the GPU
COPY_SPANS = PIPELINE_COPY_SPANS  # host-side spans that move a, b, c towards the device
AFTER_LOCK = PROVER.after_lock  # CPU work after the mutex is released

# Threads of the pipeline that run its phases (a GPU worker and its prep thread).
PHASE_THREADS = (tr.WORKER, tr.PREP)


def track_ids(trace: Trace, *kinds: str, gpu: int | None = None, worker: int | None = None) -> list[int]:
    """String ids of the trace's track names of these kinds (on that GPU, of that worker)."""
    out = []
    for i, value in enumerate(trace.strings.values):
        t = tr.parse(value)
        if t.kind in kinds and (gpu is None or t.gpu == gpu) and (worker is None or t.worker == worker):
            out.append(i)
    return out


def kind_mask(trace: Trace, *kinds: str, name: str | None = None, gpu: int | None = None) -> np.ndarray:
    """Spans on tracks of these kinds (named `name`, on GPU `gpu`)."""
    mask = np.isin(trace.spans.track, track_ids(trace, *kinds, gpu=gpu))
    if name is not None:
        mask &= trace.spans.name == trace.string_id(name)
    return mask


def device_mask(trace: Trace) -> np.ndarray:
    """Spans a GPU recorded itself (kernels, copies, memsets, other device records)."""
    return kind_mask(trace, *tr.ON_DEVICE)


def tracks_of(trace: Trace, *kinds: str) -> list[str]:
    """The trace's tracks of these kinds, sorted."""
    return [t for t in trace.tracks() if tr.parse(t).kind in kinds]


def gpus(trace: Trace) -> list[int]:
    """GPU numbers that any mutex, device or NVML track mentions."""
    return sorted({g for t in trace.tracks() if (g := tr.gpu_of(t)) >= 0})


def worker_ids(trace: Trace) -> list[int]:
    return sorted({tr.parse(t).worker for t in tracks_of(trace, tr.WORKER)})


def names_mask(trace: Trace, names: tuple[str, ...], *kinds: str) -> np.ndarray:
    """Spans with any of these names (on tracks of these kinds, when given)."""
    ids = [trace.string_id(n) for n in names]
    mask = np.isin(trace.spans.name, [i for i in ids if i >= 0])
    if kinds:
        mask &= kind_mask(trace, *kinds)
    return mask


def worker_mask(trace: Trace) -> np.ndarray:
    """Spans on GPU-worker threads (`worker/<w>`, not their prep threads)."""
    return kind_mask(trace, tr.WORKER)


def kernel_mask(trace: Trace, gpu: int) -> np.ndarray:
    return kind_mask(trace, tr.KERNELS, gpu=gpu)


def device_copy_mask(trace: Trace, gpu: int, name: str | None = None) -> np.ndarray:
    return kind_mask(trace, tr.COPIES, name=name, gpu=gpu)


def counter_values(trace: Trace, track: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    c = trace.counters
    mask = (c.track == trace.string_id(track)) & (c.name == trace.string_id(name))
    return c.ts_ns[mask], c.value[mask]
