"""cuzk daemon logs as a production daemon writes them, for importer tests: every line at the
moment the daemon would print it (so lines of concurrent partitions interleave), behind
journald-style prefixes, with unrelated lines in between.

`FORMATS` holds the daemon's own format strings (printf for the prover's C++ lines, Rust
`format!` for TIMELINE and the tracing lines); test_importers_cuzk_formats.py says where each
is printed. `daemon_log(trace)` writes the lines of a workbench trace; `production_log(calls)`
runs partitions through the daemon's own order of events (GPU workers taking partitions, the
prep thread beside the GPU thread, the mutex, the finaliser) and writes every line kind, behind
the journald prefix of the host named (`host`).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from workbench.model import tracks as tr
from workbench.trace.container import Trace

NOISE = (
    "INFO cuzk_server::engine: job accepted sector=3141 proof=porep-c2",
    "DEBUG cuzk_core::srs: parameter cache hit (groth16 params)",
    "WARN cuzk_core::mem: host memory pressure 87%",
    "INFO cuzk_server::engine: partition dispatched",
    "TRACE tokio::runtime: poll",
    "  at cuzk_core::prove (prover.rs:812)",
    "CUZK_TIMINGS are enabled",
)

# The format strings exactly as the daemon's sources write them.
FORMATS: dict[str, str] = {
    "split": "CUZK_TIMING: split_vectors_ms=%ld setup_to_split_ms=%ld",
    "prep": "CUZK_TIMING: prep_msm_ms=%ld",
    "b_g2": "CUZK_TIMING: b_g2_msm_ms=%ld num_circuits=%zu",
    "prelock": "CUZK_TIMING: pre_lock_cpu_ms=%ld mutex_wait_ms=%ld",
    "ntt": "CUZK_TIMING: gpu_tid=%zu ntt_msm_h_ms=%ld",
    "barrier": "CUZK_TIMING: gpu_tid=%zu barrier_wait_ms=%ld",
    "batch": "CUZK_TIMING: gpu_tid=%zu batch_add_ms=%ld",
    "tail": "CUZK_TIMING: gpu_tid=%zu tail_msm_ms=%ld gpu_total_ms=%ld",
    "held": "CUZK_TIMING: mutex_held_ms=%ld total_start_fn_ms=%ld",
    "dealloc": "CUZK_TIMING: async_dealloc_ms=%ld",
    "pool": "CUZK_TIMING: set pool release threshold to MAX on gpu %d",
    "d_a_cache": "CUZK_TIMING: d_a_cache allocated %zu MiB on gpu %d",
    "host_register": "CUZK_TIMING: host_register=fallback err=%d",
    "prestage_vram": ("CUZK_TIMING: prestage_vram free_mib=%zu usable_mib=%zu "
                      "need_da_mib=%zu need_dbc_mib=%zu total_mib=%zu"),
    "prestage_skip": "CUZK_TIMING: prestage_setup=skip_vram",
    "prestage_ok": "CUZK_TIMING: prestage_setup=ok domain=%zu lot_of_memory=%d",
    "prestage_fallback": "CUZK_TIMING: prestage_setup=fallback err=%d",
    "ntt_h": ("CUZK_NTT_H: d_b_alloc=%ldms ntt_kernels=%ldms "
              "coset_intt_sync=%ldms msm_init=%ldms msm_invoke=%ldms msm_dtor=%ldms total=%ldms"),
    "timeline": "TIMELINE,{},{},{},{}",
}
TIMELINE_DETAILS = {
    "SYNTH_START": ("partition={}", "kind={}"),
    "SYNTH_END": ("partition={},synth_ms={}", "synth_ms={}"),
    "GPU_QUEUE": ("partition={}", "monolithic"),
    "GPU_PICKUP": ("worker={},partition={}", "worker={}"),
    "GPU_START": ("worker={},partition={}", "worker={}"),
    "GPU_END": ("worker={},partition={},gpu_ms={}", "worker={},gpu_ms={}"),
}
# The daemon's tracing lines that time its worker loop: message, then its fields in order.
TRACING: dict[str, tuple[str, ...]] = {
    "GPU_TIMING hot_path pre-prove overhead": (
        "worker_id", "partition", "status_ms", "fail_check_ms", "mark_busy_ms", "total_overhead_ms"),
    "GPU_TIMING spawn_blocking prove_start": (
        "worker_id", "partition", "spawn_to_enter_ms", "prove_start_ms"),
    "GPU_TIMING prove_start returned": (
        "worker_id", "partition", "total_pre_prove_ms", "spawn_blocking_wall_ms"),
    "FIN_TIMING finalizer partition": (
        "worker_id", "partition", "finish_ms", "drop_res_ms", "lock_wait_ms", "process_ms", "total_ms"),
    "FIN_TIMING finalizer monolithic": (
        "worker_id", "finish_ms", "drop_res_ms", "lock_wait_ms", "process_ms", "total_ms"),
    "FIN_TIMING malloc_trim (success path)": ("job_id", "partition", "malloc_trim_ms"),
    "FIN_TIMING malloc_trim (discard path)": ("job_id", "partition", "malloc_trim_ms"),
}


def printf(kind: str, *values: int) -> str:
    """A line as the daemon's fprintf writes it (%ld and %zu are integers here)."""
    return re.sub(r"%(?:ld|zu|d)", "%d", FORMATS[kind]) % values


def timeline_line(offset_ms: int, event: str, job: str, detail: str) -> str:
    return FORMATS["timeline"].format(offset_ms, event, job, detail)


def tracing_line(stamp: str, message: str, values: dict[str, object]) -> str:
    """A tracing-subscriber line (full format, target shown), fields after the message."""
    fields = " ".join(f"{k}={values[k]}" for k in TRACING[message])
    return f"{stamp}  INFO cuzk_core::engine: {message} {fields}"


def _stamp(ns: int, host: str = "node7") -> str:
    seconds = ns / 1e9
    return f"Mar 02 10:{int(seconds // 60) % 60:02d}:{seconds % 60:09.6f} {host} cuzk[2231]:"


def _iso(ns: int) -> str:
    seconds = ns / 1e9
    return f"2026-03-02T10:{int(seconds // 60) % 60:02d}:{seconds % 60:09.6f}Z"


def _interleave(lines: list[tuple[int, int, str]], origin: int, noise: int, seed: int,
                host: str = "node7") -> str:
    rng = random.Random(seed)
    out = []
    for ns, _, text in sorted(lines):
        for _ in range(rng.randint(0, noise)):
            out.append(f"{_stamp(ns - origin, host)} {rng.choice(NOISE)}")
        if text.startswith(("TIMELINE", "CUZK_")):
            level = rng.choice(("", "WARN ", "INFO cuzk_core::groth16: "))
            out.append(f"{_stamp(ns - origin, host)} {level}{text}")
        else:
            out.append(text)
    return "\n".join(out) + "\n"


def daemon_log(trace: Trace, *, timeline: bool = True, noise: int = 2, seed: int = 0) -> str:
    per: dict[int, dict[str, tuple[int, int]]] = defaultdict(dict)
    worker_of: dict[int, int] = {}
    for span in trace.iter_spans():
        if span.partition < 0:
            continue
        kind = tr.parse(span.track).kind
        key = f"mutex_{span.name}" if kind == tr.MUTEX else span.name
        if kind == tr.BARRIER:
            continue
        old = per[span.partition].get(key)
        per[span.partition][key] = (min(old[0], span.start_ns), max(old[1], span.end_ns)) if old else (
            span.start_ns, span.end_ns)
        if kind in (tr.WORKER, tr.PREP):
            worker_of[span.partition] = span.worker
    lines: list[tuple[int, int, str]] = []  # (time, order, text)

    def emit(ns: int, text: str) -> None:
        lines.append((ns, len(lines), text))

    def ms(spans: dict[str, tuple[int, int]], name: str) -> int:
        s = spans.get(name)
        return (s[1] - s[0]) // 1_000_000 if s else 0

    origin = trace.time_range()[0]
    for p, spans in per.items():
        if "mutex_hold" not in spans:
            continue
        w = worker_of.get(p, 0)
        hold = spans["mutex_hold"]
        wait = spans.get("mutex_wait", (hold[0], hold[0]))
        pickup = spans.get("prep_msm", wait)[0]
        emit(hold[0], printf("prelock", (wait[0] - pickup) // 1_000_000, ms(spans, "mutex_wait")))
        ntt = spans["ntt_msm_h"]
        emit(ntt[1] - 1, printf("ntt_h", 0, ms(spans, "ntt"), ms(spans, "coset_intt"), 0, ms(spans, "msm_h"),
                                0, ms(spans, "ntt_msm_h")))
        emit(ntt[1], printf("ntt", 0, ms(spans, "ntt_msm_h")))
        emit(spans["barrier_wait"][1], printf("barrier", 0, ms(spans, "barrier_wait")))
        emit(spans["batch_add"][1], printf("batch", 0, ms(spans, "batch_add")))
        total = sum(ms(spans, n) for n in ("ntt_msm_h", "barrier_wait", "batch_add", "tail_msm"))
        emit(spans["tail_msm"][1], printf("tail", 0, ms(spans, "tail_msm"), total))
        emit(spans["prep_msm"][1], printf("prep", ms(spans, "prep_msm")))
        b_g2 = spans.get("b_g2_msm", (hold[1], hold[1]))
        emit(b_g2[1], printf("b_g2", ms(spans, "b_g2_msm"), 1))
        emit(b_g2[1] + 1, printf("held", ms(spans, "mutex_hold"), (b_g2[1] - pickup) // 1_000_000))
        if timeline:
            def tl(ns: int, event: str, detail: str) -> None:
                emit(ns, timeline_line((ns - origin) // 1_000_000, event, "job-7", detail))
            if "synthesis" in spans:
                s, e = spans["synthesis"]
                tl(s, "SYNTH_START", f"partition={p}")
                tl(e, "SYNTH_END", f"partition={p},synth_ms={(e - s) // 1_000_000}")
                tl(e, "GPU_QUEUE", f"partition={p}")
            tl(pickup, "GPU_PICKUP", f"worker={w},partition={p}")
            tl(hold[0], "GPU_START", f"worker={w},partition={p}")
            tl(hold[1], "GPU_END", f"worker={w},partition={p},gpu_ms={ms(spans, 'mutex_hold')}")
    return _interleave(lines, origin, noise, seed)


@dataclass(frozen=True)
class CallSpec:
    """One partition's durations (ms), as the daemon would measure them."""

    ntt_msm_h: int
    batch_add: int = 400
    tail_msm: int = 200
    prep_msm: int = 1500
    b_g2_msm: int = 300
    synthesis: int = 2000
    setup: int = 3  # function entry to the start of split_vectors
    split_vectors: int = 40
    spawn: int = 2  # after split_vectors, before asking for the mutex (thread start)
    # CUZK_NTT_H parts; the rest of ntt_msm_h goes to ntt_kernels (the copies are issued there).
    ntt_kernels: int | None = None  # None: the rest of ntt_msm_h; a figure leaves the rest unnamed
    d_b_alloc: int = 1
    coset_intt_sync: int = 150
    msm_init: int = 2
    msm_invoke: int = 500
    msm_dtor: int = 1
    epilogue: int = 4
    async_dealloc: int = 60
    # The pre-staging lines of one daemon version: "ok", "skip" (VRAM short), "error" (set-up
    # failed) or "unregistered" (host pages not pinned, so no pre-staging was tried).
    prestage: str = ""


@dataclass
class Written:
    """The log and, per partition, the times (ms) the lines were made from."""

    text: str
    spans: dict[int, dict[str, tuple[int, int]]] = field(default_factory=dict)
    worker: dict[int, int] = field(default_factory=dict)


def production_log(calls: Sequence[CallSpec], *, workers: int = 2, synth_threads: int = 4, noise: int = 1,
                   seed: int = 0, job: str = "job-7", timeline_lines: bool = True,
                   host: str = "node7") -> Written:
    """Every line kind the daemon prints, at the moments it prints them, for these partitions.

    Partitions are synthesised by `synth_threads` lanes in order; each goes to the GPU worker
    free first. Inside a call: setup and split_vectors, then the prep thread (prep_msm, then
    b_g2_msm) beside the GPU thread, which asks for the mutex, runs ntt_msm_h, waits at the
    barrier for prep_msm, runs batch_add and tail_msm and releases the mutex; the worker is
    free at the release; a finaliser waits for b_g2_msm and ends the partition (GPU_END).
    """
    lines: list[tuple[int, int, str]] = []
    out = Written("")

    def emit(ms: int, text: str) -> None:
        lines.append((ms, len(lines), text))

    def tl(ms: int, event: str, detail: str) -> None:
        if timeline_lines:
            emit(ms, timeline_line(ms, event, job, detail))

    synth_free = [0] * synth_threads
    ready = {}
    for p, c in enumerate(calls):
        lane = min(range(synth_threads), key=lambda k: (synth_free[k], k))
        start, end = synth_free[lane], synth_free[lane] + c.synthesis
        synth_free[lane] = end
        ready[p] = end
        tl(start, "SYNTH_START", f"partition={p}")
        tl(end, "SYNTH_END", f"partition={p},synth_ms={c.synthesis}")
        tl(end, "GPU_QUEUE", f"partition={p}")
        out.spans[p] = {"synthesis": (start, end)}
    free = [0] * workers
    mutex_free = 0
    first_on_gpu = True
    for p, c in enumerate(calls):
        w = min(range(workers), key=lambda k: (max(free[k], ready[p]), k))
        pickup = max(free[w], ready[p])
        out.worker[p] = w
        spans = out.spans[p]
        tl(pickup, "GPU_PICKUP", f"worker={w},partition={p}")
        emit(pickup, tracing_line(_iso(pickup * 1_000_000), "GPU_TIMING hot_path pre-prove overhead",
                                  {"worker_id": w, "partition": f"Some({p})", "status_ms": 0,
                                   "fail_check_ms": 0, "mark_busy_ms": 0, "total_overhead_ms": 0}))
        tl(pickup, "GPU_START", f"worker={w},partition={p}")
        entry = pickup
        split_end = entry + c.setup + c.split_vectors
        emit(split_end, printf("split", c.split_vectors, c.setup + c.split_vectors))
        spans["split_vectors"] = (split_end - c.split_vectors, split_end)
        prep_end = split_end + c.prep_msm
        spans["prep_msm"] = (split_end, prep_end)
        emit(prep_end, printf("prep", c.prep_msm))
        b_g2_end = prep_end + c.b_g2_msm
        spans["b_g2_msm"] = (prep_end, b_g2_end)
        emit(b_g2_end, printf("b_g2", c.b_g2_msm, 1))
        asked = split_end + c.spawn
        got = max(asked, mutex_free)
        spans["pre_lock_cpu"] = (entry, asked)
        spans["mutex_wait"] = (asked, got)
        emit(got, printf("prelock", asked - entry, got - asked))
        if first_on_gpu:
            emit(got, printf("pool", 0))
            emit(got, printf("d_a_cache", 4096, 0))
            first_on_gpu = False
        if c.prestage == "unregistered":  # host pages could not be pinned: no pre-staging at all
            emit(asked, printf("host_register", 712))
        elif c.prestage:
            emit(got, printf("prestage_vram", 80000, 79488, 4096, 8192, 12288))
            emit(got, {"ok": printf("prestage_ok", 1 << 27, 1), "skip": printf("prestage_skip"),
                       "error": printf("prestage_fallback", 2)}[c.prestage])
        ntt_end = got + c.ntt_msm_h
        spans["ntt_msm_h"] = (got, ntt_end)
        named = c.d_b_alloc + c.coset_intt_sync + c.msm_init + c.msm_invoke + c.msm_dtor
        kernels = max(c.ntt_msm_h - named, 0) if c.ntt_kernels is None else c.ntt_kernels
        emit(ntt_end, printf("ntt_h", c.d_b_alloc, kernels, c.coset_intt_sync, c.msm_init, c.msm_invoke,
                             c.msm_dtor, c.ntt_msm_h))
        emit(ntt_end, printf("ntt", 0, c.ntt_msm_h))
        barrier = max(prep_end - ntt_end, 0)
        spans["barrier_wait"] = (ntt_end, ntt_end + barrier)
        emit(ntt_end + barrier, printf("barrier", 0, barrier))
        at = ntt_end + barrier
        spans["batch_add"] = (at, at + c.batch_add)
        at += c.batch_add
        emit(at, printf("batch", 0, c.batch_add))
        spans["tail_msm"] = (at, at + c.tail_msm)
        at += c.tail_msm
        emit(at, printf("tail", 0, c.tail_msm, at - got))
        release = at
        spans["mutex_hold"] = (got, release)
        emit(release, printf("held", release - got, release - entry))
        emit(release, tracing_line(_iso(release * 1_000_000), "GPU_TIMING spawn_blocking prove_start",
                                   {"worker_id": w, "partition": f"Some({p})", "spawn_to_enter_ms": 0,
                                    "prove_start_ms": release - entry}))
        emit(release, tracing_line(_iso(release * 1_000_000), "GPU_TIMING prove_start returned",
                                   {"worker_id": w, "partition": f"Some({p})",
                                    "total_pre_prove_ms": release - pickup,
                                    "spawn_blocking_wall_ms": release - pickup}))
        mutex_free = free[w] = release
        done = max(release, b_g2_end) + c.epilogue
        spans["gpu_call"] = (pickup, done)
        tl(done, "GPU_END", f"worker={w},partition={p},gpu_ms={done - pickup}")
        emit(done, tracing_line(_iso(done * 1_000_000), "FIN_TIMING malloc_trim (success path)",
                                {"job_id": job, "partition": p, "malloc_trim_ms": 3}))
        emit(done, tracing_line(_iso(done * 1_000_000), "FIN_TIMING finalizer partition",
                                {"worker_id": w, "partition": f"Some({p})", "finish_ms": done - release,
                                 "drop_res_ms": 0, "lock_wait_ms": 0, "process_ms": 3,
                                 "total_ms": done - release + 3}))
        emit(done + c.async_dealloc, printf("dealloc", c.async_dealloc))
    out.text = _interleave(lines, 0, noise, seed, host)
    return out
