"""cuzk daemon logs as a production daemon writes them, for importer tests: every line at the
moment the daemon would print it (so lines of concurrent partitions interleave), behind
journald-style prefixes, with unrelated lines in between."""

from __future__ import annotations

import random
from collections import defaultdict

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


def _stamp(ns: int) -> str:
    seconds = ns / 1e9
    return f"Mar 02 10:{int(seconds // 60) % 60:02d}:{seconds % 60:09.6f} node7 cuzk[2231]:"


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
        emit(hold[0], f"CUZK_TIMING: pre_lock_cpu_ms={(wait[0] - pickup) // 1_000_000} "
                      f"mutex_wait_ms={ms(spans, 'mutex_wait')}")
        ntt = spans["ntt_msm_h"]
        emit(ntt[1] - 1, f"CUZK_NTT_H: d_b_alloc=0ms ntt_kernels={ms(spans, 'ntt')}ms "
                         f"coset_intt_sync={ms(spans, 'coset_intt')}ms msm_init=0ms "
                         f"msm_invoke={ms(spans, 'msm_h')}ms msm_dtor=0ms total={ms(spans, 'ntt_msm_h')}ms")
        emit(ntt[1], f"CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms={ms(spans, 'ntt_msm_h')}")
        emit(spans["barrier_wait"][1], f"CUZK_TIMING: gpu_tid=0 barrier_wait_ms={ms(spans, 'barrier_wait')}")
        emit(spans["batch_add"][1], f"CUZK_TIMING: gpu_tid=0 batch_add_ms={ms(spans, 'batch_add')}")
        total = sum(ms(spans, n) for n in ("ntt_msm_h", "barrier_wait", "batch_add", "tail_msm"))
        emit(spans["tail_msm"][1], f"CUZK_TIMING: gpu_tid=0 tail_msm_ms={ms(spans, 'tail_msm')} "
                                   f"gpu_total_ms={total}")
        emit(spans["prep_msm"][1], f"CUZK_TIMING: prep_msm_ms={ms(spans, 'prep_msm')}")
        b_g2 = spans.get("b_g2_msm", (hold[1], hold[1]))
        emit(b_g2[1], f"CUZK_TIMING: b_g2_msm_ms={ms(spans, 'b_g2_msm')} num_circuits=1")
        emit(b_g2[1] + 1, f"CUZK_TIMING: mutex_held_ms={ms(spans, 'mutex_hold')} "
                          f"total_start_fn_ms={(b_g2[1] - pickup) // 1_000_000}")
        if timeline:
            def tl(ns: int, event: str, detail: str) -> None:
                emit(ns, f"TIMELINE,{(ns - origin) // 1_000_000},{event},job-7,{detail}")
            if "synthesis" in spans:
                s, e = spans["synthesis"]
                tl(s, "SYNTH_START", f"partition={p}")
                tl(e, "SYNTH_END", f"partition={p},synth_ms={(e - s) // 1_000_000}")
                tl(e, "GPU_QUEUE", f"partition={p}")
            tl(pickup, "GPU_PICKUP", f"worker={w},partition={p}")
            tl(hold[0], "GPU_START", f"worker={w},partition={p}")
            tl(hold[1], "GPU_END", f"worker={w},partition={p},gpu_ms={ms(spans, 'mutex_hold')}")
    rng = random.Random(seed)
    out = []
    for ns, _, text in sorted(lines):
        for _ in range(rng.randint(0, noise)):
            out.append(f"{_stamp(ns - origin)} {rng.choice(NOISE)}")
        level = rng.choice(("", "WARN ", "INFO cuzk_core::groth16: "))
        out.append(f"{_stamp(ns - origin)} {level}{text}")
    return "\n".join(out) + "\n"
