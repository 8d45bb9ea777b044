"""GPU NTT, quotient h and host-to-device copy benchmarks (needs a CUDA device and CuPy).

    python benchmarks/ntt_gpu.py --out results.json

Kernel times are CUDA events around each call on one stream, after warm-up, median of the
repeats, inputs rotated over three buffers (each far larger than the 50 MB L2). Copies of
a, b, c at 2^24 (3 x 512 MiB) are timed per memory mode with the host clock after a stream
synchronisation, median of the repeats. Floors: bytes over the 4.1 TB/s measured device
bandwidth, and the multiply-pipe slots of the Montgomery products over the SMs' IMAD rate
(64 slots per clock per SM; a high-half product takes two). Each time is printed with its
ratio to issue 17's target (time / target), to the figure before the kernels of this
version (old / time: the speed-up) and to each floor (time / floor).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.gpu import kernels
from workbench.gpu.ntt import TRANSFORMS_PER_H, GpuDomain

BANDWIDTH = 4.1e12  # bytes/s, device-to-device copy measured on the lent H200
LINK = 55e9  # bytes/s, pinned host-to-device measured on the same machine
ELEMENT = 32
# Multiply-pipe issue slots of one fr_mul: 96 32x32-bit products (48 for a*b by Karatsuba,
# 6 per reduction step for m*r once r's two low limbs are handled with adds; CIOS, the
# version before, had 112), each a low half (1 slot) and a high half (2 slots: mad.hi runs at
# half the rate of mad.lo, 30.2 against 63.2 per clock per SM, measured on the lent H200).
IMADS_PER_MUL = 96 * 3
IMAD_PER_CLOCK_PER_SM = 64
# Issue 17's targets, and the medians recorded before this version (benchmarks/RESULTS.md,
# "GPU kernels, part 1", same script and machine kind: 7 transforms per h then).
TARGETS_MS = {("ntt", 24): 3.5, ("compute_h", 24): 25.0}
OLD_MS = {("ntt", 20): 0.335, ("ntt", 22): 1.349, ("ntt", 24): 5.654, ("ntt", 26): 24.25,
          ("compute_h", 20): 2.45, ("compute_h", 22): 9.97, ("compute_h", 24): 41.53}



def device_info(cupy: Any) -> dict[str, Any]:
    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(cupy.cuda.Device().id)
    clock_khz = int(props.get("clockRate", 0)) or 1_980_000  # KINDS.md: 1980 MHz under load
    name = props["name"]
    return {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "sms": int(props["multiProcessorCount"]),
        "clock_ghz": clock_khz / 1e6,
        "memory_gib": int(props["totalGlobalMem"]) / 2**30,
        "l2_mib": int(props.get("l2CacheSize", 0)) / 2**20,
        "cupy": cupy.__version__,
        "host": platform.node(),
    }


def random_device(cupy: Any, n: int) -> Any:
    """Random reduced elements generated on the device: every limb below 2^62, so < r."""
    x = (cupy.random.random((n, 4)) * float(2**62)).astype(cupy.uint64)
    return cupy.ascontiguousarray(x)


def time_events(cupy: Any, fn: Callable[[Any], None], inputs: list[Any], warmup: int,
                repeats: int) -> list[float]:
    for i in range(warmup):
        fn(inputs[i % len(inputs)])
    ev = cupy.cuda.Event
    marks = [(ev(), ev()) for _ in range(repeats)]
    for i, (start, end) in enumerate(marks):
        start.record()
        fn(inputs[i % len(inputs)])
        end.record()
    marks[-1][1].synchronize()
    return [float(cupy.cuda.get_elapsed_time(s, e)) for s, e in marks]


def ntt_muls(log2: int) -> int:
    return ((log2 - 1) << log2) // 2  # stage 0's twiddles are all 1


def _forward_no_reorder(dom: GpuDomain, x: Any) -> None:
    """The forward transform as compute_h runs it: bit-reversed in, natural out."""
    dom._transform(x, dom.twiddles, dit=True)


def _compute_h(dom: GpuDomain, abc: tuple[Any, Any, Any]) -> None:
    dom.compute_h(*abc)


def bench_kernels(cupy: Any, info: dict[str, Any], ntt_sizes: list[int], h_sizes: list[int],
                  repeats: int) -> list[dict[str, Any]]:
    imad_rate = info["sms"] * IMAD_PER_CLOCK_PER_SM * info["clock_ghz"] * 1e9
    rows = []
    for log2 in sorted(set(ntt_sizes) | set(h_sizes)):
        n = 1 << log2
        need = (9 if log2 in h_sizes else 6) * n * ELEMENT + 6 * n * ELEMENT
        if need > cupy.cuda.runtime.memGetInfo()[0] * 0.8:
            print(f"skip 2^{log2}: needs {need / 2**30:.1f} GiB", file=sys.stderr)
            continue
        dom = GpuDomain(log2)
        dom.prepare()
        passes = len(dom.passes)
        cases: list[tuple[str, Callable[[Any], None], list[Any], int, int, int]] = []
        if log2 in ntt_sizes:
            bufs = [random_device(cupy, n) for _ in range(3)]
            muls = ntt_muls(log2)
            cases.append(("ntt", dom.ntt, bufs, 2 * n * ELEMENT,
                          passes * 2 * n * ELEMENT, muls))
            cases.append(("ntt_no_reorder", partial(_forward_no_reorder, dom), bufs,
                          2 * n * ELEMENT, passes * 2 * n * ELEMENT, muls))
        if log2 in h_sizes:
            sets = [tuple(random_device(cupy, n) for _ in range(3)) for _ in range(3)]
            # scalings: a, b by g^i/n, c by 1/(n Z), the product a*b, h by g^-i/(n Z)
            muls = TRANSFORMS_PER_H * ntt_muls(log2) + 5 * n
            # design bytes: the transforms' passes, 3 coset tables, b and c read once more
            design = (TRANSFORMS_PER_H * passes * 2 + 3 + 2) * n * ELEMENT
            cases.append(("compute_h", partial(_compute_h, dom), sets, 4 * n * ELEMENT,
                          design, muls))
        for name, fn, inputs, min_bytes, design_bytes, muls in cases:
            times = time_events(cupy, fn, inputs, warmup=3, repeats=repeats)
            med = statistics.median(times)
            floor_mem = min_bytes / BANDWIDTH * 1e3
            floor_int = muls * IMADS_PER_MUL / imad_rate * 1e3
            rows.append({
                "case": name, "log2": log2, "n": n, "passes": passes, "repeats": repeats,
                "median_ms": med, "min_ms": min(times), "max_ms": max(times), "times_ms": times,
                "min_bytes": min_bytes, "design_bytes": design_bytes,
                "floor_bandwidth_ms": floor_mem, "design_bandwidth_ms": design_bytes / BANDWIDTH * 1e3,
                "montgomery_muls": muls, "floor_imad_ms": floor_int,
                "time_over_bandwidth_floor": med / floor_mem,
                "time_over_imad_floor": med / floor_int,
                "target_ms": TARGETS_MS.get((name, log2)),
                "old_ms": OLD_MS.get((name, log2)),
            })
        del dom, cases
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def bench_copies(cupy: Any, log2: int, repeats: int) -> list[dict[str, Any]]:
    rt = cupy.cuda.runtime
    n = 1 << log2
    nbytes = n * ELEMENT
    stream = cupy.cuda.Stream(non_blocking=True)
    dev = [cupy.empty((n, 4), dtype=cupy.uint64) for _ in range(3)]
    pattern = np.random.default_rng(1).integers(0, 2**62, size=(n, 4), dtype=np.uint64)

    def copy_async(hosts: list[np.ndarray]) -> None:
        for d, h in zip(dev, hosts, strict=True):
            rt.memcpyAsync(d.data.ptr, h.ctypes.data, nbytes, rt.memcpyHostToDevice, stream.ptr)

    def copy_pageable(hosts: list[np.ndarray]) -> None:
        for d, h in zip(dev, hosts, strict=True):
            d.set(h, stream=stream)

    pageable = [pattern.copy() for _ in range(3)]
    pinned_mem = cupy.cuda.alloc_pinned_memory(3 * nbytes)
    pinned_all = np.frombuffer(pinned_mem, dtype=np.uint64, count=3 * n * 4).reshape(3, n, 4)
    pinned_all[:] = pattern
    pinned = [pinned_all[i] for i in range(3)]
    registered = [pattern.copy() for _ in range(3)]
    t0 = time.perf_counter()
    for h in registered:
        rt.hostRegister(h.ctypes.data, nbytes, 0)
    register_s = time.perf_counter() - t0
    modes = [("pageable (ndarray.set)", copy_pageable, pageable),
             ("pinned (alloc_pinned_memory, memcpyAsync)", copy_async, pinned),
             ("registered (hostRegister, memcpyAsync)", copy_async, registered)]
    rows = []
    try:
        for name, fn, hosts in modes:
            times = []
            for i in range(repeats + 1):
                stream.synchronize()
                t0 = time.perf_counter()
                fn(hosts)
                stream.synchronize()
                if i:  # the first is warm-up
                    times.append((time.perf_counter() - t0) * 1e3)
            med = statistics.median(times)
            rows.append({"case": "h2d_abc", "mode": name, "log2": log2, "bytes": 3 * nbytes,
                         "repeats": repeats, "median_ms": med, "times_ms": times,
                         "gb_per_s": 3 * nbytes / med / 1e6, "link_gb_per_s": LINK / 1e9,
                         "floor_link_ms": 3 * nbytes / LINK * 1e3})
            ok = all(bool((d[:: n // 7] == cupy.asarray(pattern[:: n // 7])).all()) for d in dev)
            if not ok:
                raise RuntimeError(f"copy in mode {name} delivered wrong data")
    finally:
        for h in registered:
            rt.hostUnregister(h.ctypes.data)
    rows[-1]["register_s"] = register_s
    return rows


def _ratio(num: float | None, den: float | None, fmt: str = ".2f") -> str:
    return "-" if num is None or den is None else format(num / den, fmt)


def table(rows: list[dict[str, Any]], copies: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [f"device: {info['name']}, {info['sms']} SMs, {info['clock_ghz']:.2f} GHz; "
             f"floors at {BANDWIDTH / 1e12:.1f} TB/s and {IMADS_PER_MUL} IMAD slots per product at "
             f"{IMAD_PER_CLOCK_PER_SM}/clk/SM; "
             f"ntt_pass_kernel {info.get('ntt_pass_kernel')}",
             "t/target > 1: missed; old/t: speed-up over the figure before this version; "
             "t/floor: distance from each floor",
             f"{'case':<16}{'n':>6}{'pass':>5}{'median ms':>11}{'target':>8}{'t/target':>9}"
             f"{'old ms':>8}{'old/t':>7}{'bw floor':>10}{'t/bw':>7}{'imad floor':>11}{'t/imad':>8}"]
    for r in rows:
        target, old, med = r["target_ms"], r["old_ms"], r["median_ms"]
        lines.append(
            f"{r['case']:<16}{'2^' + str(r['log2']):>6}{r['passes']:>5}{med:>11.3f}"
            f"{'-' if target is None else format(target, 'g'):>8}{_ratio(med, target):>9}"
            f"{'-' if old is None else format(old, 'g'):>8}{_ratio(old, med):>7}"
            f"{r['floor_bandwidth_ms']:>10.3f}{r['time_over_bandwidth_floor']:>7.1f}"
            f"{r['floor_imad_ms']:>11.3f}{r['time_over_imad_floor']:>8.2f}")
    for c in copies:
        lines.append(f"copy a,b,c 2^{c['log2']} {c['mode']:<44}{c['median_ms']:>9.1f} ms "
                     f"{c['gb_per_s']:>6.1f} GB/s (link {c['link_gb_per_s']:.0f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="raw results as JSON")
    parser.add_argument("--ntt-sizes", default="20,22,24,26")
    parser.add_argument("--h-sizes", default="20,21,22,23,24")
    parser.add_argument("--copy-log2", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--copy-repeats", type=int, default=10)
    args = parser.parse_args(argv)
    if args.repeats < 10 or args.copy_repeats < 10:
        parser.error("repeats must be at least 10")
    cupy = kernels.require_cupy()
    info = device_info(cupy)
    for name in ("ntt_pass_kernel",):
        fn = kernels.function("ntt", name)
        info[name] = {"registers": fn.num_regs, "local_bytes": fn.local_size_bytes}
    rows = bench_kernels(cupy, info, [int(s) for s in args.ntt_sizes.split(",") if s],
                         [int(s) for s in args.h_sizes.split(",") if s], args.repeats)
    copies = bench_copies(cupy, args.copy_log2, args.copy_repeats) if args.copy_log2 else []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": info, "kernels": rows, "copies": copies}, indent=1))
    print(table(rows, copies, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
