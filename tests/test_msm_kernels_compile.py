"""The G1 kernels without a GPU: msm.cu and batch_add.cu build for the H200 (sm_90), the
field and point arithmetic of fp.cuh / g1.cuh matches Python integers and the curve library,
and the whole MSM, batch-add and fixed-base pipelines, compiled for the CPU with a grid of
one thread (every kernel is a grid-stride loop), match the library.

Needs nvcc for the sm_90 builds and a host C++ compiler plus the CUDA headers for the rest;
each is skipped with a reason where absent. The device's own PTX carry chains are checked
on the GPU by tests/test_gpu_msm.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from digit_cases import carry_scalars
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from workbench.gpu import affine_rounds, kernels, msm_tables, srs_gen
from workbench.gpu import msm as gpu_msm
from workbench.prover.curve import R_MODULUS, G1Points, G2Points, batch_add, msm, point_to_bytes

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
NVCC = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None)
CXX = shutil.which("g++") or shutil.which("c++")
CUDA_INCLUDE = next((p for p in (Path("/usr/local/cuda/include"),) if (p / "vector_types.h").exists()), None)
if CUDA_INCLUDE is None and NVCC is not None:
    guess = Path(NVCC).resolve().parents[1] / "include"
    CUDA_INCLUDE = guess if (guess / "vector_types.h").exists() else None
P = gpu_msm.P_MODULUS
R384 = (1 << 384) % P
R384_INV = pow(1 << 384, -1, P)
MONT_R256 = (1 << 256) % R_MODULUS

needs_cxx = pytest.mark.skipif(CXX is None or CUDA_INCLUDE is None,
                               reason="host C++ compiler or CUDA headers (vector_types.h) not found")


# Stands in for the CUDA front end: one block of one thread, so a grid-stride loop covers
# all the work in one call; atomics are plain read-modify-writes, a block's shared memory is
# a plain array and its barrier does nothing.
PRELUDE = r"""
#include <vector_types.h>
#include <vector_functions.h>
struct emu_dim3 { unsigned int x, y, z; };
static const emu_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
static const emu_dim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#undef __global__
#define __global__
#define __launch_bounds__(...)
template <class T> inline T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
#define __shared__ static
inline void __syncthreads() {}
"""

# Hex in and out of an Fp element, for the harnesses below (they read lines of hex numbers).
HEX_IO = r"""
static fp_t parse(const char* hex) {
    fp_t x = fp_zero();
    int len = (int)strlen(hex);
    for (int k = 0; k < len; ++k) {
        char ch = hex[len - 1 - k];
        unsigned v = ch <= '9' ? ch - '0' : (ch | 32) - 'a' + 10;
        x.l[k / 8] |= v << (4 * (k % 8));
    }
    return x;
}
static void show(const fp_t& z) { for (int j = 11; j >= 0; --j) printf("%08x", z.l[j]); printf("\n"); }
"""

POINT_OPS = r"""
// The point operations the tests ask for, for either group (curve.cuh's templates).
template <class A>
static int point_op(const char* op, const A& p, const A& q) {
    if (!strcmp(op, "g_madd")) show_point(ec_add_affine(ec_from_affine(p), q));
    else if (!strcmp(op, "g_add")) show_point(ec_add(ec_from_affine(p), ec_from_affine(q)));
    else if (!strcmp(op, "g_xadd"))  // 2p + (q + p): doubling and addition of XYZZ inputs
        show_point(ec_add(ec_dbl(ec_from_affine(p)), ec_add_affine(ec_from_affine(q), p)));
    else if (!strcmp(op, "g_dbl")) show_point(ec_dbl(ec_from_affine(p)));
    else if (!strcmp(op, "g_dbl_affine")) show_point(ec_dbl_affine(p));
    else if (!strcmp(op, "g_neg")) show_point(ec_from_affine(ec_affine_neg(p)));
    else return 1;
    return 0;
}
"""

HARNESS = r"""
#include <cstdio>
#include <cstring>
#include "g1.cuh"
#include "batch_affine.cuh"
""" + HEX_IO + r"""
static g1_affine_t point(const char* x, const char* y) {
    g1_affine_t p; p.x = fp_to_mont(parse(x)); p.y = fp_to_mont(parse(y)); return p;
}
static void show_point(const g1_xyzz_t& p) {
    g1_affine_t a = ec_to_affine(p);
    show(fp_from_mont(a.x)); show(fp_from_mont(a.y));
}
""" + POINT_OPS + r"""

int main() {
    char op[16], a[100], b[100], c[100], d[100];
    while (scanf("%15s %99s %99s %99s %99s", op, a, b, c, d) == 5) {
        fp_t x = parse(a), y = parse(b);
        if (!strcmp(op, "add")) show(fp_add(x, y));
        else if (!strcmp(op, "sub")) show(fp_sub(x, y));
        else if (!strcmp(op, "mul")) show(fp_mul(x, y));
        else if (!strcmp(op, "mulr")) show(fp_mul_rolled(x, y));
        else if (!strcmp(op, "sqr")) show(fp_sqr_dedicated(x));
        else if (!strcmp(op, "inv")) show(fp_inv(x));
        else if (!strcmp(op, "binv")) show(fp_inv_binary(x));
        else if (!strcmp(op, "finv")) show(fp_inv_batched(x));
        else if (!strcmp(op, "to_mont")) show(fp_to_mont(x));
        else if (!strcmp(op, "from_mont")) show(fp_from_mont(x));
        else {
            g1_affine_t p = point(a, b), q = point(c, d);
            if (point_op(op, p, q)) return 2;
        }
    }
    return 0;
}
"""


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


# Compiling for sm_90 is test_kernels_compile.py's job: it builds every kernels/*.cu.


def _compile_host(tmp: Path, name: str, source: Path, shared: bool, defines: tuple[str, ...] = (),
                  prelude_text: str = PRELUDE, opt: str = "-O2") -> Path:
    """A kernel source built for the host with a prelude that stands in for CUDA's built-ins
    (test_ntt_kernels_host.py passes its own: a grid walked block by block)."""
    assert CXX is not None and CUDA_INCLUDE is not None
    prelude = tmp / "prelude.h"
    prelude.write_text(prelude_text)
    out = tmp / name
    cmd = [CXX, "-std=c++17", opt, "-w", f"-I{CUDA_INCLUDE}", f"-I{KERNELS}", "-include", str(prelude),
           *(f"-D{d}" for d in defines), "-x", "c++", str(source), "-o", str(out)]
    if shared:
        cmd[1:1] = ["-shared", "-fPIC"]
    proc = _run(cmd)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("fp_harness")
    src = tmp / "harness.cpp"
    src.write_text(HARNESS)
    return _compile_host(tmp, "harness", src, shared=False)


def _ask(exe: Path, lines: list[str]) -> list[int]:
    proc = _run([str(exe)], input="".join(lines))
    assert proc.returncode == 0, proc.stderr
    return [int(v, 16) for v in proc.stdout.split()]


def _fp_edges() -> list[int]:
    return [0, 1, 2, P - 1, P - 2, R384, (P - 1) // 2, (P + 1) // 2, 2**32 - 1, 2**64 - 1, 2**380, P - 2**32,
            P - 2**200]


@needs_cxx
def test_fp_matches_python_ints(harness: Path):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    values = _fp_edges() + [rng.randrange(P) for _ in range(300)]
    cases: list[tuple[str, int, int, int]] = []
    for x in values:
        y = rng.choice(values)
        cases += [("add", x, y, (x + y) % P), ("sub", x, y, (x - y) % P), ("sub", y, x, (y - x) % P),
                  ("mul", x, y, x * y * R384_INV % P), ("to_mont", x, 0, x * R384 % P),
                  ("from_mont", x, 0, x * R384_INV % P)]
    cases += [("mul", e, f, e * f * R384_INV % P) for e in _fp_edges() for f in _fp_edges()]
    # fp_inv works in Montgomery form: inv(xR) = x^-1 R.
    for x in values[:60]:
        want = 0 if x == 0 else pow(x * R384_INV % P, -1, P) * R384 % P
        cases += [("inv", x, 0, want), ("binv", x, 0, want), ("finv", x, 0, want)]
    # fp_inv_batched's hardest inputs: a power of two (2^380 takes 26 of its 27 batches of 30 steps), P
    # minus one, values of few bits (long runs of halvings and wrong approximate comparisons).
    hard = [1 << k for k in range(0, 381, 7)] + [P - (1 << k) for k in range(0, 380, 11)] + [2**380, P - 1]
    hard += [rng.randrange(1, 1 << rng.randrange(1, 381)) for _ in range(200)]
    for x in hard:
        cases.append(("finv", x, 0, pow(x * R384_INV % P, -1, P) * R384 % P))
    got = _ask(harness, [f"{op} {x:x} {y:x} 0 0\n" for op, x, y, _ in cases])
    assert len(got) == len(cases)
    bad = [(op, hex(x), hex(y)) for (op, x, y, w), g in zip(cases, got, strict=True) if g != w]
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first {bad[:3]}"


@needs_cxx
def test_fp_product_forms_match_python_ints(harness: Path):
    """The rounds' build options: fp_mul_rolled (the CIOS rounds in a loop) for a, b < p, and
    fp_sqr_dedicated for every a below 2^382, which it admits (values up to 2p and past)."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    reduced = _fp_edges() + [rng.randrange(P) for _ in range(200)]
    wide = [P, P + 1, 2 * P - 1, 2 * P, 2 * P + 1, 2**381, 2**382 - 1, 2**382 - 2**191,
            *(rng.randrange(P, 2**382) for _ in range(100))]
    low_bits = [rng.randrange(1 << rng.randrange(1, 382)) for _ in range(100)]
    cases = [("sqr", x, 0, x * x * R384_INV % P) for x in reduced + wide + low_bits]
    for x in reduced:
        y = rng.choice(reduced)
        cases += [("mulr", x, y, x * y * R384_INV % P), ("mulr", x, x, x * x * R384_INV % P)]
    cases += [("mulr", e, f, e * f * R384_INV % P) for e in _fp_edges() for f in _fp_edges()]
    got = _ask(harness, [f"{op} {x:x} {y:x} 0 0\n" for op, x, y, _ in cases])
    assert len(got) == len(cases)
    bad = [(op, hex(x), hex(y)) for (op, x, y, w), g in zip(cases, got, strict=True) if g != w]
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first {bad[:3]}"


def _ints(p: G1Point) -> tuple[int, int]:
    raw = p.to_xy_bytes_le()
    return int.from_bytes(raw[:48], "little"), int.from_bytes(raw[48:], "little")


def _random_point(rng: random.Random) -> G1Point:
    return G1Point() * Scalar(rng.randrange(1, R_MODULUS))


def _point_op_cases(p: Any, q: Any, inf: Any) -> list[tuple[str, Any, Any, Any]]:
    """(op, p, q, expected) for the harnesses' point operations, in either group: the generic
    cases, then the special ones the generic formulas cannot do."""
    return [("madd", p, q, p + q), ("add", p, q, p + q), ("dbl", p, inf, p + p),
            ("dbl_affine", p, inf, p + p), ("neg", p, inf, -p), ("xadd", p, q, p + p + q + p),
            ("madd", p, p, p + p), ("add", p, p, p + p), ("madd", p, -p, inf), ("add", p, -p, inf),
            ("madd", p, inf, p), ("madd", inf, q, q), ("add", inf, q, q), ("add", p, inf, p),
            ("dbl", inf, inf, inf), ("xadd", p, -p, p + p)]


def _curve_defines(build: str) -> tuple[str, ...]:
    """The defines of affine_rounds.XYZZ_PRODUCTS = build (the curve code's products)."""
    saved = affine_rounds.XYZZ_PRODUCTS
    affine_rounds.XYZZ_PRODUCTS = build
    try:
        return kernels.split_name(affine_rounds.curve_module("msm"))[1]
    finally:
        affine_rounds.XYZZ_PRODUCTS = saved


CURVE_BUILDS = ["inline", "rolled"]


@pytest.fixture(scope="module", params=CURVE_BUILDS)
def harness_curve(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  harness: Path) -> Path:
    """The G1 harness in each build of the curve code's products (the default's is `harness`)."""
    defines = _curve_defines(str(request.param))
    if not defines:
        return harness
    tmp = tmp_path_factory.mktemp(f"fp_harness_{request.param}")
    src = tmp / "harness.cpp"
    src.write_text(HARNESS)
    return _compile_host(tmp, "harness", src, shared=False, defines=defines)


@needs_cxx
def test_g1_ops_match_library(harness_curve: Path):
    harness = harness_curve
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    inf = G1Point.identity()
    cases: list[tuple[str, G1Point, G1Point, G1Point]] = []
    for _ in range(20):
        cases += [*_point_op_cases(_random_point(rng), _random_point(rng), inf), ("madd", inf, inf, inf)]
    lines = []
    for op, p, q, _ in cases:
        (x1, y1), (x2, y2) = _ints(p), _ints(q)
        lines.append(f"g_{op} {x1:x} {y1:x} {x2:x} {y2:x}\n")
    got = _ask(harness, lines)
    assert len(got) == 2 * len(cases)
    bad = [op for i, (op, _, _, want) in enumerate(cases) if (got[2 * i], got[2 * i + 1]) != _ints(want)]
    assert not bad, f"seed {seed}: mismatches in {bad[:5]}"


# ---------------------------------------------------------------- the pipeline on the CPU


class EmulatedBackend:
    """The msm.py backend interface over kernels compiled for the host (numpy arrays)."""

    xp = np

    def __init__(self, libraries: dict[str, ctypes.CDLL], tmp: Path | None = None) -> None:
        self.libraries = libraries
        self.tmp = tmp
        self.launches: list[str] = []
        self.modules: list[str] = []

    def launch(self, module: str, kernel: str, work: int, args: tuple[Any, ...], threads: int = 128) -> None:
        fn = getattr(self._library(module), kernel)
        fn.restype = None
        fn(*(self._arg(a) for a in args))
        self.launches.append(kernel)
        self.modules.append(module)

    def _library(self, module: str) -> ctypes.CDLL:
        """A module built with defines (a round variant's) is compiled on its first launch."""
        lib = self.libraries.get(module)
        if lib is None:
            assert self.tmp is not None, f"module {module} not built and no folder to build it in"
            file, defines = kernels.split_name(module)
            so = _compile_host(self.tmp, f"{module}.so", KERNELS / f"{file}.cu", shared=True, defines=defines)
            lib = self.libraries[module] = ctypes.CDLL(str(so))
        return lib

    @staticmethod
    def _arg(a: Any) -> Any:
        if isinstance(a, np.ndarray):
            return ctypes.c_void_p(a.ctypes.data)
        if isinstance(a, np.uint64):
            return ctypes.c_uint64(int(a))
        if isinstance(a, np.uint32):
            return ctypes.c_uint32(int(a))
        raise TypeError(f"unexpected kernel argument {type(a)}")

    def upload(self, dst: np.ndarray, src: np.ndarray) -> None:
        np.copyto(dst, src)

    def download(self, arr: np.ndarray) -> np.ndarray:
        return np.array(arr)

    def stream_context(self, stream: Any) -> Any:
        return contextlib.nullcontext()

    def workspace_key(self) -> Any:
        return "emulated"

    def is_device_array(self, arr: Any) -> bool:
        return False


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> EmulatedBackend:
    if CXX is None or CUDA_INCLUDE is None:
        pytest.skip("host C++ compiler or CUDA headers (vector_types.h) not found")
    tmp = tmp_path_factory.mktemp("emulated_kernels")
    libs = {name: ctypes.CDLL(str(_compile_host(tmp, f"{name}.so", KERNELS / f"{name}.cu", shared=True)))
            for name in ("msm", "batch_add", "fixed_base")}
    return EmulatedBackend(libs, tmp)


def _mont(values: list[int]) -> np.ndarray:
    out = np.zeros((len(values), 4), dtype=np.uint64)
    for i, v in enumerate(values):
        m = v * MONT_R256 % R_MODULUS
        out[i] = [(m >> (64 * k)) & (2**64 - 1) for k in range(4)]
    return out


def _points(rng: random.Random, n: int) -> G1Points:
    return G1Points.from_objects([_random_point(rng) for _ in range(n)])


@pytest.mark.parametrize("n", [1, 5, 64, 301])
def test_emulated_msm_matches_library(backend: EmulatedBackend, n: int):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    points = _points(rng, n)
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    scalars = _mont([rng.randrange(R_MODULUS) for _ in range(n)])
    gpu_msm._workspace(backend).poison()
    got = gpu_msm.msm(dev, scalars)
    assert got == point_to_bytes(msm(points, scalars)), f"seed {seed}"
    assert dev.to_points() == points


@pytest.mark.parametrize("case", ["zero", "one", "r_minus_1", "repeated", "cancel", "small", "indices"])
def test_emulated_msm_edge_cases(backend: EmulatedBackend, msm_path: str, case: str):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    n = 97
    points = _points(rng, n)
    values = [rng.randrange(R_MODULUS) for _ in range(n)]
    indices = None
    if case == "zero":
        values = [0] * n
    elif case == "one":
        values = [1] * n
    elif case == "r_minus_1":
        values = [R_MODULUS - 1] * n
    elif case == "repeated":
        one = points.xy[3]
        points = G1Points(np.repeat(one[None, :], n, axis=0))
    elif case == "cancel":  # the same point with s and r - s: the sum is infinity
        values = [values[0], R_MODULUS - values[0]] * (n // 2) + [0]
        points = G1Points(np.repeat(points.xy[:1], n, axis=0))
    elif case == "small":
        values = [rng.randrange(1, 40) for _ in range(n)]
    elif case == "indices":
        indices = np.array(sorted(rng.sample(range(n), 40)), dtype=np.int64)
        values = values[:40]
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    scalars = _mont(values)
    gpu_msm._workspace(backend).poison()
    got = gpu_msm.msm(dev, scalars, indices)
    want = msm(points, scalars, indices)
    assert got == point_to_bytes(want), f"{case}, seed {seed}"


def test_emulated_msm_large_bucket_is_split(backend: EmulatedBackend):
    """All scalars equal puts every point in one bucket: it is cut between threads."""
    rng = random.Random(random.SystemRandom().randrange(2**32))
    n = 400
    points = _points(rng, n)
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    scalars = _mont([12345] * n)
    assert gpu_msm.msm(dev, scalars) == point_to_bytes(msm(points, scalars))


@pytest.mark.parametrize("n", [1, 9, 64, 200, 1000])
def test_emulated_batch_add_matches_library(backend: EmulatedBackend, n: int):
    seed = random.SystemRandom().randrange(2**32)
    rng = np.random.default_rng(seed)
    points = _points(random.Random(seed), n)
    for mask, got in _emulated_batch_adds(backend, points, rng):
        assert got == point_to_bytes(batch_add(points, mask)), f"seed {seed}"


def _emulated_batch_adds(backend: EmulatedBackend, points: Any,
                         rng: np.random.Generator) -> Iterator[tuple[np.ndarray, bytes]]:
    """(mask, batch_add's bytes) for a random half, all and none of the points, each on a
    poisoned workspace."""
    n = len(points)
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    for mask in (rng.random(n) < 0.5, np.ones(n, bool), np.zeros(n, bool)):
        gpu_msm._workspace(backend).poison()
        yield mask, gpu_msm.batch_add(dev, np.packbits(mask, bitorder="little"))


def test_emulated_fixed_base_matches_library(backend: EmulatedBackend):
    rng = np.random.default_rng(random.SystemRandom().randrange(2**32))
    scalars = srs_gen.random_scalars(12, rng)
    scalars[0] = 0
    scalars[1] = [1, 0, 0, 0]
    got = srs_gen.generate_g1_from_scalars(scalars, backend=backend)
    want = [G1Point() * Scalar(srs_gen.scalar_to_int(row)) for row in scalars]
    assert got == G1Points.from_objects(want)


@pytest.mark.parametrize("window", [2, 16, 20])
def test_emulated_msm_window_sizes_of_large_inputs(backend: EmulatedBackend, window: int):
    """The windows that 2^20..2^24 inputs get (c = 16, 20: digits straddle limbs, deep
    reductions), on a few points."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    n = 40
    points = _points(rng, n)
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    values = [rng.randrange(R_MODULUS) for _ in range(n - 3)] + [1, R_MODULUS - 1, 2**254]
    scalars = _mont(values)
    got = gpu_msm.msm(dev, scalars, window=window)
    assert got == point_to_bytes(msm(points, scalars)), f"c = {window}, seed {seed}"


@pytest.mark.parametrize("window", [3, 8, 13, 16])  # c = 20 on the GPU (tests/test_gpu_msm.py)
def test_emulated_msm_signed_digit_carries(backend: EmulatedBackend, msm_path: str, window: int):
    """Scalars whose digits carry through every window, into the top one, at exactly half
    and one past it, and P with s and 2^c - s (opposite signs in one bucket): a dropped carry
    or a missed negation changes the sum."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    values = carry_scalars(window, rng)
    points = _points(rng, len(values))
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    scalars = _mont(values)
    gpu_msm._workspace(backend).poison()
    backend.launches.clear()
    assert gpu_msm.msm(dev, scalars, window=window) == point_to_bytes(msm(points, scalars)), f"seed {seed}"
    assert ("msm_count_fixed" in backend.launches) == (msm_path == "fixed")
    # One point under all of them: every window's buckets hold P and -P together.
    same = G1Points(np.repeat(points.xy[:1], len(values), axis=0))
    dev = gpu_msm.DevicePoints.from_points(same, backend=backend)
    assert gpu_msm.msm(dev, scalars, window=window) == point_to_bytes(msm(same, scalars)), f"seed {seed}"


# ---------------------------------------------------------------- precomputed window tables (msm_tables.py)


@pytest.mark.parametrize("c", [3, 8])
def test_emulated_window_table_matches_library(backend: EmulatedBackend, c: int):
    """Row w n + i of the table is 2^(c w) P_i (a point at infinity stays zeros), against the
    library's scalar multiplication by 2^(c w) mod r."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    n = 5
    points = _with_infinity(_points(rng, n), [2])
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    table = msm_tables.build(dev, c)
    windows = gpu_msm.window_count(c)
    assert (table.c, table.windows, table.n, table.group) == (c, windows, n, "g1")
    assert table.data.shape == (windows * n, 24) and table.nbytes == msm_tables.table_bytes(n, c, 24)
    assert table.setup_ms > 0 and table.describe()["bytes"] == windows * n * 96
    rows = gpu_msm.DevicePoints(data=table.data, n=windows * n, backend=backend).to_points()
    objects = [G1Point.from_xy_bytes_unchecked_le(bytes(xy)) if xy.any() else G1Point.identity()
               for xy in points.xy]
    want = [p * Scalar(pow(2, c * w, R_MODULUS)) for w in range(windows) for p in objects]
    assert rows == G1Points.from_objects(want), f"seed {seed}"


def test_emulated_fixed_msm_reuses_its_table(backend: EmulatedBackend, monkeypatch: pytest.MonkeyPatch):
    """With PRECOMPUTED "prepared": bases without a table take the per-window path; once built,
    the table serves every MSM over those bases (no second build) with one bucket set, one
    window sum and the library's result, but not an MSM asking for another window; the cache
    keeps neither the bases nor the table alive."""
    import gc
    import weakref

    monkeypatch.setattr(gpu_msm, "PRECOMPUTED", "prepared")
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    n = 150
    points = _points(rng, n)
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    values = carry_scalars(6, rng) + [rng.randrange(R_MODULUS) for _ in range(n - 14)]
    scalars = _mont(values)
    want = point_to_bytes(msm(points, scalars))
    backend.launches.clear()
    assert gpu_msm.msm(dev, scalars) == want
    assert "msm_count" in backend.launches and "msm_count_fixed" not in backend.launches
    table = msm_tables.TABLES.build(dev, 6)
    assert msm_tables.TABLES.build(dev, 6) is table and msm_tables.TABLES.get(dev) is table
    for _ in range(2):
        backend.launches.clear()
        gpu_msm._workspace(backend).poison()
        sums = gpu_msm.msm_windows(dev, scalars)
        assert sums.rows is not None and sums.rows.shape == (1, 48) and sums.c == 6
        assert sums.combine() == want, f"seed {seed}"
        assert "msm_count_fixed" in backend.launches and "msm_window_table" not in backend.launches
    backend.launches.clear()
    assert gpu_msm.msm(dev, scalars, window=7) == want
    assert "msm_count_fixed" not in backend.launches
    bases, kept = weakref.ref(dev), weakref.ref(table)
    del dev, table
    gc.collect()
    assert bases() is None and kept() is None


def test_fixed_window_rule():
    """The window over a table, as its docstring states it: wider than the per-window rule's
    from 2^16 up (its buckets are reduced once), 19 / 20 / 22 at 2^20 / 2^22 / 2^24; bounds."""
    got = {log2: msm_tables.fixed_window_bits(1 << log2) for log2 in (16, 20, 22, 24)}
    assert (got[20], got[22], got[24]) == (19, 20, 22)
    assert all(got[k] > gpu_msm.window_bits(1 << k) for k in got)
    assert msm_tables.fixed_window_bits(420_000, sets=3) <= msm_tables.fixed_window_bits(420_000)
    with pytest.raises(ValueError, match="m must be positive"):
        msm_tables.fixed_window_bits(0)
    dev = gpu_msm.DevicePoints(data=None, n=1 << 27, backend=None)  # checked before any use
    with pytest.raises(ValueError, match="past the 32-bit entry indexing"):
        msm_tables.build(dev, 16)
    with pytest.raises(ValueError, match="window must be in"):
        msm_tables.build(dev, 25)
    g2 = gpu_msm.DevicePoints(data=None, n=4, backend=None, group=gpu_msm.G2)
    with pytest.raises(ValueError, match="G1 bases only"):
        msm_tables.build(g2, 8)


# ---------------------------------------------------------------- G2 (Fp2 coordinates)

HARNESS_G2 = r"""
#include <cstdio>
#include <cstring>
#include "g2.cuh"
""" + HEX_IO + r"""
static fp2_t parse2(const char* c0, const char* c1) {
    return fp2_make(fp_to_mont(parse(c0)), fp_to_mont(parse(c1)));
}
static void show2(const fp2_t& z) { show(fp_from_mont(z.c0)); show(fp_from_mont(z.c1)); }
static void show_point(const g2_xyzz_t& p) { g2_affine_t a = ec_to_affine(p); show2(a.x); show2(a.y); }
""" + POINT_OPS + r"""

int main() {
    char op[16], v[8][100];
    while (scanf("%15s %99s %99s %99s %99s %99s %99s %99s %99s", op, v[0], v[1], v[2], v[3], v[4], v[5],
                 v[6], v[7]) == 9) {
        fp2_t a = parse2(v[0], v[1]), b = parse2(v[2], v[3]);
        if (!strcmp(op, "mul")) show2(fp2_mul(a, b));
        else if (!strcmp(op, "sqr")) show2(fp2_sqr(a));
        else if (!strcmp(op, "inv")) show2(fp2_inv(a));
        else if (!strcmp(op, "sub")) show2(fp2_sub(a, b));
        else {
            g2_affine_t p, q;
            p.x = a; p.y = b; q.x = parse2(v[4], v[5]); q.y = parse2(v[6], v[7]);
            if (point_op(op, p, q)) return 2;
        }
    }
    return 0;
}
"""


@pytest.fixture(scope="module", params=CURVE_BUILDS)
def harness_g2(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The G2 harness in each build of the curve code's products: Fp2's products are fp_mul_curve's."""
    if CXX is None or CUDA_INCLUDE is None:
        pytest.skip("host C++ compiler or CUDA headers (vector_types.h) not found")
    tmp = tmp_path_factory.mktemp(f"fp2_harness_{request.param}")
    src = tmp / "harness_g2.cpp"
    src.write_text(HARNESS_G2)
    return _compile_host(tmp, "harness_g2", src, shared=False, defines=_curve_defines(str(request.param)))


def _fp2_mul(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return ((a[0] * b[0] - a[1] * b[1]) % P, (a[0] * b[1] + a[1] * b[0]) % P)


def test_fp2_matches_python_ints(harness_g2: Path):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    edges = _fp_edges()
    values = [(rng.choice(edges), rng.choice(edges)) for _ in range(40)] + [
        (rng.randrange(P), rng.randrange(P)) for _ in range(80)]
    values += [(0, 0), (1, 0), (0, 1), (P - 1, P - 1)]
    cases = []
    for a in values:
        b = rng.choice(values)
        norm = (a[0] * a[0] + a[1] * a[1]) % P
        inv = (0, 0) if norm == 0 else (a[0] * pow(norm, -1, P) % P, -a[1] * pow(norm, -1, P) % P)
        cases += [("mul", a, b, _fp2_mul(a, b)), ("sqr", a, (0, 0), _fp2_mul(a, a)), ("inv", a, (0, 0), inv),
                  ("sub", a, b, ((a[0] - b[0]) % P, (a[1] - b[1]) % P))]
    lines = [f"{op} {a[0]:x} {a[1]:x} {b[0]:x} {b[1]:x} 0 0 0 0\n" for op, a, b, _ in cases]
    got = _ask(harness_g2, lines)
    assert len(got) == 2 * len(cases)
    bad = [(op, a, b) for i, (op, a, b, want) in enumerate(cases) if (got[2 * i], got[2 * i + 1]) != want]
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first {bad[:2]}"


def _g2_ints(p: G2Point) -> list[int]:
    raw = bytes(p.to_xy_bytes_le())
    return [int.from_bytes(raw[48 * k : 48 * k + 48], "little") for k in range(4)]


def _random_g2(rng: random.Random) -> G2Point:
    return G2Point() * Scalar(rng.randrange(1, R_MODULUS))


def test_g2_ops_match_library(harness_g2: Path):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    inf = G2Point.identity()
    cases: list[tuple[str, G2Point, G2Point, G2Point]] = []
    for _ in range(8):
        cases += _point_op_cases(_random_g2(rng), _random_g2(rng), inf)
    lines = [f"g_{op} " + " ".join(f"{v:x}" for v in _g2_ints(p) + _g2_ints(q)) + "\n"
             for op, p, q, _ in cases]
    got = _ask(harness_g2, lines)
    assert len(got) == 4 * len(cases)
    bad = [op for i, (op, _, _, want) in enumerate(cases) if got[4 * i : 4 * i + 4] != _g2_ints(want)]
    assert not bad, f"seed {seed}: mismatches in {bad[:5]}"


def _g2_points(rng: random.Random, n: int) -> G2Points:
    return G2Points.from_objects([_random_g2(rng) for _ in range(n)])


@pytest.mark.parametrize("case", ["random", "zero", "r_minus_1", "indices", "cancel", "window_2"])
def test_emulated_g2_msm_matches_library(backend: EmulatedBackend, msm_path: str, case: str):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    n = 37
    points = _g2_points(rng, n)
    values = [rng.randrange(R_MODULUS) for _ in range(n)]
    indices, window = None, None
    if case == "zero":
        values = [0] * n
    elif case == "r_minus_1":
        values = [R_MODULUS - 1] * n
    elif case == "indices":
        indices = np.array(sorted(rng.sample(range(n), 11)), dtype=np.int64)
        values = values[:11]
    elif case == "cancel":
        values = [values[0], R_MODULUS - values[0]] * (n // 2) + [0]
        points = G2Points(np.repeat(points.xy[:1], n, axis=0))
    elif case == "window_2":
        window = 2
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    assert dev.group is gpu_msm.G2
    scalars = _mont(values)
    gpu_msm._workspace(backend).poison()
    got = gpu_msm.msm(dev, scalars, indices, window=window)
    assert len(got) == 192
    assert got == point_to_bytes(msm(points, scalars, indices)), f"{case}, seed {seed}"
    assert dev.to_points() == points


@pytest.mark.parametrize("n", [1, 70, 300])
def test_emulated_g2_batch_add_matches_library(backend: EmulatedBackend, n: int):
    seed = random.SystemRandom().randrange(2**32)
    rng = np.random.default_rng(seed)
    points = _g2_points(random.Random(seed), n)
    for mask, got in _emulated_batch_adds(backend, points, rng):
        assert got == point_to_bytes(batch_add(points, mask)), f"seed {seed}"
        assert gpu_msm.to_library_point(got) == batch_add(points, mask)


@pytest.mark.parametrize(("size", "m"), [(37, 20), (64, 64), (5, 1)])
def test_emulated_msm_over_point_sets_matches_one_msm_per_set(backend: EmulatedBackend, msm_path: str,
                                                               size: int, m: int):
    """The G1 queries' tails: one sort, each kernel once over three joined tables."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    sets = [_points(rng, size) for _ in range(3)]
    joined = gpu_msm.concat([gpu_msm.DevicePoints.from_points(p, backend=backend) for p in sets])
    values = [0, 1, R_MODULUS - 1, *(rng.randrange(R_MODULUS) for _ in range(m))][:m]
    scalars = _mont(values)
    indices = np.array(sorted(rng.sample(range(size), m)), dtype=np.int64)
    gpu_msm._workspace(backend).poison()
    got = [s.combine() for s in gpu_msm.msm_windows_sets(joined, 3, scalars, indices)]
    want = [point_to_bytes(msm(p, scalars, indices)) for p in sets]
    assert got == want, f"seed {seed}"
    views = gpu_msm.views(joined, 3)
    assert [gpu_msm.msm(v, scalars, indices) for v in views] == want, f"seed {seed}"
    assert [v.to_points() for v in views] == sets


def test_emulated_msm_over_point_sets_of_zero_scalars_is_the_identity(backend: EmulatedBackend):
    rng = random.Random(3)
    joined = gpu_msm.concat([gpu_msm.DevicePoints.from_points(_points(rng, 8), backend=backend)
                             for _ in range(2)])
    got = gpu_msm.msm_windows_sets(joined, 2, _mont([0] * 8))
    assert [s.combine() for s in got] == [gpu_msm.IDENTITY_BYTES] * 2


@pytest.mark.parametrize("size", [64, 256, 48, 9])  # joined passes; the per-set fallback
def test_emulated_batch_add_over_point_sets_matches_one_per_set(backend: EmulatedBackend, size: int):
    seed = random.SystemRandom().randrange(2**32)
    rng = np.random.default_rng(seed)
    sets = [_points(random.Random(seed + k), size) for k in range(3)]
    joined = gpu_msm.concat([gpu_msm.DevicePoints.from_points(p, backend=backend) for p in sets])
    for mask in (rng.random(size) < 0.5, np.ones(size, bool), np.zeros(size, bool)):
        bitmap = np.packbits(mask, bitorder="little")
        gpu_msm._workspace(backend).poison()
        got = gpu_msm.batch_add_sets(joined, 3, bitmap)
        assert got == [point_to_bytes(batch_add(p, mask)) for p in sets], f"seed {seed}"


def test_point_sets_are_checked(backend: EmulatedBackend):
    rng = random.Random(4)
    a = gpu_msm.DevicePoints.from_points(_points(rng, 4), backend=backend)
    b = gpu_msm.DevicePoints.from_points(_points(rng, 5), backend=backend)
    with pytest.raises(ValueError, match="share group, backend and size"):
        gpu_msm.concat([a, b])
    joined = gpu_msm.concat([a, a])
    with pytest.raises(ValueError, match="do not split into 3 sets"):
        gpu_msm.msm_windows_sets(joined, 3, _mont([1] * 4))
    with pytest.raises(IndexError, match="out of range for 4 points"):
        gpu_msm.msm_windows_sets(joined, 2, _mont([1]), np.array([4], np.int64))
    with pytest.raises(ValueError, match="bitmap must be uint8 of 1 bytes"):
        gpu_msm.batch_add_sets(joined, 2, np.zeros(2, np.uint8))


# ---------------------------------------------------------------- affine rounds (batch_affine.cuh)

# Shapes that make the rounds run on a few points: many threads of two to four outputs, and
# fewer threads than chunks, so that each loops (the grid-stride and chunk loops both run);
# the first with the batched inversion, the second with the binary one.
ROUND_SHAPES = {"many_threads": (2, 4, 4, 1 << 10, "batched"), "looping": (2, 3, 2, 3, "binary")}


@pytest.fixture(params=sorted(ROUND_SHAPES))
def forced_rounds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    k_min, k_max, target, most, inversion = ROUND_SHAPES[request.param]
    for name, value in (("MIN_PAIRS", 1), ("MIN_FRACTION", 0.0), ("MIN_PAIRS_G2", 1),
                        ("MIN_FRACTION_G2", 0.0), ("K_MIN", k_min), ("K_MAX", k_max),
                        ("TARGET_THREADS", target), ("MAX_THREADS", most), ("INVERSION", inversion)):
        monkeypatch.setattr(affine_rounds, name, value)
    return str(request.param)


def _rounds_ran(backend: EmulatedBackend) -> int:
    return sum(1 for k in backend.launches if k.startswith("affine_round"))


def _with_infinity(points: Any, at: list[int]) -> Any:
    xy = np.array(points.xy)
    xy[at] = 0
    return type(points)(xy)


@pytest.mark.parametrize("case", ["random", "one", "r_minus_1", "repeated", "cancel", "infinity", "indices"])
def test_emulated_msm_with_affine_rounds(backend: EmulatedBackend, msm_path: str, forced_rounds: str,
                                         case: str):
    """Every bucket halved in affine rounds down to one point: P + P (equal points in one
    bucket), P + (-P) (s and r - s), points at infinity, one bucket holding every point."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    n = 61
    points = _points(rng, n)
    values = [rng.randrange(R_MODULUS) for _ in range(n)]
    indices = None
    if case == "one":
        values = [1] * n
    elif case == "r_minus_1":
        values = [R_MODULUS - 1] * n
    elif case == "repeated":
        points = G1Points(np.repeat(points.xy[3:4], n, axis=0))
        values = [rng.choice([5, 7, 2**200 + 5]) for _ in range(n)]
    elif case == "cancel":
        values = [values[0], R_MODULUS - values[0]] * (n // 2) + [values[0]]
        points = G1Points(np.repeat(points.xy[:1], n, axis=0))
    elif case == "infinity":
        points = _with_infinity(points, [0, 5, 6, 7, n - 1])
        values = [rng.choice([3, 2**100 + 3]) for _ in range(n)]
    elif case == "indices":
        indices = np.array([rng.randrange(n) for _ in range(150)], dtype=np.int64)
        values = [rng.choice([1, 9, R_MODULUS - 9]) for _ in range(150)]
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    scalars = _mont(values)
    gpu_msm._workspace(backend).poison()
    before = _rounds_ran(backend)
    got = gpu_msm.msm(dev, scalars, indices, window=4)
    assert _rounds_ran(backend) > before
    assert got == point_to_bytes(msm(points, scalars, indices)), f"{case}, {forced_rounds}, seed {seed}"


@pytest.mark.parametrize("case", ["half", "all", "repeated", "cancel", "infinity", "one"])
def test_emulated_batch_add_with_affine_rounds(backend: EmulatedBackend, forced_rounds: str, case: str):
    """Compaction, then rounds over all selected points."""
    seed = random.SystemRandom().randrange(2**32)
    rng = np.random.default_rng(seed)
    n = 83
    points = _points(random.Random(seed), n)
    mask = rng.random(n) < 0.5
    if case == "all":
        mask[:] = True
    elif case == "repeated":
        points, mask[:] = G1Points(np.repeat(points.xy[:1], n, axis=0)), True
    elif case == "cancel":  # P, -P, P, -P, ...: every first-round pair cancels
        neg = point_to_bytes(-G1Point.from_xy_bytes_unchecked_le(bytes(points.xy[0])))
        xy = np.array(points.xy)
        xy[1::2] = np.frombuffer(neg, np.uint8)
        xy[0::2] = points.xy[0]
        points, mask[:] = G1Points(xy), True
    elif case == "infinity":
        points = _with_infinity(points, [0, 1, 2, 10, n - 1])
        mask[[0, 1, 2, 10, n - 1]] = True
    elif case == "one":
        mask[:] = False
        mask[17] = True
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    gpu_msm._workspace(backend).poison()
    before = _rounds_ran(backend)
    got = gpu_msm.batch_add(dev, np.packbits(mask, bitorder="little"))
    assert (_rounds_ran(backend) > before) == (mask.sum() > 1)
    assert got == point_to_bytes(batch_add(points, mask)), f"{case}, {forced_rounds}, seed {seed}"


def test_emulated_affine_rounds_over_sets_and_g2(backend: EmulatedBackend, forced_rounds: str):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    size = 29
    sets = [_points(rng, size) for _ in range(3)]
    joined = gpu_msm.concat([gpu_msm.DevicePoints.from_points(p, backend=backend) for p in sets])
    values = [rng.choice([0, 1, 6, R_MODULUS - 1, rng.randrange(R_MODULUS)]) for _ in range(size)]
    scalars = _mont(values)
    mask = np.random.default_rng(seed).random(size) < 0.6
    bitmap = np.packbits(mask, bitorder="little")
    gpu_msm._workspace(backend).poison()
    got = [s.combine() for s in gpu_msm.msm_windows_sets(joined, 3, scalars, window=3)]
    assert got == [point_to_bytes(msm(p, scalars)) for p in sets], f"seed {seed}"
    assert gpu_msm.batch_add_sets(joined, 3, bitmap) == [point_to_bytes(batch_add(p, mask)) for p in sets]
    g2 = _with_infinity(_g2_points(rng, 23), [4])
    dev = gpu_msm.DevicePoints.from_points(g2, backend=backend)
    g2_scalars = _mont([rng.choice([2, 3, R_MODULUS - 2]) for _ in range(23)])
    assert gpu_msm.msm(dev, g2_scalars, window=3) == point_to_bytes(msm(g2, g2_scalars)), f"seed {seed}"
    g2_mask = np.ones(23, bool)
    assert gpu_msm.batch_add(dev, np.packbits(g2_mask, bitorder="little")) == point_to_bytes(
        batch_add(g2, g2_mask)), f"seed {seed}"


# The rounds' build options (affine_rounds.PRODUCTS, SQUARE) other than the default (rolled
# products, which every other test runs), each launched from kernels/affine_round.cu built
# with its defines: between them every option's code runs (the unrolled inlined product, the
# called product and the squaring through it, the dedicated squaring under each).
ROUND_BUILDS = {"inline": ("inline", "product"), "called": ("called", "product"),
                "called_sqr": ("called", "dedicated"), "rolled_sqr": ("rolled", "dedicated"),
                "sqr": ("inline", "dedicated")}


@pytest.mark.parametrize("build", sorted(ROUND_BUILDS))
def test_emulated_round_builds(backend: EmulatedBackend, monkeypatch: pytest.MonkeyPatch, build: str):
    """Each build against the library, on the MSM's and batch addition's special sums (P + P,
    P + (-P), infinity) in G1 and G2, all rounds down to one point."""
    products, square = ROUND_BUILDS[build]
    for name, value in (("MIN_PAIRS", 1), ("MIN_FRACTION", 0.0), ("MIN_PAIRS_G2", 1),
                        ("MIN_FRACTION_G2", 0.0), ("K_MIN", 2), ("K_MAX", 4), ("TARGET_THREADS", 4),
                        ("PRODUCTS", products), ("SQUARE", square)):
        monkeypatch.setattr(affine_rounds, name, value)
    module = affine_rounds.round_module("msm")
    assert module.startswith("affine_round+")
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    n = 41
    points = _with_infinity(_points(rng, n), [3, 9])
    xy = np.array(points.xy)
    xy[20:30] = xy[19]  # equal points: doublings inside a batch
    points = G1Points(xy)
    values = [rng.choice([5, 7, R_MODULUS - 5, rng.randrange(R_MODULUS)]) for _ in range(n)]
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    scalars = _mont(values)
    mask = np.random.default_rng(seed).random(n) < 0.7
    mask[19:30] = True
    backend.modules.clear()
    backend.launches.clear()
    gpu_msm._workspace(backend).poison()
    where = f"{build}, seed {seed}"
    assert gpu_msm.msm(dev, scalars, window=3) == point_to_bytes(msm(points, scalars)), where
    assert gpu_msm.batch_add(dev, np.packbits(mask, bitorder="little")) == point_to_bytes(
        batch_add(points, mask)), where
    g2 = _with_infinity(_g2_points(rng, 19), [4])
    g2_dev = gpu_msm.DevicePoints.from_points(g2, backend=backend)
    g2_scalars = _mont([rng.choice([2, 3, R_MODULUS - 2]) for _ in range(19)])
    assert gpu_msm.msm(g2_dev, g2_scalars, window=3) == point_to_bytes(msm(g2, g2_scalars)), where
    every = np.packbits(np.ones(19, bool), bitorder="little")
    assert gpu_msm.batch_add(g2_dev, every) == point_to_bytes(batch_add(g2, np.ones(19, bool)))
    launched = zip(backend.modules, backend.launches, strict=True)
    assert {m for m, k in launched if k.startswith("affine_round")} == {module}


# ---------------------------------------------------------------- the curve code's products (XYZZ_PRODUCTS)

def _curve_cases(backend: EmulatedBackend, seed: int) -> list[tuple[str, Any, bytes]]:
    """(what, the call, the library's sum): MSMs and batch additions over G1 and G2 with the
    special sums (equal points in a bucket, P + (-P), infinity), and an MSM over point sets."""
    rng = random.Random(seed)
    n = 41
    xy = np.array(_with_infinity(_points(rng, n), [3, 9]).xy)
    xy[20:31] = xy[19]  # equal points under equal scalars: doublings in the XYZZ sums
    xy[31] = np.frombuffer(point_to_bytes(-G1Point.from_xy_bytes_unchecked_le(bytes(xy[19]))), np.uint8)
    points = G1Points(xy)
    values = [rng.choice([5, 7, R_MODULUS - 5, rng.randrange(R_MODULUS)]) for _ in range(n)]
    values[19:32] = [7] * 13  # 19 .. 30 equal, 31 their negation
    scalars = _mont(values)
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    mask = np.random.default_rng(seed).random(n) < 0.7
    mask[19:32] = True
    g2_xy = np.array(_with_infinity(_g2_points(rng, 19), [4]).xy)
    g2_xy[10:14] = g2_xy[9]
    g2 = G2Points(g2_xy)
    g2_dev = gpu_msm.DevicePoints.from_points(g2, backend=backend)
    g2_scalars = _mont([3 if 9 <= i < 14 else rng.choice([2, 3, R_MODULUS - 2]) for i in range(19)])
    every = np.ones(19, bool)
    joined = gpu_msm.concat([dev, dev])
    return [
        ("g1 msm c=3", lambda: gpu_msm.msm(dev, scalars, window=3), point_to_bytes(msm(points, scalars))),
        ("g1 msm c=8", lambda: gpu_msm.msm(dev, scalars, window=8), point_to_bytes(msm(points, scalars))),
        ("g1 batch_add", lambda: gpu_msm.batch_add(dev, np.packbits(mask, bitorder="little")),
         point_to_bytes(batch_add(points, mask))),
        ("g2 msm", lambda: gpu_msm.msm(g2_dev, g2_scalars, window=3), point_to_bytes(msm(g2, g2_scalars))),
        ("g2 batch_add", lambda: gpu_msm.batch_add(g2_dev, np.packbits(every, bitorder="little")),
         point_to_bytes(batch_add(g2, every))),
        ("g1 sets", lambda: [s.combine() for s in gpu_msm.msm_windows_sets(joined, 2, scalars, window=4)][1],
         point_to_bytes(msm(points, scalars))),
    ]


@pytest.mark.parametrize("rounds", [False, True], ids=["xyzz", "rounds"])
def test_emulated_rolled_curve_products_match_the_default(backend: EmulatedBackend,
                                                          monkeypatch: pytest.MonkeyPatch, rounds: bool):
    """XYZZ_PRODUCTS = "rolled" (the default: msm.cu and batch_add.cu built with
    EC_PRODUCTS_ROLLED): the inline build's sums and the library's, in XYZZ alone or with every
    bucket and selection halved in affine rounds first, each build's kernels launched from its own modules."""
    if rounds:
        for name, value in (("MIN_PAIRS", 1), ("MIN_FRACTION", 0.0), ("MIN_PAIRS_G2", 1),
                            ("MIN_FRACTION_G2", 0.0), ("K_MIN", 2), ("K_MAX", 4), ("TARGET_THREADS", 4)):
            monkeypatch.setattr(affine_rounds, name, value)
    seed = random.SystemRandom().randrange(2**32)
    cases = _curve_cases(backend, seed)
    got = {}
    for build in CURVE_BUILDS:
        monkeypatch.setattr(affine_rounds, "XYZZ_PRODUCTS", build)
        backend.modules.clear()
        backend.launches.clear()
        gpu_msm._workspace(backend).poison()
        got[build] = [call() for _, call, _ in cases]
        want = {affine_rounds.curve_module(m) for m in ("msm", "batch_add")}
        assert set(backend.modules) == want, f"{build}: {set(backend.modules)}"
        assert (_rounds_ran(backend) > 0) == rounds
    assert "EC_PRODUCTS_ROLLED" in affine_rounds.curve_module("msm")
    bad = [what for (what, _, want), a, b in zip(cases, got["inline"], got["rolled"], strict=True)
           if not a == b == want]
    assert not bad, f"seed {seed}: {bad}"


def test_an_unknown_curve_build_is_refused(backend: EmulatedBackend, monkeypatch: pytest.MonkeyPatch):
    """One ValueError naming the switch and its values, before any launch."""
    dev = gpu_msm.DevicePoints.from_points(_points(random.Random(5), 4), backend=backend)
    monkeypatch.setattr(affine_rounds, "XYZZ_PRODUCTS", "unrolled")
    message = r"^XYZZ_PRODUCTS must be one of \['inline', 'rolled'\], got 'unrolled'$"
    with pytest.raises(ValueError, match=message):
        gpu_msm.msm(dev, _mont([1, 2, 3, 4]), window=3)
    with pytest.raises(ValueError, match=message):
        gpu_msm.batch_add(dev, np.packbits(np.ones(4, bool), bitorder="little"))


# ---------------------------------------------------------------- the hybrid batch addition (batch_add.cu)

# (words a slice, threads): one-word slices with two threads looping over them; the default
# four words with one thread for every slice.
HYBRID_SHAPES = {"one_word": (1, 2), "default_words": (4, 1 << 16)}


@pytest.fixture(params=sorted(HYBRID_SHAPES))
def hybrid_shape(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    words, threads = HYBRID_SHAPES[request.param]
    for name, value in (("BATCH_ADD", "hybrid"), ("HYBRID_WORDS", words), ("HYBRID_THREADS", threads)):
        monkeypatch.setattr(affine_rounds, name, value)
    return str(request.param)


def _hybrid_mask(case: str, n: int, rng: np.random.Generator) -> np.ndarray:
    mask = rng.random(n) < 0.5
    if case in ("all", "repeated", "cancel"):
        mask[:] = True
    elif case == "one":
        mask[:] = False
        mask[n - 2] = True
    elif case == "none":
        mask[:] = False
    elif case == "odd":  # odd counts in the slices and their rounds
        mask[:] = False
        mask[::3] = True
    elif case == "sparse":  # slices of 0, 1, 2 and 3 points: the rounds stop early
        mask[:] = False
        mask[[5, 70, 71, 130, 140, 150, 199]] = True
    return mask


@pytest.mark.parametrize("case", ["half", "all", "odd", "sparse", "repeated", "cancel", "infinity", "one",
                                  "none"])
def test_emulated_batch_add_hybrid(backend: EmulatedBackend, hybrid_shape: str, case: str):
    """Two rounds inside each thread and the rest in XYZZ: P + P (one repeated point: doublings
    in both rounds), P + (-P) (P, -P alternating: round 0's sums are infinity, then sums of
    infinities), points at infinity in the table, odd counts, slices the rounds leave early, one
    and no point selected. A wrong shared inversion or a point left behind changes the sum."""
    seed = random.SystemRandom().randrange(2**32)
    rng = np.random.default_rng(seed)
    n = 200
    points = _points(random.Random(seed), n)
    if case == "repeated":
        points = G1Points(np.repeat(points.xy[:1], n, axis=0))
    elif case == "cancel":
        neg = point_to_bytes(-G1Point.from_xy_bytes_unchecked_le(bytes(points.xy[0])))
        xy = np.array(points.xy)
        xy[1::2] = np.frombuffer(neg, np.uint8)
        xy[0::2] = points.xy[0]
        xy[-1] = points.xy[5]  # one survivor
        points = G1Points(xy)
    elif case == "infinity":
        points = _with_infinity(points, [0, 1, 2, 63, 64, 65, 130, n - 1])
    mask = _hybrid_mask(case, n, rng)
    if case == "infinity":
        mask[[0, 1, 2, 63, 64, 65, 130, n - 1]] = True
    dev = gpu_msm.DevicePoints.from_points(points, backend=backend)
    gpu_msm._workspace(backend).poison()
    backend.launches.clear()
    got = gpu_msm.batch_add(dev, np.packbits(mask, bitorder="little"))
    assert "batch_add_slices" in backend.launches
    assert got == point_to_bytes(batch_add(points, mask)), f"{case}, {hybrid_shape}, seed {seed}"


def test_emulated_batch_add_hybrid_over_sets_and_g2(backend: EmulatedBackend, hybrid_shape: str):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    size = 150
    sets = [_points(rng, size) for _ in range(3)]
    joined = gpu_msm.concat([gpu_msm.DevicePoints.from_points(p, backend=backend) for p in sets])
    mask = np.random.default_rng(seed).random(size) < 0.6
    gpu_msm._workspace(backend).poison()
    got = gpu_msm.batch_add_sets(joined, 3, np.packbits(mask, bitorder="little"))
    assert got == [point_to_bytes(batch_add(p, mask)) for p in sets], f"{hybrid_shape}, seed {seed}"
    g2 = _with_infinity(_g2_points(rng, 70), [4, 5])
    dev = gpu_msm.DevicePoints.from_points(g2, backend=backend)
    for g2_mask in (np.ones(70, bool), np.random.default_rng(seed).random(70) < 0.5):
        gpu_msm._workspace(backend).poison()
        assert gpu_msm.batch_add(dev, np.packbits(g2_mask, bitorder="little")) == point_to_bytes(
            batch_add(g2, g2_mask)), f"{hybrid_shape}, seed {seed}"


def test_emulated_batch_add_hybrid_full_slices(backend: EmulatedBackend, monkeypatch: pytest.MonkeyPatch):
    """1500 points in slices of 256 bits, all set: round 0 pairs 128 a slice, 64 points left each."""
    monkeypatch.setattr(affine_rounds, "BATCH_ADD", "hybrid")
    monkeypatch.setattr(affine_rounds, "HYBRID_THREADS", 3)  # fewer threads than the six slices
    seed = random.SystemRandom().randrange(2**32)
    rng = np.random.default_rng(seed)
    points = _points(random.Random(seed), 1500)
    for mask, got in _emulated_batch_adds(backend, points, rng):
        assert got == point_to_bytes(batch_add(points, mask)), f"seed {seed}"
