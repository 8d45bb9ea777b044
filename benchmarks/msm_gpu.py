"""G1 MSM and batch-add benchmarks on the GPU (needs a CUDA device and CuPy).

    python benchmarks/msm_gpu.py --out results.json [--sizes 20 22 24] [--repeats 10]

Inputs live on the device: 2^max distinct points k_i * G made by the SRS generator's
fixed-base kernel (its time is reported too), and as scalars the k_i shifted by one row
(uniform below r, read as Montgomery representations). Each MSM is timed with CUDA events
around the whole call on one stream, which includes the host's window combination and the
read-back; median of the repeats after warm-up. One more run per size records events at the
phase boundaries. A linearity check compares each size with the sum of its four quarters
(which get a different window size).

Floors, both arithmetic (the data is read once in far less time):
  * imad: the field multiplications' 32-bit multiply-adds (588 per product: 12 CIOS rounds
    of 2 x 12 for a * b_i, 1 + 2 x 12 for the reduction) over 64 IMADs per clock per SM;
  * madd: the mixed additions over the rate a microkernel measures for the same inlined
    g1_add_affine the hot loops use (bucket reduction counted as 2.8 mixed additions per
    bucket: two full additions at 14 products against 10). The rate of the called (not
    inlined) form is reported beside it, and both with rolled products (EC_PRODUCTS_ROLLED,
    the xyzz_rolled variant's build).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.gpu import affine_rounds, kernels, msm_tables, srs_gen
from workbench.gpu import msm as gpu_msm

BANDWIDTH = 4.1e12  # bytes/s, device-to-device copy measured on the lent H200
IMADS_PER_MUL = 12 * (2 * 12 + 1 + 2 * 12)
IMAD_PER_CLOCK_PER_SM = 64
MULS_PER_MADD, MULS_PER_ADD = 10, 14
TARGETS_MS = {("msm", 20): 8.0, ("msm", 22): 28.0, ("msm", 24): 100.0, ("batch_add", 24): 3.0}
ANCHOR_MS = {("msm", 24): 109.0}  # the published G1 MSM 2^24 on a card of the H200's integer-multiply peak
# The variants timed side by side. Keys name a module attribute set for the variant's
# duration (affine_rounds', or with "msm." workbench.gpu.msm's), or "window_delta": c moved
# from the window rule by that much. "default" is the default (rolled products: NOTES_msm.md
# row 5); "binary" the binary inversion; "pending" the reduction's pending levels down to one
# point a row (no scan); "xyzz" the affine rounds disabled; "aff_deep" G1's rounds by G2's
# rule; the tuning variants (scan rows, segments, windows c-2 .. c+3) the default with one
# setting changed. The rounds' build options (affine_rounds.PRODUCTS, SQUARE): "inline" (the
# unrolled products, the default before row 5), "called" (products called, one copy of their
# code), "sqr" (inline with the dedicated squaring), "called_sqr" and "rolled_sqr". "fixed"
# runs over precomputed window multiples of the bases (msm_tables.py, one set of buckets for
# all windows), its window by msm_tables' fixed_window_bits (fixed-2 .. fixed+2 moved from
# it); its table is built before the timing (setup time and bytes reported), and its quarters
# run the default path, so the check compares it with the default's sums. "xyzz_inline" and
# "fixed_inline" are "default" and "fixed" with the curve code's products unrolled
# (affine_rounds.XYZZ_PRODUCTS; rolled, EC_PRODUCTS_ROLLED, is the default since sitting G).
DEFAULT = {"msm.REDUCE": "scan", "msm.PRECOMPUTED": "off", "INVERSION": "batched", "PRODUCTS": "rolled",
           "SQUARE": "product", "BATCH_ADD": "rounds", "XYZZ_PRODUCTS": "rolled"}
INLINE = {**DEFAULT, "PRODUCTS": "inline"}
FIXED = {**DEFAULT, "msm.PRECOMPUTED": "always"}
VARIANTS: dict[str, dict[str, Any]] = {
    "default": DEFAULT,
    "rolled": DEFAULT,  # sitting E's name for it
    "binary": {**DEFAULT, "INVERSION": "binary"},
    "pending": {**DEFAULT, "msm.REDUCE": "pending"},
    "xyzz": {**DEFAULT, "MIN_PAIRS": 1 << 62, "MIN_PAIRS_G2": 1 << 62},
    "aff_deep": {**DEFAULT, "MIN_PAIRS": 1 << 19, "MIN_FRACTION": 0.1, "K_MIN": 16},  # G1 with G2's rule
    "scan1k": {**DEFAULT, "msm.SCAN_ROWS": 1024},
    "seg2": {**DEFAULT, "msm.REDUCE_FIRST_SEG_LOG2": 2},
    "seg3": {**DEFAULT, "msm.REDUCE_FIRST_SEG_LOG2": 3},
    "seg5": {**DEFAULT, "msm.REDUCE_FIRST_SEG_LOG2": 5},
    "tail3": {**DEFAULT, "msm.REDUCE_SEG_LOG2": 3},
    **{f"c{d:+d}": {**DEFAULT, "window_delta": d} for d in (-2, -1, 1, 2, 3)},
    "inline": INLINE,
    "called": {**DEFAULT, "PRODUCTS": "called"},
    "called_sqr": {**DEFAULT, "PRODUCTS": "called", "SQUARE": "dedicated"},
    "rolled_sqr": {**DEFAULT, "SQUARE": "dedicated"},
    "sqr": {**INLINE, "SQUARE": "dedicated"},
    "fixed": FIXED,
    **{f"fixed{d:+d}": {**FIXED, "window_delta": d} for d in (-2, -1, 1, 2)},
    "xyzz_rolled": DEFAULT,  # sitting G's name for it
    "fixed_rolled": FIXED,
    "xyzz_inline": {**DEFAULT, "XYZZ_PRODUCTS": "inline"},
    "fixed_inline": {**FIXED, "XYZZ_PRODUCTS": "inline"},
}
# Variants timed on batch_add alone: the hybrid method (affine_rounds.BATCH_ADD, two rounds in
# each thread over slices of the bitmap) on the default, with its slices' words.
_ROLLED = VARIANTS["rolled"]
BATCH_VARIANTS: dict[str, dict[str, Any]] = {
    "hybrid": {**_ROLLED, "BATCH_ADD": "hybrid"},
    "hybrid_w2": {**_ROLLED, "BATCH_ADD": "hybrid", "HYBRID_WORDS": 2},
    "hybrid_w8": {**_ROLLED, "BATCH_ADD": "hybrid", "HYBRID_WORDS": 8},
}
DEFAULT_VARIANTS = ["default", "fixed"]
RATE_HEADER = '#include "g1.cuh"\n#include "batch_affine.cuh"\n'

PRODUCT_KERNELS = r"""
extern "C" __global__ void fp_mul_rate(uint4* data, unsigned int iters)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    fp_t a = fp_load(data, 3 * i), b = fp_load(data, 3 * i + 1), c = fp_load(data, 3 * i + 2);
    for (unsigned int k = 0; k < iters; ++k) { a = fp_mul(a, b); c = fp_mul(c, b); }
    fp_store(data, 3 * i, fp_add(a, c));
}

// Squarings: method 0 fp_mul(a, a), 1 fp_sqr_dedicated, 2 fp_mul_rolled(a, a); two chains.
extern "C" __global__ void fp_sqr_rate(uint4* data, unsigned int iters, unsigned int method)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    fp_t a = fp_load(data, 3 * i), c = fp_load(data, 3 * i + 2);
    for (unsigned int k = 0; k < iters; ++k) {
        if (method == 1) { a = fp_sqr_dedicated(a); c = fp_sqr_dedicated(c); }
        else if (method == 2) { a = fp_mul_rolled(a, a); c = fp_mul_rolled(c, c); }
        else { a = fp_mul(a, a); c = fp_mul(c, c); }
    }
    fp_store(data, 3 * i, fp_add(a, c));
}

extern "C" __global__ void inv_rate(uint4* data, unsigned int iters, unsigned int method)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    fp_t a = fp_load(data, i);
    for (unsigned int k = 0; k < iters; ++k)
        a = fp_add(method == 2 ? fp_inv_batched(a) : method ? fp_inv_binary(a) : fp_inv(a), fp_one());
    fp_store(data, i, a);
}
"""

# The mixed additions alone, also built with EC_PRODUCTS_ROLLED (affine_rounds.XYZZ_PRODUCTS) to
# give the rolled products' rate per addition beside the unrolled one's.
MADD_KERNELS = r"""
extern "C" __global__ void __launch_bounds__(128)
madd_rate(const uint4* table, uint4* out, unsigned int iters)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    g1_xyzz_t acc = ec_infinity<fp_t>();
    for (unsigned int k = 0; k < iters; ++k)
        acc = ec_add_affine_inline(acc, ec_affine_load<fp_t>(table, (i + k) & 1023));
    ec_xyzz_store(out, i, acc);
}

extern "C" __global__ void __launch_bounds__(128)
madd_call_rate(const uint4* table, uint4* out, unsigned int iters)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    g1_xyzz_t acc = ec_infinity<fp_t>();
    for (unsigned int k = 0; k < iters; ++k)
        acc = ec_add_affine(acc, ec_affine_load<fp_t>(table, (i + k) & 1023));
    ec_xyzz_store(out, i, acc);
}
"""
RATE_KERNELS = PRODUCT_KERNELS + MADD_KERNELS
MADD_HEADER, MADD_ROLLED = '#include "g1.cuh"\n', "-DEC_PRODUCTS_ROLLED"


def device_info(cupy: Any) -> dict[str, Any]:
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    clock_khz = int(props.get("clockRate", 0)) or 1_980_000
    name = props["name"]
    return {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "sms": int(props["multiProcessorCount"]),
        "clock_ghz": clock_khz / 1e6,
        "memory_gib": int(props["totalGlobalMem"]) / 2**30,
        "cupy": cupy.__version__,
        "host": platform.node(),
    }


def time_events(cupy: Any, fn: Callable[[], Any], warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(float(cupy.cuda.get_elapsed_time(start, end)))
    return out


def measure_rates(cupy: Any, info: dict[str, Any], points: gpu_msm.DevicePoints) -> dict[str, float]:
    code = kernels.expand_includes(RATE_HEADER + RATE_KERNELS)
    module = cupy.RawModule(code=code, options=("-std=c++17",))
    sms = info["sms"]
    threads, iters = sms * 8 * 256, 512
    data = cupy.ascontiguousarray(cupy.tile(points.data[:1024].reshape(-1, 12), (threads * 3 // 2048 + 1, 1))
                                  [: 3 * threads])
    mul = module.get_function("fp_mul_rate")
    ms = statistics.median(time_events(cupy, lambda: mul((sms * 8,), (256,), (data, np.uint32(iters))), 1, 5))
    blocks, madd_iters = sms * 4, 256
    out = cupy.empty((blocks * 128, 48), dtype=cupy.uint32)
    table = points.data[:1024]
    rates: dict[str, float] = {"fp_mul_per_s": 2 * threads * iters / (ms / 1e3),
                               "imad_per_s": sms * IMAD_PER_CLOCK_PER_SM * info["clock_ghz"] * 1e9}
    sqr = module.get_function("fp_sqr_rate")
    for name, method in (("fp_mul_square_per_s", 0), ("fp_sqr_dedicated_per_s", 1),
                         ("fp_mul_rolled_per_s", 2)):
        def launch_sqr(m: int = method) -> None:
            sqr((sms * 8,), (256,), (data, np.uint32(iters), np.uint32(m)))

        sqr_ms = statistics.median(time_events(cupy, launch_sqr, 1, 5))
        rates[name] = 2 * threads * iters / (sqr_ms / 1e3)
    rolled = cupy.RawModule(code=kernels.expand_includes(MADD_HEADER + MADD_KERNELS),
                            options=("-std=c++17", MADD_ROLLED))
    for name, mod, kernel in (("madd_per_s", module, "madd_rate"),
                              ("madd_call_per_s", module, "madd_call_rate"),
                              ("madd_rolled_per_s", rolled, "madd_rate"),
                              ("madd_call_rolled_per_s", rolled, "madd_call_rate")):
        fn = mod.get_function(kernel)

        def launch(fn: Any = fn) -> None:
            fn((blocks,), (128,), (table, out, np.uint32(madd_iters)))

        madd_ms = statistics.median(time_events(cupy, launch, 1, 5))
        rates[name] = blocks * 128 * madd_iters / (madd_ms / 1e3)
    inv = module.get_function("inv_rate")
    inv_threads = sms * 4 * 128
    for name, binary in (("inv_fermat_per_s", 0), ("inv_binary_per_s", 1), ("inv_batched_per_s", 2)):
        def launch_inv(b: int = binary) -> None:
            inv((sms * 4,), (128,), (data, np.uint32(4), np.uint32(b)))

        inv_ms = statistics.median(time_events(cupy, launch_inv, 1, 3))
        rates[name] = inv_threads * 4 / (inv_ms / 1e3)
    return rates


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """The module settings of VARIANTS[name] (or BATCH_VARIANTS[name]) for the duration."""
    targets = [(gpu_msm, key[4:], v) if key.startswith("msm.") else (affine_rounds, key, v)
               for key, v in {**VARIANTS, **BATCH_VARIANTS}[name].items() if key != "window_delta"]
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in targets]
    for module, attr, v in targets:
        setattr(module, attr, v)
    try:
        yield
    finally:
        for module, attr, v in saved:
            setattr(module, attr, v)


def is_fixed(name: str) -> bool:
    """Whether a variant runs over precomputed window tables."""
    return {**VARIANTS, **BATCH_VARIANTS}[name].get("msm.PRECOMPUTED", "off") != "off"


def window_of(name: str, n: int, sets: int = 1) -> int:
    """The window a variant runs an MSM of n scalars with."""
    delta = int({**VARIANTS, **BATCH_VARIANTS}[name].get("window_delta", 0))
    if is_fixed(name):
        return max(2, min(msm_tables.MAX_WINDOW_BITS, msm_tables.fixed_window_bits(n, sets) + delta))
    return max(2, min(20, gpu_msm.window_bits(n) + delta))


def _add(a: bytes, b: bytes) -> bytes:
    return bytes((gpu_msm.to_library_point(a) + gpu_msm.to_library_point(b)).to_xy_bytes_le())


def bench_msm(cupy: Any, points: gpu_msm.DevicePoints, scalars: Any, log2: int, rates: dict[str, float],
              args: argparse.Namespace, name: str) -> dict[str, Any]:
    n = 1 << log2
    sub = gpu_msm.DevicePoints(data=points.data[:n], n=n, backend=points.backend)
    s = scalars[:n]
    c = window_of(name, n)
    fixed = is_fixed(name)
    table: dict[str, Any] | None = None
    with variant(name):
        if fixed:  # built once for these bases; every call below reuses it
            table = msm_tables.TABLES.build(sub, c).describe()
        window = None if fixed else c  # over a table: the table's window (which may pass 20)
        times = time_events(cupy, lambda: gpu_msm.msm(sub, s, window=window), args.warmup, args.repeats)
        marks: list[tuple[str, Any]] = []

        def hook(phase: str) -> None:
            ev = cupy.cuda.Event()
            ev.record()
            marks.append((phase, ev))

        gpu_msm.phase_hook = hook
        try:
            result = gpu_msm.msm(sub, s, window=window)
        finally:
            gpu_msm.phase_hook = None
        marks[-1][1].synchronize()
    if fixed:
        msm_tables.TABLES.drop(sub)
        cupy.get_default_memory_pool().free_all_blocks()
    phases = {a[0]: float(cupy.cuda.get_elapsed_time(a[1], b[1])) for a, b in itertools.pairwise(marks)}
    quarter = n // 4
    check = "default" if fixed else name  # a fixed variant's quarters: the default path's sums
    with variant(check):
        parts = [gpu_msm.msm(gpu_msm.DevicePoints(data=points.data[k * quarter:(k + 1) * quarter], n=quarter,
                                                  backend=points.backend), s[k * quarter:(k + 1) * quarter],
                             window=window_of(check, quarter))
                 for k in range(4)]
    total = parts[0]
    for part in parts[1:]:
        total = _add(total, part)
    windows = gpu_msm.window_count(c)
    buckets = (1 if fixed else windows) * ((1 << (c - 1)) + 1)
    muls = n * windows * MULS_PER_MADD + buckets * 2 * MULS_PER_ADD
    madds = n * windows + buckets * 2 * MULS_PER_ADD / MULS_PER_MADD
    median = statistics.median(times)
    floors = {"imad_ms": muls * IMADS_PER_MUL / rates["imad_per_s"] * 1e3,
              "madd_ms": madds / rates["madd_per_s"] * 1e3,
              "bytes_ms": n * (96 + 32) / BANDWIDTH * 1e3}
    target = TARGETS_MS.get(("msm", log2))
    return {"op": "msm", "variant": name, "log2": log2, "window_bits": c, "windows": windows,
            "median_ms": median, "min_ms": min(times), "times_ms": times, "phases_ms": phases,
            "floors": floors, "table": table,
            "over_imad_floor": median / floors["imad_ms"], "over_madd_floor": median / floors["madd_ms"],
            "target_ms": target, "over_target": median / target if target else None,
            "over_anchor": median / ANCHOR_MS[("msm", log2)] if ("msm", log2) in ANCHOR_MS else None,
            "quarters_consistent": total == result, "result": result.hex()}


def bench_batch_add(cupy: Any, points: gpu_msm.DevicePoints, log2: int, rates: dict[str, float],
                    args: argparse.Namespace, name: str) -> dict[str, Any]:
    n = 1 << log2
    sub = gpu_msm.DevicePoints(data=points.data[:n], n=n, backend=points.backend)
    mask = np.random.default_rng(args.seed + 1).random(n) < 0.5
    bitmap = cupy.asarray(np.packbits(mask, bitorder="little"))
    with variant(name):
        times = time_events(cupy, lambda: gpu_msm.batch_add(sub, bitmap), args.warmup, args.repeats)
        result = gpu_msm.batch_add(sub, bitmap)
    selected = int(mask.sum())
    median = statistics.median(times)
    floors = {"imad_ms": selected * MULS_PER_MADD * IMADS_PER_MUL / rates["imad_per_s"] * 1e3,
              "madd_ms": selected / rates["madd_per_s"] * 1e3,
              "bytes_ms": (selected * 96 + n / 8) / BANDWIDTH * 1e3}
    target = TARGETS_MS.get(("batch_add", log2))
    return {"op": "batch_add", "variant": name, "log2": log2, "selected": selected, "median_ms": median,
            "min_ms": min(times), "times_ms": times, "floors": floors,
            "over_imad_floor": median / floors["imad_ms"],
            "over_madd_floor": median / floors["madd_ms"], "target_ms": target,
            "over_target": median / target if target else None, "result": result.hex()}


def _row(r: dict[str, Any]) -> str:
    extra = ""
    if r["op"] == "msm":
        extra = " ".join(f"{k}={v:.2f}" for k, v in r["phases_ms"].items())
        extra += f" quarters_ok={r['quarters_consistent']}"
        if r["table"]:
            t = r["table"]
            extra += f" table: {t['setup_ms']:.0f} ms setup, {t['bytes'] / 2**30:.2f} GiB"
    return (f"{r['op']:10} {r['variant']:12} {r['log2']:>4} {r.get('window_bits', '-'):>3} "
            f"{r['median_ms']:>10.2f} "
            f"{r['target_ms'] or 0:>7.1f} {r['floors']['imad_ms']:>10.2f} {r['over_imad_floor']:>5.2f} "
            f"{r['floors']['madd_ms']:>10.2f} {r['over_madd_floor']:>5.2f} "
            f"{r['over_target'] or 0:>5.2f}  {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 22, 24])
    parser.add_argument("--batch-add-log2", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    parser.add_argument("--batch-add-variants", nargs="*", default=["default"],
                        choices=[*VARIANTS, *BATCH_VARIANTS])
    args = parser.parse_args()
    cupy = kernels.require_cupy()
    info = device_info(cupy)
    top = max(*args.sizes, args.batch_add_log2)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    point_scalars = srs_gen.random_scalars(1 << top, rng)
    t1 = time.perf_counter()
    points = srs_gen.device_points_from_scalars(point_scalars)
    cupy.cuda.Device().synchronize()
    t2 = time.perf_counter()
    # The points' own scalars shifted by one row: uniform below r, no second host draw.
    scalars = cupy.roll(cupy.asarray(point_scalars), 1, axis=0)
    rates = measure_rates(cupy, info, points)
    t3 = time.perf_counter()
    # Each line as it comes, and the report after each: a run cut short by a device call's time
    # limit still says what it measured.
    print(f"{info['name']}: {info['sms']} SMs at {info['clock_ghz']:.2f} GHz; "
          f"fp_mul {rates['fp_mul_per_s']:.3g}/s, madd {rates['madd_per_s']:.3g}/s "
          f"(called {rates['madd_call_per_s']:.3g}/s; rolled products {rates['madd_rolled_per_s']:.3g}/s, "
          f"called {rates['madd_call_rolled_per_s']:.3g}/s); inv {rates['inv_fermat_per_s']:.3g}/s Fermat, "
          f"{rates['inv_binary_per_s']:.3g}/s binary, {rates['inv_batched_per_s']:.3g}/s batched; "
          f"squaring {rates['fp_mul_square_per_s']:.3g}/s as a product, "
          f"{rates['fp_sqr_dedicated_per_s']:.3g}/s dedicated, "
          f"rolled product {rates['fp_mul_rolled_per_s']:.3g}/s; "
          f"SRS gen 2^{top}: {t2 - t1:.2f} s device (its module's compile included) + {t1 - t0:.2f} s host; "
          f"rates {t3 - t2:.1f} s", flush=True)
    print(f"{'op':10} {'variant':12} {'log2':>4} {'c':>3} {'median ms':>10} {'target':>7} {'imad floor':>10} "
          f"{'x':>5} {'madd floor':>10} {'x':>5} {'x tgt':>5}  phases / check", flush=True)
    jobs = [("msm", log2, name) for log2 in args.sizes for name in args.variants]
    jobs += [("batch_add", args.batch_add_log2, name) for name in args.batch_add_variants]
    results: list[dict[str, Any]] = []
    for op, log2, name in jobs:
        results.append(bench_msm(cupy, points, scalars, log2, rates, args, name) if op == "msm"
                       else bench_batch_add(cupy, points, log2, rates, args, name))
        print(_row(results[-1]), flush=True)
        by_op: dict[tuple[str, int], set[str]] = {}
        for r in results:
            by_op.setdefault((r["op"], r["log2"]), set()).add(r["result"])
        agree = {f"{op} 2^{log2}": len(v) == 1 for (op, log2), v in by_op.items()}
        report = {"device": info, "rates": rates, "repeats": args.repeats, "warmup": args.warmup,
                  "srs_generation": {"log2": top, "host_scalars_s": t1 - t0, "device_points_s": t2 - t1},
                  "variants_agree": agree, "results": results}
        args.out.write_text(json.dumps(report, indent=2))
    print(f"variants agree: {agree}")


if __name__ == "__main__":
    main()
