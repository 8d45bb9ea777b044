"""Affine halving rounds (kernels/batch_affine.cuh) over runs of points, for the MSM's sorted
buckets and batch addition's selected points.

A round pairs the points of every run and writes ceil(count / 2) affine sums per run, all
divisions of a thread's k sums sharing one inversion. The host decides how many rounds run:
a round pays while it has many pairs, so that k stays at 32 or more with the GPU full; when
pairs are few the rest is cheaper as XYZZ additions (the callers' existing passes), and each
round also costs a read-back of its size. The rule is :func:`round_pays`, its constants
module attributes that tests and benchmarks may change. So are the switches between the
inversions (INVERSION), the rounds' build options (PRODUCTS, SQUARE), the XYZZ kernels' build
option (XYZZ_PRODUCTS) and batch_add's method (BATCH_ADD, with the hybrid's shape HYBRID_*):
they change no result, only how it is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_PAIRS = 1 << 21
"""A G1 round runs only with at least this many pairs (k = 32 over 2^16 threads)."""

MIN_FRACTION = 0.25
"""... and when at least this share of its input points are paired away."""

MIN_PAIRS_G2, MIN_FRACTION_G2 = 1 << 19, 0.1
"""The same for G2, whose products cost three of Fp's while its inversion costs about one
more: smaller rounds still pay (on the H200, the 2^22 partition's G2 tail took 40.5 ms with
the G1 rule and 33.6 ms with this one, batch addition 11.6 and 9.7)."""

INVERSION = "batched"
"""The inversion a batch of divisions shares (kernels/batch_affine.cuh): "batched"
(fp_inv_batched, 30 binary-GCD steps at a time on 64-bit approximations: 4.25e8/s on the
H200, 41 products' time) or "binary" (fp_inv_binary, one full-width step at a time: 7.5e7/s,
235 products' time; kept to time against). Measured side by side (kernels/NOTES_msm.md, row
2): batch_add 2^24 10.7 -> 10.0 ms, MSM 2^20 / 2^22 1-3 % faster, the partition's sums 1-5 %,
MSM 2^24 1 % slower."""

PRODUCTS = "rolled"
"""How the round kernels form their Fp products (kernels/batch_affine.cuh, a build option of
the kernels): "rolled" (the default: inlined products whose twelve CIOS rounds run in a loop,
one round's code each), "inline" (every product unrolled and inlined: six ~590-instruction
copies in the back pass, whose warps waited on instruction fetch for 40-60 % of their cycles)
or "called" (calls of one copy of the product's code). On the H200 (NOTES_msm.md row 5) the
rounds of an MSM 2^24 took 118.8 / 151.8 / 125.4 ms, batch_add 2^24 8.87 / 9.68 / 9.08."""

SQUARE = "product"
"""The rounds' squarings (lambda^2, and the norm in G2's inversion): "product" (the default:
the product of PRODUCTS with itself) or "dedicated" (fp_sqr_dedicated in kernels/fp.cuh: 78
limb products for a^2 instead of 144, the reduction unchanged; 2.22e10/s against 1.73e10/s
on the H200, but a second ~15 KB of hot code: MSM 2^24 197.7 ms against 201.7 with inlined
products, 187.0 against 176.4 with called ones)."""

XYZZ_PRODUCTS = "rolled"
"""How the curve code of msm.cu and batch_add.cu forms its Fp products (kernels/fp.cuh,
fp_mul_curve; a build option of those modules, which G2's rounds built into them follow too,
their products being fp2_mul's): "rolled" (the default, EC_PRODUCTS_ROLLED: the twelve CIOS
rounds in a loop; msm_accumulate's body 207 -> 52 KB, ec_dbl 179 -> 39 KB, fp2_mul 61 -> 15 KB)
or "inline" (unrolled). On the H200 (kernels/NOTES_msm.md, row 7) rolled took MSM 2^24 over a
window table from 132.87 to 126.64 ms (reduce 11.10 -> 6.00), without one 168.24 -> 157.68,
batch_add 2^24 9.79 -> 7.96, and a 2^22 partition's G2 tail 29.58 -> 25.78."""

BATCH_ADD = "rounds"
"""batch_add's method: "rounds" (the selected indices compacted on the device and read back,
halved here over all of them while round_pays, XYZZ for the rest), or "hybrid" (kernels/
batch_add.cu, batch_add_slices: every thread halves its slices of the bitmap in two affine
rounds, k = 64 and 32 at half density, no compaction and no read-back, and batch_slice_sums
adds the quarter left in XYZZ). "hybrid" is not timed yet."""

HYBRID_THREADS = 1 << 16
"""batch_add_slices' threads at most (about one resident wave on the H200): they bound its
scratch, each thread looping over slices beyond."""

HYBRID_WORDS = 4
"""64-bit bitmap words a slice of batch_add_slices (at most 1024: offsets are 16 bits)."""

_PRODUCT_DEFINES = {"rolled": (), "inline": ("BA_PRODUCTS_INLINE",), "called": ("BA_PRODUCTS_CALLED",)}
_SQUARE_DEFINES = {"product": (), "dedicated": ("FP_SQR_DEDICATED",)}
_XYZZ_DEFINES = {"inline": (), "rolled": ("EC_PRODUCTS_ROLLED",)}
CURVE_MODULES = ("msm", "batch_add")
"""The modules whose builds XYZZ_PRODUCTS picks (their callers launch curve_module(name))."""


def _xyzz_defines() -> tuple[str, ...]:
    if XYZZ_PRODUCTS not in _XYZZ_DEFINES:
        raise ValueError(f"XYZZ_PRODUCTS must be one of {sorted(_XYZZ_DEFINES)}, got {XYZZ_PRODUCTS!r}")
    return _XYZZ_DEFINES[XYZZ_PRODUCTS]


def curve_module(name: str) -> str:
    """The build of kernels/<name>.cu (msm or batch_add) that XYZZ_PRODUCTS selects: the name
    itself by default, else the name with its define (workbench.gpu.kernels.split_name)."""
    return "+".join((name, *_xyzz_defines()))


def round_module(default: str) -> str:
    """The module whose affine_round kernels a round launches: the caller's own (`default`,
    curve_module of msm or batch_add) with the default build, else kernels/affine_round.cu
    built with the options PRODUCTS and SQUARE name, and XYZZ_PRODUCTS' define (G2's round
    products are the curve code's fp2_mul)."""
    if PRODUCTS not in _PRODUCT_DEFINES:
        raise ValueError(f"PRODUCTS must be one of {sorted(_PRODUCT_DEFINES)}, got {PRODUCTS!r}")
    if SQUARE not in _SQUARE_DEFINES:
        raise ValueError(f"SQUARE must be one of {sorted(_SQUARE_DEFINES)}, got {SQUARE!r}")
    defines, curve = _PRODUCT_DEFINES[PRODUCTS] + _SQUARE_DEFINES[SQUARE], _xyzz_defines()
    return "+".join(("affine_round", *defines, *curve)) if defines else default


def option_builds() -> list[str]:
    """The module names round_module and curve_module can give besides the callers' own
    default builds, for benchmarks/prebuild_kernels.py to build ahead: the round builds of
    PRODUCTS and SQUARE (with XYZZ_PRODUCTS' define) and CURVE_MODULES' rolled builds (their
    plain ones are the callers' own).
    The other combinations are compiled where first used."""
    pairs = ((p, q) for p in _PRODUCT_DEFINES.values() for q in _SQUARE_DEFINES.values() if p or q)
    rounds = ["+".join(("affine_round", *p, *q, *_xyzz_defines())) for p, q in pairs]
    curves = ["+".join((m, *d)) for m in CURVE_MODULES for d in _XYZZ_DEFINES.values() if d]
    return sorted(rounds + curves)


TARGET_THREADS = 1 << 16  # a round's threads when its outputs allow k >= K_MIN
MAX_THREADS = 1 << 17  # beyond it threads loop over chunks (bounds the scratch)
K_MIN, K_MAX = 32, 256


def binary_flag() -> np.uint32:
    """The kernels' `binary` argument for INVERSION."""
    if INVERSION not in ("batched", "binary"):
        raise ValueError(f"INVERSION must be 'batched' or 'binary', got {INVERSION!r}")
    return np.uint32(INVERSION == "binary")


def round_pays(pairs: int, total: int, g2: bool = False) -> bool:
    least, share = (MIN_PAIRS_G2, MIN_FRACTION_G2) if g2 else (MIN_PAIRS, MIN_FRACTION)
    return pairs > 0 and pairs >= least and pairs >= share * total


def round_shape(total_out: int) -> tuple[int, int]:
    """(threads, k) of a round with total_out outputs: chunks of k outputs, as many threads as
    chunks up to MAX_THREADS, beyond which each thread takes the same number of chunks."""
    k = min(K_MAX, max(K_MIN, -(-total_out // TARGET_THREADS)))
    chunks = -(-total_out // k)
    loops = -(-chunks // MAX_THREADS)
    return -(-chunks // loops), k


@dataclass(frozen=True)
class Halved:
    """Runs after the rounds: affine points `data` (flat uint32) with `entries` naming them in
    run order (None: no round ran, the caller's inputs stand), per-run counts and inclusive
    ends, and the total."""

    data: Any
    entries: Any
    counts: Any
    ends: Any
    total: int
    rounds: int


def halve_runs(be: Any, ws: Any, module: str, kernel: str, affine_words: int, data: Any, entries: Any,
               counts: Any, ends: Any, runs: int, total: int) -> Halved:
    """Affine rounds over `runs` runs of `total` inputs (the first read through `entries`,
    uint32 index | sign << 31, from table `data`), while :func:`round_pays`."""
    xp = be.xp
    src, src_entries, rounds = data, entries, 0
    while total > 1:
        out_counts = ws.buffer(f"round_counts{rounds & 1}", np.uint32, runs)
        xp.add(counts, np.uint32(1), out=out_counts)
        xp.right_shift(out_counts, np.uint32(1), out=out_counts)
        out_ends = ws.buffer(f"round_ends{rounds & 1}", np.uint32, runs)
        xp.cumsum(out_counts, dtype=np.uint32, out=out_ends)
        total_out = int(be.download(out_ends[runs - 1:])[0])
        if not round_pays(total - total_out, total, g2=affine_words > 24):
            break
        threads, k = round_shape(total_out)
        words = affine_words // 2  # one coordinate
        out = ws.buffer(f"round_points{rounds & 1}", np.uint32, total_out * affine_words)
        prefix = ws.buffer("round_prefix", np.uint32, threads * k * words)
        picks = ws.buffer("round_picks", np.uint32, threads * k)
        has_entries = src_entries is not None
        be.launch(round_module(module), kernel, threads,
                  (src, src_entries if has_entries else out_ends, np.uint32(has_entries), ends, out_ends,
                   np.uint64(runs), out, prefix, picks, np.uint64(threads), np.uint32(k), binary_flag()))
        src, src_entries, counts, ends, total = out, None, out_counts, out_ends, total_out
        rounds += 1
    if rounds == 0:
        return Halved(data, entries, counts, ends, total, 0)
    identity = ws.buffer("round_identity", np.uint32, total)
    identity[...] = xp.arange(total, dtype=np.uint32)
    return Halved(src, identity, counts, ends, total, rounds)
