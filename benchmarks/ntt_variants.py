"""Variants of the NTT kernels side by side on one GPU: build, check, time (needs CuPy).

    python benchmarks/ntt_variants.py --out variants.json [--variants base,halves,...]

Each variant recompiles kernels/ntt.cu (and kernels/fr_vector.cu, whose fr_powers_kernel
builds the tables) with its own preprocessor defines, and may change the pass plan's
constants in workbench.gpu.ntt; every variant's NTT and h outputs must equal the first
variant's bit for bit on the same random inputs (outputs poisoned first). Times: CUDA events
around each call, 3 warm-ups, median of the repeats, inputs rotated over 3 buffer sets. A
register-only microkernel also times fr_mul itself per variant (products per second).
Kept as the record of what each NTT version measured (kernels/NOTES_ntt.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.gpu import kernels
from workbench.gpu import ntt as gpu_ntt

POISON = np.uint64(2**64 - 1)

# name: (defines, overrides of workbench.gpu.ntt constants)
VARIANTS: dict[str, tuple[tuple[str, ...], dict[str, int]]] = {
    # the default: the product's limb products on the FP64 pipe (kernels/fr_fp64.cuh); at 4
    # blocks per SM its pass kernel spills 28 bytes outside the butterfly loop, at 3 (min3) it
    # has 85 registers
    "base": ((), {}),
    "integer": (("FR_MUL_INTEGER",), {}),  # the Karatsuba integer product (the default until 2026-12-02)
    "cios": (("FR_MUL_CIOS",), {}),
    "wide": (("FR_MUL_WIDE",), {}),
    "t128x8": (("NTT_MAX_THREADS=128", "NTT_MIN_BLOCKS=8"), {"MAX_THREADS": 128}),
    "min3": (("NTT_MIN_BLOCKS=3",), {}),
    "min2": (("NTT_MIN_BLOCKS=2",), {}),
    "t512x2": (("NTT_MAX_THREADS=512", "NTT_MIN_BLOCKS=2"), {"MAX_THREADS": 512}),
    "tile11": (("NTT_MIN_BLOCKS=2", "NTT_MAX_THREADS=512"), {"MAX_TILE_LOG2": 11, "MAX_THREADS": 512}),
}

MUL_BENCH = r"""
#define FR_DEFAULT_FP64  // the product ntt.cu builds (kernels/fr.cuh)
#include "fr.cuh"
// CHAINS independent products per thread, ITERS rounds: register-only fr_mul throughput.
extern "C" __global__ void fr_mul_rate(uint4* out, const uint4* in, unsigned int iters)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    fr_t x[4], y = fr_load(in, i);
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = fr_load(in, i + k + 1);
    for (unsigned int it = 0; it < iters; ++it) {
#pragma unroll
        for (int k = 0; k < 4; ++k) x[k] = fr_mul(y, x[k]);
    }
    fr_t s = x[0];
#pragma unroll
    for (int k = 1; k < 4; ++k) s = fr_add(s, x[k]);
    fr_store(out, i, s);
}

// The same with whole Cooley-Tukey butterflies (product, sum, difference) on 4 pairs.
extern "C" __global__ void fr_butterfly_rate(uint4* out, const uint4* in, unsigned int iters)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    fr_t x[4], w = fr_load(in, i);
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = fr_load(in, i + k + 1);
    for (unsigned int it = 0; it < iters; ++it) {
#pragma unroll
        for (int k = 0; k < 4; k += 2) {
            const fr_t v = fr_mul(w, x[k + 1]);
            x[k + 1] = fr_sub(x[k], v);
            x[k] = fr_add(x[k], v);
        }
        const fr_t t = x[1]; x[1] = x[2]; x[2] = t;
    }
    fr_t s = x[0];
#pragma unroll
    for (int k = 1; k < 4; ++k) s = fr_add(s, x[k]);
    fr_store(out, i, s);
}
"""


def compile_module(cupy: Any, code: str, defines: tuple[str, ...]) -> Any:
    cc = cupy.cuda.Device().compute_capability
    opts = ("-std=c++17", f"-arch=sm_{cc}", *(f"-D{d}" for d in defines))
    return cupy.RawModule(code=code, options=opts)


@contextmanager
def variant(cupy: Any, name: str) -> Iterator[dict[str, Any]]:
    """Within the block, workbench.gpu's kernels are the variant's build (kernels.built_with)
    and its plan constants are set in workbench.gpu.ntt; both restored afterwards."""
    defines, overrides = VARIANTS[name]
    saved_consts = {k: getattr(gpu_ntt, k) for k in overrides}
    info: dict[str, Any] = {"variant": name, "defines": list(defines), "overrides": overrides}
    try:
        with kernels.built_with(*defines):
            pk = kernels.function("ntt", "ntt_pass_kernel")
            info["registers"], info["local_bytes"] = pk.num_regs, pk.local_size_bytes
            for k, v in overrides.items():
                setattr(gpu_ntt, k, v)
            bench = compile_module(cupy, kernels.expand_includes(MUL_BENCH), defines)
            info["mul_rate"] = bench.get_function("fr_mul_rate")
            info["butterfly_rate"] = bench.get_function("fr_butterfly_rate")
            yield info
    finally:
        for k, v in saved_consts.items():
            setattr(gpu_ntt, k, v)


def random_reduced(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    x[:, 3] &= np.uint64(2**62 - 1)  # < 2^254 < r
    return x


def time_events(cupy: Any, fn: Callable[[int], None], repeats: int) -> list[float]:
    for i in range(3):
        fn(i)
    ev = cupy.cuda.Event
    marks = [(ev(), ev()) for _ in range(repeats)]
    for i, (s, e) in enumerate(marks):
        s.record()
        fn(i)
        e.record()
    marks[-1][1].synchronize()
    return [float(cupy.cuda.get_elapsed_time(s, e)) for s, e in marks]


def mul_rate(cupy: Any, fn: Any, sms: int, per_iter: int = 4) -> float:
    """Operations per second of a register-only rate kernel (per_iter per thread and round)."""
    threads, blocks, iters = 256, sms * 16, 256
    n = threads * blocks
    src = cupy.asarray(random_reduced(np.random.default_rng(5), n + 8))
    out = cupy.empty((n, 4), dtype=cupy.uint64)
    times = time_events(cupy, lambda i: fn((blocks,), (threads,), (out, src, np.uint32(iters))), 10)
    return n * iters * per_iter / (statistics.median(times) / 1e3)


def run(cupy: Any, names: list[str], ntt_sizes: list[int], h_sizes: list[int], repeats: int,
        seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    inputs = {log2: [random_reduced(rng, 1 << log2) for _ in range(3)]
              for log2 in sorted(set(ntt_sizes) | set(h_sizes))}
    reference: dict[tuple[str, int], np.ndarray] = {}
    rows = []
    for name in names:
        with variant(cupy, name) as info:
            row = {k: v for k, v in info.items() if not k.endswith("_rate")}
            row["fr_mul_per_s"] = mul_rate(cupy, info["mul_rate"], sms)
            row["butterflies_per_s"] = mul_rate(cupy, info["butterfly_rate"], sms, per_iter=2)
            for log2 in sorted(set(ntt_sizes) | set(h_sizes)):
                dom = gpu_ntt.GpuDomain(log2)
                dom.prepare()
                host = inputs[log2]
                checks = []
                if log2 in ntt_sizes:
                    y = cupy.asarray(host[0])
                    dom._scratch_buffer().fill(POISON)
                    dom.ntt(y)
                    checks.append(("ntt", cupy.asnumpy(y)))
                    bufs = [cupy.asarray(h) for h in host]
                    row[f"ntt_{log2}_ms"] = statistics.median(
                        time_events(cupy, lambda i, d=dom, b=bufs: d.ntt(b[i % 3]), repeats))
                if log2 in h_sizes:
                    out = cupy.empty((1 << log2, 4), dtype=cupy.uint64)
                    out.fill(POISON)
                    dom.compute_h(*(cupy.asarray(h) for h in host), out=out)
                    checks.append(("h", cupy.asnumpy(out)))
                    sets = [[cupy.asarray(h) for h in host] for _ in range(3)]
                    row[f"h_{log2}_ms"] = statistics.median(
                        time_events(cupy, lambda i, d=dom, s=sets, o=out: d.compute_h(*s[i % 3], out=o),
                                    repeats))
                for what, got in checks:
                    key = (what, log2)
                    if (got == POISON).all(axis=1).any():
                        raise RuntimeError(f"{name}: {what} 2^{log2} left elements unwritten")
                    if key not in reference:
                        reference[key] = got
                    elif not np.array_equal(reference[key], got):
                        raise RuntimeError(f"{name}: {what} 2^{log2} differs from {names[0]}")
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--ntt-sizes", default="22,24")
    parser.add_argument("--h-sizes", default="24")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    cupy = kernels.require_cupy()
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**32)
    names = [v for v in args.variants.split(",") if v]
    rows = run(cupy, names, [int(s) for s in args.ntt_sizes.split(",") if s],
               [int(s) for s in args.h_sizes.split(",") if s], args.repeats, seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seed": seed, "rows": rows}, indent=1))
    keys = [k for k in rows[0] if k.endswith("_ms")]
    print(f"seed {seed}; medians of {args.repeats}, ms")
    print(f"{'variant':<10}{'regs':>5}{'Gmul/s':>8}{'Gbfly/s':>8}" + "".join(f"{k[:-3]:>10}" for k in keys))
    for r in rows:
        print(f"{r['variant']:<10}{r['registers']:>5}{r['fr_mul_per_s'] / 1e9:>8.1f}"
              f"{r['butterflies_per_s'] / 1e9:>8.1f}"
              + "".join(f"{r.get(k, float('nan')):>10.3f}" for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
