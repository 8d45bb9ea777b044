"""Host memory contention across GPUs: do copies to one GPU slow down copies to another?

Every GPU's host-to-device copies read host memory; a pageable copy is also staged by a host
memcpy. With several GPUs those reads compete for the same memory bandwidth, so a copy
that runs while copies to other GPUs run may be slower than one that runs alone. Each copy's
effective rate is set against the mean number of copies on other GPUs running during it and
the mean number of synthesis threads running during it (the other heavy host-memory users),
so the two causes can be told apart.

Contract: `host_contention(trace, copy_bytes=None) -> HostContention | None`, None when the
copies do not span at least two GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.distribution import correlation
from workbench.analysis.intervals import Intervals, concurrency_ns
from workbench.analysis.transfers import copy_rates
from workbench.analysis.utilisation import worker_gpus
from workbench.trace.container import Trace

EVIDENCE = 5


@dataclass(frozen=True)
class ContendedCopy:
    span: int  # index into the trace's span table
    gpu: int
    source: str
    gbps: float
    other_gpu_copies: float  # mean number of copies on other GPUs running during it
    synth_active: float  # mean number of synthesis threads running during it


@dataclass(frozen=True)
class GpuCopies:
    gpu: int
    copies: int
    pageable: int
    median_gbps: float | None
    overlapping: int  # copies that ran while another GPU copied


@dataclass(frozen=True)
class HostContention:
    gpus: tuple[int, ...]
    copies: tuple[ContendedCopy, ...]
    per_gpu: tuple[GpuCopies, ...]
    overlapping: int  # copies that ran at some point while another GPU copied
    pageable_overlap_ms: float  # time pageable copies ran on two or more GPUs at once
    alone_gbps: float | None  # median rate of copies no other GPU's copy overlapped
    concurrent_gbps: float | None  # median rate of copies another GPU's copy overlapped
    other_gpu_correlation: float | None  # r(rate, copies running on other GPUs)
    synth_correlation: float | None  # r(rate, synthesis threads running)
    excess_ms: float  # time overlapped copies took beyond the rate of copies running alone
    slowest: tuple[int, ...]  # span indices of the slowest overlapped copies

    @property
    def slowdown(self) -> float | None:
        """How much slower an overlapped copy runs than one alone (0.25: a quarter slower)."""
        if not self.alone_gbps or self.concurrent_gbps is None:
            return None
        return 1 - self.concurrent_gbps / self.alone_gbps

    def gpu(self, gpu: int) -> GpuCopies | None:
        return next((g for g in self.per_gpu if g.gpu == gpu), None)


def host_contention(trace: Trace, copy_bytes: float | None = None) -> HostContention | None:
    owner = worker_gpus(trace)
    spans = trace.spans
    rows = [c for c in copy_rates(trace, copy_bytes)
            if c.gbps is not None and int(spans.worker[c.span]) in owner]
    if not rows:
        return None
    idx = np.array([c.span for c in rows], dtype=np.int64)
    gpu = np.array([owner[int(spans.worker[i])] for i in idx.tolist()], dtype=np.int64)
    found = tuple(int(g) for g in np.unique(gpu).tolist())
    if len(found) < 2:
        return None
    starts, ends = spans.start_ns[idx], spans.end_ns[idx]
    length = np.maximum(ends - starts, 1).astype(np.float64)
    rates = np.array([c.gbps for c in rows], dtype=np.float64)
    pageable = np.array([c.source == "pageable" for c in rows], dtype=bool)
    nbytes = np.array([c.bytes for c in rows], dtype=np.float64)

    others = np.zeros(len(rows), dtype=np.float64)
    for g in found:
        mine = gpu == g
        others[mine] = concurrency_ns(starts[mine], ends[mine], starts[~mine], ends[~mine]) / length[mine]
    synth = trace.span_mask(name="synthesis")
    synth_active = concurrency_ns(starts, ends, spans.start_ns[synth], spans.end_ns[synth]) / length

    overlapped = others > 0
    alone = float(np.median(rates[~overlapped])) if (~overlapped).any() else None
    concurrent = float(np.median(rates[overlapped])) if overlapped.any() else None
    excess = 0.0
    if alone:
        at_alone_ns = nbytes[overlapped] / alone
        excess = float(np.clip(length[overlapped] - at_alone_ns, 0, None).sum()) / 1e6
    order = np.argsort(rates[overlapped], kind="stable")[:EVIDENCE]
    per_gpu = tuple(
        GpuCopies(g, int((gpu == g).sum()), int((pageable & (gpu == g)).sum()),
                  float(np.median(rates[gpu == g])), int((overlapped & (gpu == g)).sum()))
        for g in found
    )
    return HostContention(
        gpus=found,
        copies=tuple(
            ContendedCopy(int(i), int(g), c.source, float(r), float(o), float(s))
            for i, g, c, r, o, s in zip(idx.tolist(), gpu.tolist(), rows, rates.tolist(), others.tolist(),
                                        synth_active.tolist(), strict=True)
        ),
        per_gpu=per_gpu,
        overlapping=int(overlapped.sum()),
        pageable_overlap_ms=_overlap_ms(starts[pageable], ends[pageable], gpu[pageable], found),
        alone_gbps=alone, concurrent_gbps=concurrent,
        other_gpu_correlation=correlation(rates, others),
        synth_correlation=correlation(rates, synth_active),
        excess_ms=excess,
        slowest=tuple(int(i) for i in idx[overlapped][order].tolist()),
    )


def _overlap_ms(starts: np.ndarray, ends: np.ndarray, gpu: np.ndarray, found: tuple[int, ...]) -> float:
    """Time covered by copies of at least two GPUs at once (each GPU's copies merged first, so
    a GPU's own back-to-back copies do not count as overlap)."""
    per_gpu = [Intervals.of(starts[gpu == g], ends[gpu == g]) for g in found]
    both = Intervals.empty()
    for a in range(len(per_gpu)):
        for b in range(a + 1, len(per_gpu)):
            both = both.union(per_gpu[a].intersect(per_gpu[b]))
    return both.total() / 1e6
