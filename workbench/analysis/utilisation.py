"""Utilisation per GPU, each figure named for what it measures.

- `mutex_held`: share of the run the GPU mutex was held (what the host believes is GPU time).
- `host_timed_compute`: share covered by compute phases timed on the host (kernels plus
  their synchronisation), or, for logs that do not break ntt_msm_h down, an estimate that
  counts each ntt_msm_h only up to the fastest one's length.
- `kernel_busy` / `copy_busy`: share with at least one kernel / copy in the device records
  (of a recording that sampled its kernels, `kernel_busy` is the share of its sampling
  windows: analysis/sampling.py).
- `nvml_duty_cycle`: mean of NVML's sampled utilisation (a kernel ran during the sample).

Contract: `utilisation(trace) -> tuple[GpuUtilisation, ...]`, one per GPU the trace names;
`gpu_shares(trace, utilisation)` -> each GPU's part of the run's partitions and throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.intervals import Intervals
from workbench.analysis.sampling import judged_windows
from workbench.analysis.summary import run_window_ns
from workbench.analysis.tracks import (
    COMPUTE_SPANS,
    counter_values,
    device_copy_mask,
    gpus,
    kernel_mask,
    kind_mask,
    names_mask,
    worker_mask,
)
from workbench.model import tracks as tr
from workbench.trace.container import Trace

DEVICE_KERNELS = "device kernels"
HOST_TIMED = "compute phases timed on the host"
ESTIMATED = "estimated: batch_add + tail_msm + the fastest ntt_msm_h"


@dataclass(frozen=True)
class GpuUtilisation:
    gpu: int
    window_ms: float
    mutex_held: float | None
    host_timed_compute: float | None
    compute_source: str  # how host_timed_compute was obtained (HOST_TIMED or ESTIMATED)
    kernel_busy: float | None
    copy_busy: float | None
    nvml_duty_cycle: float | None
    nvml_pcie_rx_gbps: float | None  # mean host-to-device rate NVML sampled
    # Mutex-held time over GPU compute time (device kernels when recorded): how much longer
    # the lock is held than the GPU computes. None without both.
    held_over_compute: float | None


@dataclass(frozen=True)
class GpuShare:
    gpu: int
    workers: tuple[int, ...]
    partitions: int  # finished without error by this GPU's workers
    throughput_per_min: float
    partition_share: float  # of the run's finished partitions
    busy: float | None  # kernel_busy where recorded, else host_timed_compute
    busy_basis: str
    mutex_held: float | None


def gpu_shares(trace: Trace, found: tuple[GpuUtilisation, ...]) -> tuple[GpuShare, ...]:
    start, end = run_window_ns(trace)
    minutes = (end - start) / 60e9
    finished = trace.span_mask(name="finish") & worker_mask(trace)
    index = np.flatnonzero(finished)
    ok = np.array([not (a and "error" in a) for a in (trace.spans.attrs[i] for i in index.tolist())],
                  dtype=bool)
    done_workers = trace.spans.worker[index[ok]] if ok.size else np.zeros(0, np.int32)
    owner = worker_gpus(trace)
    total = len(done_workers)
    out = []
    for u in found:
        workers = tuple(sorted(w for w, g in owner.items() if g == u.gpu)
                        or sorted(workers_of_gpu(trace, u.gpu)))
        done = int(np.isin(done_workers, workers).sum())
        busy = u.kernel_busy if u.kernel_busy is not None else u.host_timed_compute
        out.append(GpuShare(
            gpu=u.gpu, workers=workers, partitions=done,
            throughput_per_min=done / minutes if minutes > 0 else 0.0,
            partition_share=done / total if total else 0.0, busy=busy,
            busy_basis=DEVICE_KERNELS if u.kernel_busy is not None else u.compute_source,
            mutex_held=u.mutex_held,
        ))
    return tuple(out)


def utilisation(trace: Trace) -> tuple[GpuUtilisation, ...]:
    start, end = run_window_ns(trace)
    found = gpus(trace) or ([0] if worker_mask(trace).any() else [])
    return tuple(gpu_utilisation(trace, gpu, start, end) for gpu in found)


def gpu_utilisation(trace: Trace, gpu: int, start: int, end: int) -> GpuUtilisation:
    window = max(end - start, 0)

    def fraction(intervals: Intervals | None) -> float | None:
        if intervals is None or window == 0:
            return None
        return intervals.clip(start, end).total() / window

    held = held_intervals(trace, gpu)
    compute, source = host_compute_intervals(trace, gpu)
    kernels = _spans(trace, kernel_mask(trace, gpu))
    copies = _spans(trace, device_copy_mask(trace, gpu))
    judged = judged_windows(trace) if kernels is not None else None
    kernel_busy = fraction(kernels)
    if judged is not None and kernels is not None:  # sampled kernels: busy within the windows only
        scope = judged.clip(start, end)
        kernel_busy = kernels.intersect(scope).total() / scope.total() if scope.total() else None
    busiest = kernels if kernels is not None else compute
    ratio = None
    if held is not None and busiest is not None and busiest.clip(start, end).total() > 0:
        ratio = held.clip(start, end).total() / busiest.clip(start, end).total()
    return GpuUtilisation(
        gpu=gpu, window_ms=window / 1e6, mutex_held=fraction(held),
        host_timed_compute=fraction(compute), compute_source=source,
        kernel_busy=kernel_busy, copy_busy=fraction(copies),
        nvml_duty_cycle=_nvml_mean(trace, gpu, "utilization_gpu", start, end, scale=0.01),
        nvml_pcie_rx_gbps=_nvml_mean(trace, gpu, "pcie_rx_bytes_s", start, end, scale=1e-9),
        held_over_compute=ratio,
    )


def steady_window_ns(trace: Trace, gpu: int = 0) -> tuple[int, int] | None:
    """The pipeline's steady state on one GPU: from the moment every worker has finished its
    first hold (first launches load modules and grow memory pools; on the H200 a worker's
    first ntt_msm_h took 507-746 ms against 84 ms medians) to the start of the first of the
    workers' last holds (after it the other workers have no partition left to alternate
    with). None when a worker held the mutex fewer than three times."""
    mask = trace.span_mask(track=tr.mutex_track(gpu), name="hold")
    workers = trace.spans.worker[mask]
    if not len(workers):
        return None
    starts, ends = trace.spans.start_ns[mask], trace.spans.end_ns[mask]
    first_ends, last_starts = [], []
    for w in np.unique(workers).tolist():
        mine = workers == w
        if mine.sum() < 3:
            return None
        first_ends.append(int(ends[mine].min()))
        last_starts.append(int(starts[mine].max()))
    lo, hi = max(first_ends), min(last_starts)
    return (lo, hi) if hi > lo else None


def held_intervals(trace: Trace, gpu: int) -> Intervals | None:
    return _spans(trace, trace.span_mask(track=tr.mutex_track(gpu), name="hold"))


def worker_gpus(trace: Trace) -> dict[int, int]:
    """Which GPU each worker serves: the run's own map when it stored one, else the mutex
    each worker held (a worker only ever takes its own GPU's lock)."""
    stored = trace.meta.get("worker_gpu")
    if isinstance(stored, dict) and stored:
        return {int(w): int(g) for w, g in stored.items()}
    out: dict[int, int] = {}
    holds = kind_mask(trace, tr.MUTEX, name="hold")
    for i in np.flatnonzero(holds).tolist():
        if int(trace.spans.worker[i]) >= 0:
            gpu = tr.gpu_of(trace.strings.values[trace.spans.track[i]])
            out.setdefault(int(trace.spans.worker[i]), gpu)
    return out


def workers_of_gpu(trace: Trace, gpu: int) -> set[int]:
    """Workers that hold this GPU's mutex (all workers when no mutex was recorded)."""
    holds = kind_mask(trace, tr.MUTEX, name="hold")
    if not holds.any():
        return set(np.unique(trace.spans.worker[worker_mask(trace)]).tolist())
    mine = trace.span_mask(track=tr.mutex_track(gpu), name="hold")
    return set(np.unique(trace.spans.worker[mine]).tolist())


def host_compute_intervals(trace: Trace, gpu: int) -> tuple[Intervals | None, str]:
    workers = list(workers_of_gpu(trace, gpu))
    on_workers = worker_mask(trace) & np.isin(trace.spans.worker, workers)
    mask = names_mask(trace, COMPUTE_SPANS) & on_workers
    broken_down = names_mask(trace, ("ntt", "msm_h")) & on_workers
    whole = trace.span_mask(name="ntt_msm_h") & on_workers
    if broken_down.any() or not whole.any():
        return _spans(trace, mask), HOST_TIMED
    # ntt_msm_h without its parts: its kernel share is at most the fastest instance.
    starts = trace.spans.start_ns[whole]
    fastest = int((trace.spans.end_ns[whole] - starts).min())
    estimated = Intervals.of(starts, starts + fastest)
    rest = _spans(trace, mask)
    return (estimated if rest is None else estimated.union(rest)), ESTIMATED


def _spans(trace: Trace, mask: np.ndarray) -> Intervals | None:
    if not mask.any():
        return None
    return Intervals.of(trace.spans.start_ns[mask], trace.spans.end_ns[mask])


def _nvml_mean(
    trace: Trace, gpu: int, name: str, start: int, end: int, scale: float,
) -> float | None:
    ts, values = counter_values(trace, tr.nvml_track(gpu), name)
    inside = (ts >= start) & (ts <= end)
    if not inside.any():
        return None
    return float(values[inside].mean()) * scale
