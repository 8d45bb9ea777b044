"""cuzk-compatible timing lines, so operators can set our runs beside production logs.

Exactly the daemon's formats (integer milliseconds of host wall time), one set per
partition, `gpu_tid` = worker index, plus TIMELINE lines with offsets from run start:

    CUZK_TIMING: prep_msm_ms=%ld
    CUZK_TIMING: b_g2_msm_ms=%ld num_circuits=%zu
    CUZK_TIMING: pre_lock_cpu_ms=%ld mutex_wait_ms=%ld
    CUZK_TIMING: gpu_tid=%zu ntt_msm_h_ms=%ld
    CUZK_TIMING: gpu_tid=%zu barrier_wait_ms=%ld
    CUZK_TIMING: gpu_tid=%zu batch_add_ms=%ld
    CUZK_TIMING: gpu_tid=%zu tail_msm_ms=%ld gpu_total_ms=%ld
    CUZK_TIMING: mutex_held_ms=%ld total_start_fn_ms=%ld
    CUZK_NTT_H: d_b_alloc=%ldms ntt_kernels=%ldms coset_intt_sync=%ldms msm_init=%ldms \
                msm_invoke=%ldms msm_dtor=%ldms total=%ldms  (one line)
    TIMELINE,<offset_ms>,<event>,<job_id>,<detail>

Our mapping: pre_lock_cpu is pickup to asking for the mutex (the upload when lock_scope is
compute); gpu_total = ntt_msm_h + barrier_wait + batch_add + tail_msm; total_start_fn is
pickup to the end of b_g2_msm. In CUZK_NTT_H, d_b_alloc, msm_init and msm_dtor are 0
because device buffers are allocated once per worker; ntt_kernels covers the forward NTTs
and the pointwise step, coset_intt_sync the final inverse NTT, msm_invoke the H MSM. The
copy of a, b, c is the part of total that no field names, which is how the importer
(importers/cuzk_log.py) recovers it.
"""

from __future__ import annotations

from collections import defaultdict

from workbench.analysis.summary import run_window_ns
from workbench.model import tracks as tr
from workbench.model.pipeline import PICKUP, PROVER, QUEUED
from workbench.trace.container import Trace

JOB_ID = "job0"
_THREADS = (tr.WORKER, tr.PREP)  # a worker's own threads: its GPU thread and its prep thread


def _ms(ns: int | float) -> int:
    return int(ns // 1_000_000)


def cuzk_lines(trace: Trace) -> list[str]:
    """TIMING and NTT_H lines per finished partition (in order of finishing), then TIMELINE."""
    per: dict[int, dict[str, tuple[int, int]]] = defaultdict(dict)
    worker_of: dict[int, int] = {}
    text = trace.strings.values
    s = trace.spans
    for i in range(len(s)):
        kind = tr.parse(text[s.track[i]]).kind
        if kind not in (*_THREADS, tr.MUTEX, tr.SYNTH):
            continue
        partition = int(s.partition[i])
        if partition < 0:
            continue
        name = text[s.name[i]]
        key = ("mutex_" + name) if kind == tr.MUTEX else name
        # Sub-spans inside ntt_msm_h repeat (three copies): keep the first start, last end.
        span = (int(s.start_ns[i]), int(s.end_ns[i]))
        if key in per[partition]:
            old = per[partition][key]
            span = (min(old[0], span[0]), max(old[1], span[1]))
        per[partition][key] = span
        if kind in _THREADS and s.worker[i] >= 0:
            worker_of[partition] = int(s.worker[i])
    pickups = _instants(trace, PICKUP)
    lines: list[str] = []
    finished = sorted(
        (p for p, spans in per.items() if "finish" in spans), key=lambda p: per[p]["finish"][1]
    )
    for p in finished:
        lines.extend(_partition_lines(per[p], worker_of.get(p, 0), pickups.get(p)))
    lines.extend(timeline_lines(trace, per, worker_of, pickups))
    return lines


def _partition_lines(
    spans: dict[str, tuple[int, int]], gpu_tid: int, pickup: int | None,
) -> list[str]:
    def dur(name: str) -> int:
        if name not in spans:
            return 0
        return spans[name][1] - spans[name][0]

    wait = spans.get("mutex_wait")
    first = min(start for start, _ in spans.values())  # a partition of some phases only (a cut log)
    start_fn = pickup if pickup is not None else (wait[0] if wait else spans.get("ntt_msm_h", (first,))[0])
    pre_lock = (wait[0] - start_fn) if wait else 0
    gpu_total = sum(dur(n) for n in PROVER.lock.phases)
    end_fn = spans.get("b_g2_msm", spans.get("tail_msm", (0, start_fn)))[1]
    kernels = dur("ntt") if "ntt" in spans else dur("ntt_msm_h")
    return [
        f"CUZK_TIMING: prep_msm_ms={_ms(dur('prep_msm'))}",
        f"CUZK_TIMING: b_g2_msm_ms={_ms(dur('b_g2_msm'))} num_circuits=1",
        f"CUZK_TIMING: pre_lock_cpu_ms={_ms(pre_lock)} mutex_wait_ms={_ms(dur('mutex_wait'))}",
        f"CUZK_TIMING: gpu_tid={gpu_tid} ntt_msm_h_ms={_ms(dur('ntt_msm_h'))}",
        f"CUZK_TIMING: gpu_tid={gpu_tid} barrier_wait_ms={_ms(dur('barrier_wait'))}",
        f"CUZK_TIMING: gpu_tid={gpu_tid} batch_add_ms={_ms(dur('batch_add'))}",
        f"CUZK_TIMING: gpu_tid={gpu_tid} tail_msm_ms={_ms(dur('tail_msm'))} gpu_total_ms={_ms(gpu_total)}",
        f"CUZK_TIMING: mutex_held_ms={_ms(dur('mutex_hold'))} total_start_fn_ms={_ms(end_fn - start_fn)}",
        f"CUZK_NTT_H: d_b_alloc=0ms ntt_kernels={_ms(kernels)}ms "
        f"coset_intt_sync={_ms(dur('coset_intt'))}ms msm_init=0ms "
        f"msm_invoke={_ms(dur('msm_h'))}ms msm_dtor=0ms total={_ms(dur('ntt_msm_h'))}ms",
    ]


def _instants(trace: Trace, name: str) -> dict[int, int]:
    mask = trace.instants.name == trace.string_id(name)
    return {
        int(p): int(t)
        for p, t in zip(trace.instants.partition[mask], trace.instants.ts_ns[mask], strict=True)
    }


def timeline_lines(
    trace: Trace, per: dict[int, dict[str, tuple[int, int]]], worker_of: dict[int, int],
    pickups: dict[int, int],
) -> list[str]:
    origin, _ = run_window_ns(trace)
    queued = _instants(trace, QUEUED)
    events: list[tuple[int, str, str]] = []
    for p, spans in per.items():
        w = worker_of.get(p, 0)
        if "synthesis" in spans:
            start, end = spans["synthesis"]
            events.append((start, "SYNTH_START", f"partition={p}"))
            events.append((end, "SYNTH_END", f"partition={p},synth_ms={_ms(end - start)}"))
        if p in queued:
            events.append((queued[p], "GPU_QUEUE", f"partition={p}"))
        if p in pickups:
            events.append((pickups[p], "GPU_PICKUP", f"worker={w},partition={p}"))
        if "mutex_hold" in spans:
            start, end = spans["mutex_hold"]
            events.append((start, "GPU_START", f"worker={w},partition={p}"))
            events.append((end, "GPU_END", f"worker={w},partition={p},gpu_ms={_ms(end - start)}"))
    events.sort(key=lambda e: e[0])
    return [f"TIMELINE,{_ms(t - origin)},{event},{JOB_ID},{detail}" for t, event, detail in events]
