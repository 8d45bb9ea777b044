"""Golden traces: pipeline runs built by hand, each with one known cause of GPU idleness.

A straightforward schedule (no simulator shared with the code under test): synthesis
threads take partitions round-robin; partitions go to whichever GPU worker is free first;
the mutex serves them in the order they became ready. Copy speed may depend on how many
synthesis threads run at the moment the copy starts, which is how host memory contention
slows pageable copies in production.

The schedule's structure is the pipeline model's (model/pipeline.py): a worker's phases in
the model's order, the mutex held around its lock phases, the barrier where the model puts
it, then the phases after the lock; tracks are the grammar's (model/tracks.py). Only the
durations are this file's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.model import tracks as tr
from workbench.model.pipeline import COMPUTE, PROVER, Pipeline
from workbench.trace.container import Trace

MS = 1_000_000
GB = 1e9
# The phase the coarse copy opens is timed by its parts, each this share of `ntt_ms`.
PART_SHARES = (0.5, 0.1, 0.4)


@dataclass(frozen=True)
class Spec:
    partitions: int = 12
    workers: int = 2
    synth_threads: int = 4
    synth_ms: Callable[[int], float] = lambda p: 500.0
    prep_ms: Callable[[int], float] = lambda p: 300.0
    copy_bytes: float = 12.5e9  # a, b and c together
    copy_gbps: Callable[[int], float] = lambda synth_running: 50.0
    source: str = "pinned"
    ntt_ms: float = 700.0  # NTTs + H MSM inside ntt_msm_h (PROVER.lock.copy_inside)
    batch_ms: float = 400.0
    tail_ms: float = 197.0
    b_g2_ms: float = 300.0
    finish_ms: float = 50.0
    lock_scope: str = "coarse"
    memory_mode: str = "pageable"
    device_records: bool = False
    nvml: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


def build(spec: Spec, model: Pipeline = PROVER) -> Trace:
    lock, barrier_phase, (gpu_party, prep_party) = model.lock, model.barrier.phase, model.barrier.parties
    spans: list[tuple[Any, ...]] = []
    instants: list[tuple[Any, ...]] = []
    counters: list[tuple[Any, ...]] = []
    ready: dict[int, int] = {}
    synth: list[tuple[int, int]] = []
    for t in range(spec.synth_threads):
        clock = 0
        for p in range(t, spec.partitions, spec.synth_threads):
            end = clock + int(spec.synth_ms(p) * MS)
            spans.append((tr.synth_track(t), model.producer.name, clock, end, p, -1, None))
            instants.append((tr.QUEUE_TRACK, "queued", end, p, -1, None))
            synth.append((clock, end))
            ready[p] = end
            clock = end

    def running(at: int) -> int:
        return sum(1 for s, e in synth if s <= at < e)

    free = [0] * spec.workers
    mutex_free = 0
    last_release: int | None = None
    kernels: list[tuple[int, int]] = []
    phase_ms = {"batch_add": spec.batch_ms, "tail_msm": spec.tail_ms, "b_g2_msm": spec.b_g2_ms,
                "finish": spec.finish_ms}
    mutex = tr.mutex_track(0)
    for p in sorted(ready, key=lambda q: (ready[q], q)):
        w = min(range(spec.workers), key=lambda k: (free[k], k))
        track, barrier = tr.worker_track(w), tr.barrier_track(w)
        pickup = max(free[w], ready[p])
        instants.append((track, "pickup", pickup, p, w, None))
        prep_end = pickup + int(spec.prep_ms(p) * MS)
        spans.append((tr.prep_track(w), model.prep.name, pickup, prep_end, p, w, None))
        asked = pickup
        if spec.lock_scope == "compute":
            asked = _copies(spec, spans, track, p, w, pickup, running)
            spans.append((track, lock.copy_before_lock, pickup, asked, p, w, None))
        got = max(asked, mutex_free)
        gap = {"gap_ns": got - last_release} if last_release is not None else None
        spans.append((mutex, "wait", asked, got, p, w, gap))
        at = got
        for phase in lock.phases:
            start = at
            if phase == lock.copy_inside:
                if spec.lock_scope == "coarse":
                    at = _copies(spec, spans, track, p, w, at, running)
                for name, share in zip(model.phase(phase).parts, PART_SHARES, strict=True):
                    end = at + int(spec.ntt_ms * share * MS)
                    spans.append((track, name, at, end, p, w, None))
                    kernels.append((at, end))
                    at = end
                spans.append((track, phase, start, at, p, w, None))
            elif phase == barrier_phase:
                release = max(at, prep_end)
                spans.append((track, phase, at, release, p, w, None))
                spans.append((barrier, "wait", at, release, p, w, {"party": gpu_party, "arrival": 0}))
                spans.append((barrier, "wait", prep_end, release, p, w, {"party": prep_party, "arrival": 1}))
                last = prep_party if prep_end > at else gpu_party
                instants.append((barrier, "release", release, p, w, {"last": last}))
                at = release
            else:
                at += int(phase_ms[phase] * MS)
                spans.append((track, phase, start, at, p, w, None))
                if model.phase(phase).does == COMPUTE:
                    kernels.append((start, at))
        spans.append((mutex, "hold", got, at, p, w, None))
        mutex_free = last_release = at
        for phase in (p for p in model.after_lock if not model.phase(p).optional):  # runs without --verify
            end = at + int(phase_ms[phase] * MS)
            spans.append((track, phase, at, end, p, w, None))
            if model.phase(phase).does == COMPUTE:
                kernels.append((at, end))
            at = end
        free[w] = at
    end_of_run = max(s[3] for s in spans)
    instants.append((tr.RUN_TRACK, "run_start", 0, -1, -1, None))
    instants.append((tr.RUN_TRACK, "run_end", end_of_run, -1, -1, {"outcome": "completed"}))
    if spec.device_records:
        for start, end in kernels:
            # Kernels finish a little before the host sees them finish (synchronisation).
            kernel_end = start + (end - start) * 95 // 100
            spans.append((tr.stream_track(0, 7), "kernel", start, kernel_end, -1, -1, None))
    if spec.nvml:
        for ts in range(0, end_of_run, 100 * MS):
            busy = any(s <= ts < e for s, e in kernels)
            counters.append((tr.nvml_track(0), "utilization_gpu", ts, 100.0 if busy else 0.0))
    config = {
        "backend": "gpu", "gpu_workers": spec.workers, "synth_threads": spec.synth_threads,
        model.lookahead_knob: spec.partitions, "memory_mode": spec.memory_mode,
        "lock_scope": spec.lock_scope, "partitions": spec.partitions,
    }
    meta = {"outcome": "completed", "memory_emulated": False, **spec.meta}
    return Trace.from_rows(spans, instants, counters, config, meta)


def _copies(spec: Spec, spans: list[tuple[Any, ...]], track: str, p: int, w: int, at: int,
            running: Callable[[int], int]) -> int:
    for vector in ("a", "b", "c"):
        nbytes = spec.copy_bytes / 3
        end = at + int(nbytes / spec.copy_gbps(running(at)))
        spans.append((track, "h2d_copy", at, end, p, w,
                      {"vector": vector, "bytes": int(nbytes), "source": spec.source, "emulated": False}))
        if spec.device_records:
            # The DMA itself: the tail of the host span (pageable copies stage first).
            dma = int(nbytes / 50.0) if spec.source == "pageable" else end - at
            spans.append((tr.copy_track(0), "h2d", max(at, end - dma), end, -1, -1,
                          {"bytes": int(nbytes), "src_kind": spec.source, "dst_kind": "device"}))
        at = end
    return at


def contended(synth_running: int) -> float:
    """Pageable copy speed with synthesis threads hammering host memory (8 GB/s idle)."""
    return 8.0 / (1 + 0.2 * synth_running)


CASES: dict[str, Spec] = {
    # 14 synthesis threads contend with pageable copies under a coarse lock: the production story.
    "copy_bound": Spec(
        partitions=28, synth_threads=14, source="pageable", copy_gbps=contended,
        # The first round is staggered so partitions arrive at the pace the GPU side takes
        # them; the second keeps every thread busy for most of the run, as in production.
        synth_ms=lambda p: 3000.0 * (p + 1) if p < 14 else 75000.0 + 3000.0 * (p % 3),
        prep_ms=lambda p: 1500.0 + 100.0 * (p % 5),
        ntt_ms=1100.0, device_records=True, nvml=True,
    ),
    # Copies are fast but prep_msm takes far longer than ntt_msm_h: the GPU waits at the barrier.
    "prep_bound": Spec(prep_ms=lambda p: 2600.0 + 200.0 * (p % 3), synth_ms=lambda p: 400.0),
    # Pinned copies at link speed, but big next to the kernels, all under a coarse lock.
    "lock_serialised": Spec(
        copy_bytes=40e9, ntt_ms=300.0, batch_ms=100.0, tail_ms=50.0, b_g2_ms=200.0,
        prep_ms=lambda p: 100.0, synth_ms=lambda p: 200.0, source="pinned", memory_mode="pinned",
    ),
    # Two slow synthesis threads cannot keep up with the GPU side.
    "synthesis_starved": Spec(synth_threads=2, synth_ms=lambda p: 6000.0),
    # Small pinned copies, short prep, synthesis ahead: the GPU is the bottleneck, as it should be.
    "balanced": Spec(
        copy_bytes=4e9, ntt_ms=1000.0, synth_ms=lambda p: 800.0, prep_ms=lambda p: 300.0,
        b_g2_ms=300.0, device_records=True,
    ),
}


def case(name: str) -> Trace:
    return build(CASES[name])
