"""The ways `benchmarks/record_gpu.py` runs a program: plain, recorded as `workbench record`
does, recorded with one part of the recording switched off (or changed) at a time, or under
torch.profiler, so that what each part costs the program is measured alone.

    plain            the program alone
    contended        the default recording (`--locks contended`, every CUDA activity kind)
    all, none        `--locks all`, `--locks none` (CUDA activity and NVTX only)
    no-preload       the lock shim not in LD_PRELOAD (no lock calls intercepted at all)
    no-nvtx          the NVTX injection left off
    no-cuda          no CUDA injection (CUPTI not loaded)
    cuda-none        CUPTI attached, no activity kind enabled
    no-KIND          every CUDA activity kind but KIND (kernel, memcpy, memset, sync, runtime)
    only-kernel      kernels alone; only-kernel-runtime: kernels and runtime calls
    overhead         the default recording and CUPTI's records of its own overhead (summed by
                     kind in the trace's counts: read when the variant is in `--details`)
    calls-all        every CUDA runtime call recorded, not only launches, copies, waits, ...
    flush-0          CUPTI's own flush heuristics, no 100 ms period; flush-1000: a 1 s period
    buffer-256k      CUPTI activity buffers of 256 KiB, not 4 MiB
    tid-pthread      CUPTI's own thread ids in API records, not system ones (gettid)
    pool             CUPTI's activity buffers handed over zeroed, from a pool the shim zeroes
                     on CUPTI's thread (else CUPTI zeroes each new one on the program's thread)
    device-buffer-32m  32 MiB device buffers for kernel timestamps (CUPTI's default ~3 MB)
    host-pinned      kernel timestamps written to pinned host memory, not device memory
    shared-buffer    one CUPTI activity buffer for all threads, not one a thread
    kernel-serial    kernels by CUPTI's serialising kernel kind, not the concurrent one
    only-kernel-pool, only-kernel-pinned: kernels alone, with `pool` / `host-pinned`
    launches         `--cuda-mode launches`: kernels by their launches, timed on the host through
                     CUPTI's launch callbacks, no kernel activity record (the other kinds as default)
    launches-runtime the same, the runtime's launch callbacks alone (not the driver's)
    launches-only    launches and nothing else of CUDA: the callbacks' own cost
    sampled          `--cuda-mode sampled`: launches, and kernel records in the first 1 ms of every
                     10 ms; sampled-1-100: of every 100 ms
    drain-1s         the recorder drains the ring every second, not every 50 ms
    drain-end        the recorder drains the ring only once the program has ended
    bare             shims loaded, nothing recorded: `--locks none`, no NVTX, no kind, drain-end
    kineto-cuda      the program under torch.profiler, CUDA activity only (PyTorch programs)
    kineto-cpu-cuda  the same, CPU and CUDA activities

Contract: `VARIANTS`, `Variant`, `session_options(variant, shims) -> (shims, keyword arguments)`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from workbench.attach.session import CUDA_KINDS as KINDS
from workbench.attach.session import SAMPLE_MS


@dataclass(frozen=True)
class Variant:
    recorded: bool = True
    locks: str = "contended"
    cuda: bool = True
    cuda_kinds: tuple[str, ...] = KINDS
    nvtx: bool = True
    preload: bool = True
    period_s: float | None = 0.05
    env: dict[str, str] = field(default_factory=dict)
    kineto: str | None = None  # torch.profiler's activities (the program's `kineto` mode)
    cuda_mode: str = "activity"  # how kernels are recorded (`workbench record --cuda-mode`)
    sample: tuple[float, float] = SAMPLE_MS  # `sampled`: WINDOW/PERIOD ms


POOL = {"WORKBENCH_RECORD_BUFFER_POOL": "8"}  # cupti_injection.c's knobs of CUPTI's attributes
PINNED = {"WORKBENCH_RECORD_HOST_PINNED": "1"}

VARIANTS: dict[str, Variant] = {
    "plain": Variant(recorded=False),
    "contended": Variant(),
    "all": Variant(locks="all"),
    "none": Variant(locks="none"),
    "no-preload": Variant(preload=False),
    "no-nvtx": Variant(nvtx=False),
    "no-cuda": Variant(cuda=False),
    "cuda-none": Variant(cuda_kinds=()),
    **{f"no-{k}": Variant(cuda_kinds=tuple(x for x in KINDS if x != k)) for k in KINDS},
    "only-kernel": Variant(cuda_kinds=("kernel",)),
    "overhead": Variant(cuda_kinds=(*KINDS, "overhead")),
    "only-kernel-runtime": Variant(cuda_kinds=("kernel", "runtime")),
    "calls-all": Variant(env={"WORKBENCH_RECORD_CUDA_CALLS": "all"}),
    "flush-0": Variant(env={"WORKBENCH_RECORD_FLUSH_MS": "0"}),
    "flush-1000": Variant(env={"WORKBENCH_RECORD_FLUSH_MS": "1000"}),
    "buffer-256k": Variant(env={"WORKBENCH_RECORD_BUFFER_KB": "256"}),
    "tid-pthread": Variant(env={"WORKBENCH_RECORD_CUDA_TIDS": "pthread"}),
    "pool": Variant(env=POOL),
    "device-buffer-32m": Variant(env={"WORKBENCH_RECORD_DEVICE_BUFFER_KB": "32768"}),
    "host-pinned": Variant(env=PINNED),
    "shared-buffer": Variant(env={"WORKBENCH_RECORD_PER_THREAD_BUFFERS": "0"}),
    "kernel-serial": Variant(env={"WORKBENCH_RECORD_KERNEL_KIND": "serial"}),
    "only-kernel-pool": Variant(cuda_kinds=("kernel",), env=POOL),
    "only-kernel-pinned": Variant(cuda_kinds=("kernel",), env=PINNED),
    "launches": Variant(cuda_mode="launches"),
    "launches-runtime": Variant(cuda_mode="launches", env={"WORKBENCH_RECORD_LAUNCH_DOMAINS": "runtime"}),
    "launches-only": Variant(cuda_mode="launches", cuda_kinds=("kernel",)),
    "sampled": Variant(cuda_mode="sampled"),
    "sampled-1-100": Variant(cuda_mode="sampled", sample=(1.0, 100.0)),
    "drain-1s": Variant(period_s=1.0),
    "drain-end": Variant(period_s=None),
    "bare": Variant(locks="none", nvtx=False, cuda_kinds=(), period_s=None),
    "kineto-cuda": Variant(recorded=False, kineto="cuda"),
    "kineto-cpu-cuda": Variant(recorded=False, kineto="cpu,cuda"),
}


def session_options(variant: Variant, shims: Any) -> tuple[Any, dict[str, Any]]:
    """The shims to record with and Session's keyword arguments for a recorded variant."""
    if not variant.cuda:
        shims = dataclasses.replace(shims, cupti=None)
    return shims, {"locks": variant.locks, "cuda_kinds": variant.cuda_kinds, "nvtx": variant.nvtx,
                   "preload": variant.preload, "period_s": variant.period_s, "env": variant.env,
                   "cuda_mode": variant.cuda_mode, "sample": variant.sample}
