"""The G1 kernels on the GPU against Python integers and the independent curve library.
Run on a machine with a CUDA device: python -m pytest -m gpu tests/test_gpu_msm.py

Every test draws fresh random inputs (the seed is printed, so a failure can be replayed with
SEED=... in the environment) and fills device outputs and scratch with 0xFF bytes before
each run (not a valid field element or point), so an element nobody wrote cannot pass."""

from __future__ import annotations

import os
import random
import secrets
from pathlib import Path

import numpy as np
import pytest
from conftest import require_cuda_device
from digit_cases import carry_scalars

cupy = require_cuda_device()

from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from workbench.gpu import msm as gpu_msm
from workbench.gpu import msm_tables, srs_gen
from workbench.prover.curve import R_MODULUS, G1Points, G2Points, batch_add, msm, point_to_bytes

pytestmark = pytest.mark.gpu

P = gpu_msm.P_MODULUS
R384, R384_INV = (1 << 384) % P, pow(1 << 384, -1, P)
MONT_R256 = (1 << 256) % R_MODULUS
KERNELS = Path(__file__).resolve().parents[1] / "kernels"


@pytest.fixture
def rng() -> random.Random:
    seed = int(os.environ.get("SEED", secrets.randbits(63)))
    print(f"SEED={seed}")
    return random.Random(seed)


# ---------------------------------------------------------------- helpers

def _fp_limbs(values: list[int]) -> np.ndarray:
    raw = b"".join(v.to_bytes(48, "little") for v in values)
    return np.frombuffer(raw, dtype="<u4").astype(np.uint32).reshape(len(values), 12)


def _fp_ints(limbs: np.ndarray) -> list[int]:
    raw = np.ascontiguousarray(limbs).astype("<u4").tobytes()
    return [int.from_bytes(raw[i : i + 48], "little") for i in range(0, len(raw), 48)]


def _mont_scalars(values: list[int]) -> np.ndarray:
    raw = b"".join((v * MONT_R256 % R_MODULUS).to_bytes(32, "little") for v in values)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(len(values), 4)


def _points(rng: random.Random, n: int) -> G1Points:
    """n distinct random points at one library addition each: B_j + C_k over a grid."""
    side = max(1, int(n**0.5) + 1)
    rows = [G1Point() * Scalar(rng.randrange(1, R_MODULUS)) for _ in range(side)]
    cols = [G1Point() * Scalar(rng.randrange(1, R_MODULUS)) for _ in range(side)]
    return G1Points.from_objects([rows[i // side] + cols[i % side] for i in range(n)])


def _poison() -> None:
    gpu_msm._workspace(gpu_msm.default_backend()).poison()
    cupy.cuda.Device().synchronize()  # the fills run on the current stream, a test's MSM maybe on another


def _device_msm(points: G1Points, scalars: np.ndarray, indices: np.ndarray | None = None) -> bytes:
    dev = gpu_msm.DevicePoints.from_points(points)
    _poison()
    return gpu_msm.msm(dev, scalars, indices)


# ---------------------------------------------------------------- field arithmetic

FP_TEST_KERNEL = r"""
extern "C" __global__ void fp_ops(const uint4* a, const uint4* b, uint4* out, unsigned long long n)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const fp_t x = fp_load(a, i), y = fp_load(b, i);
        fp_store(out, 6 * i, fp_add(x, y));
        fp_store(out, 6 * i + 1, fp_sub(x, y));
        fp_store(out, 6 * i + 2, fp_mul(x, y));
        fp_store(out, 6 * i + 3, fp_inv(x));
        fp_store(out, 6 * i + 4, fp_to_mont(x));
        fp_store(out, 6 * i + 5, fp_from_mont(x));
    }
}
"""


def test_fp_arithmetic_matches_python_ints(rng: random.Random):
    module = cupy.RawModule(code=(KERNELS / "fp.cuh").read_text() + FP_TEST_KERNEL, options=("-std=c++17",))
    edges = [0, 1, 2, P - 1, P - 2, R384, (P - 1) // 2, (P + 1) // 2, 2**32 - 1, 2**64 - 1, 2**380, P - 2**32]
    xs = edges + [rng.randrange(P) for _ in range(4000)]
    ys = [rng.choice(xs) for _ in xs]
    n = len(xs)
    out = cupy.full((6 * n, 12), 0xFFFFFFFF, dtype=cupy.uint32)
    module.get_function("fp_ops")((64,), (128,), (cupy.asarray(_fp_limbs(xs)), cupy.asarray(_fp_limbs(ys)),
                                                  out, np.uint64(n)))
    got = _fp_ints(out.get())
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        inv = 0 if x == 0 else pow(x * R384_INV % P, -1, P) * R384 % P
        want = [(x + y) % P, (x - y) % P, x * y * R384_INV % P, inv, x * R384 % P, x * R384_INV % P]
        assert got[6 * i : 6 * i + 6] == want, f"x={x:#x} y={y:#x}"


# ---------------------------------------------------------------- MSM

@pytest.mark.parametrize("log2", [10, 12, 14, 16])
def test_msm_matches_library(rng: random.Random, log2: int):
    n = 1 << log2
    points = _points(rng, n)
    scalars = _mont_scalars([rng.randrange(R_MODULUS) for _ in range(n)])
    assert _device_msm(points, scalars) == point_to_bytes(msm(points, scalars))


def test_msm_device_scalars_on_a_stream(rng: random.Random):
    n = 5000
    points = _points(rng, n)
    scalars = _mont_scalars([rng.randrange(R_MODULUS) for _ in range(n)])
    stream = cupy.cuda.Stream(non_blocking=True)
    dev = gpu_msm.DevicePoints.from_points(points, stream=stream)
    with stream:
        scalars_dev = cupy.asarray(scalars)
    _poison()
    got = gpu_msm.msm(dev, scalars_dev, stream=stream)
    again = gpu_msm.msm(dev, scalars_dev, stream=stream)  # the reused scratch gives the same result
    want = point_to_bytes(msm(points, scalars))
    assert got == want and again == want


@pytest.mark.parametrize("case", ["zero", "one", "r_minus_1", "repeated", "cancel", "single", "odd_size",
                                  "indices", "small"])
def test_msm_edge_cases(rng: random.Random, msm_path: str, case: str):
    n = 3001
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
        points = G1Points(np.repeat(points.xy[:3], [1000, 1000, 1001], axis=0))
    elif case == "cancel":  # P with s and again with r - s: the sum is infinity
        values = [values[0], R_MODULUS - values[0]] * (n // 2) + [0]
        points = G1Points(np.repeat(points.xy[:1], n, axis=0))
    elif case == "single":
        points, values = points.take(np.array([7])), values[:1]
    elif case == "odd_size":
        points, values = points.take(np.arange(777)), values[:777]
    elif case == "indices":  # a tail MSM: a subset of the points, in order
        indices = np.array(sorted(rng.sample(range(n), 1234)), dtype=np.int64)
        values = values[:1234]
    elif case == "small":
        values = [rng.randrange(0, 5) for _ in range(n)]
    scalars = _mont_scalars(values)
    got = _device_msm(points, scalars, indices)
    assert got == point_to_bytes(msm(points, scalars, indices))
    if case in ("zero", "cancel"):
        assert got == gpu_msm.IDENTITY_BYTES


def test_msm_one_bucket_holds_every_point(rng: random.Random, msm_path: str):
    """All scalars 1 at 2^16: every point lands in one bucket, which is cut between threads."""
    n = 1 << 16
    points = _points(rng, n)
    scalars = _mont_scalars([1] * n)
    assert _device_msm(points, scalars) == point_to_bytes(batch_add(points, np.ones(n, bool)))


# ---------------------------------------------------------------- batch add

@pytest.mark.parametrize("log2", [10, 13, 16])
def test_batch_add_matches_library(rng: random.Random, log2: int):
    n = (1 << log2) + 3  # not a multiple of 8 or of the chunk
    points = _points(rng, n)
    dev = gpu_msm.DevicePoints.from_points(points)
    nprng = np.random.default_rng(rng.randrange(2**32))
    for mask in (nprng.random(n) < 0.5, np.ones(n, bool), np.zeros(n, bool), nprng.random(n) < 0.01):
        bitmap = np.packbits(mask, bitorder="little")
        _poison()
        assert gpu_msm.batch_add(dev, cupy.asarray(bitmap)) == point_to_bytes(batch_add(points, mask))


@pytest.mark.parametrize("log2", [12, 15])
def test_msm_and_batch_add_over_point_sets_match_one_per_set(rng: random.Random, msm_path: str,
                                                            log2: int):
    """The G1 queries' path: three tables joined, one sort and each kernel once for all three
    (a tenth of the scalars, as a 0.9 boolean witness leaves for the tails)."""
    n = 1 << log2
    sets = [_points(rng, n) for _ in range(3)]
    joined = gpu_msm.concat([gpu_msm.DevicePoints.from_points(p) for p in sets])
    nprng = np.random.default_rng(rng.randrange(2**32))
    indices = np.flatnonzero(nprng.random(n) < 0.1).astype(np.int64)
    scalars = _mont_scalars([rng.randrange(R_MODULUS) for _ in range(len(indices))])
    _poison()
    sums = gpu_msm.msm_windows_sets(joined, 3, cupy.asarray(scalars), cupy.asarray(indices))
    got = [s.combine() for s in sums]
    assert got == [point_to_bytes(msm(p, scalars, indices)) for p in sets]
    for mask in (nprng.random(n) < 0.45, np.ones(n, bool)):
        _poison()
        bitmap = cupy.asarray(np.packbits(mask, bitorder="little"))
        assert gpu_msm.batch_add_sets(joined, 3, bitmap) == [point_to_bytes(batch_add(p, mask)) for p in sets]


def test_batch_add_cancelling_points(rng: random.Random):
    p = G1Point() * Scalar(rng.randrange(1, R_MODULUS))
    points = G1Points.from_objects([p, -p] * 500 + [p])
    dev = gpu_msm.DevicePoints.from_points(points)
    mask = np.ones(len(points), bool)
    _poison()
    assert gpu_msm.batch_add(dev, np.packbits(mask, bitorder="little")) == point_to_bytes(p)
    mask[-1] = False
    assert gpu_msm.batch_add(dev, np.packbits(mask, bitorder="little")) == gpu_msm.IDENTITY_BYTES


# ---------------------------------------------------------------- SRS generation

def test_srs_generation_matches_library(rng: random.Random):
    scalars = srs_gen.random_scalars(300, np.random.default_rng(rng.randrange(2**32)))
    scalars[0] = [1, 0, 0, 0]
    got = srs_gen.generate_g1_from_scalars(scalars)
    want = G1Points.from_objects([G1Point() * Scalar(srs_gen.scalar_to_int(row)) for row in scalars])
    assert got == want
    on_device = srs_gen.device_points_from_scalars(scalars)
    assert on_device.to_points() == want
    upload = gpu_msm.DevicePoints.from_points(want)
    assert cupy.array_equal(on_device.data, upload.data)


@pytest.mark.parametrize("window", [16, 20])
def test_msm_with_the_windows_of_large_sizes(rng: random.Random, window: int):
    """c = 16 and 20 are what 2^20..2^24 inputs get; check them on a testable size."""
    n = 4096
    points = _points(rng, n)
    scalars = _mont_scalars([rng.randrange(R_MODULUS) for _ in range(n)])
    dev = gpu_msm.DevicePoints.from_points(points)
    _poison()
    assert gpu_msm.msm(dev, scalars, window=window) == point_to_bytes(msm(points, scalars))


@pytest.mark.parametrize("window", [13, 16, 20])
def test_msm_signed_digit_carries(rng: random.Random, msm_path: str, window: int):
    """Scalars whose signed digits carry through every window and into the top one, sit at
    half a window and one past it, or put P and -P in one bucket (tests/digit_cases.py),
    among random ones, on the windows the tails, 2^20..2^22 and 2^24 get: a dropped carry or
    a missed negation changes the sum."""
    cases = carry_scalars(window, rng)
    n = 2048
    values = [rng.choice(cases) if rng.random() < 0.5 else rng.randrange(R_MODULUS) for _ in range(n)]
    points = _points(rng, n)
    scalars = _mont_scalars(values)
    dev = gpu_msm.DevicePoints.from_points(points)
    _poison()
    assert gpu_msm.msm(dev, scalars, window=window) == point_to_bytes(msm(points, scalars))


# ---------------------------------------------------------------- precomputed window tables


def test_fixed_msm_matches_the_default_path(rng: random.Random, monkeypatch: pytest.MonkeyPatch):
    """The MSM over precomputed window multiples against the default path where the rounds run
    deep (2^20 uniform scalars, the rule's window 19), the table's rows against the library,
    and the widest windows only a table gets (22, 24) with carry-driving scalars on 2^14."""
    nprng = np.random.default_rng(rng.randrange(2**32))
    n = 1 << 20
    dev = srs_gen.device_points_from_scalars(srs_gen.random_scalars(n, nprng))
    scalars = cupy.asarray(srs_gen.random_scalars(n, nprng))  # uniform below r, read as Montgomery
    _poison()
    default = gpu_msm.msm(dev, scalars)
    monkeypatch.setattr(gpu_msm, "PRECOMPUTED", "prepared")
    c = msm_tables.fixed_window_bits(n)
    table = msm_tables.TABLES.build(dev, c)
    windows = gpu_msm.window_count(c)
    assert table.nbytes == windows * n * 96 and table.setup_ms > 0
    _poison()
    sums = gpu_msm.msm_windows(dev, scalars)
    assert sums.rows is not None and sums.rows.shape == (1, 48)
    assert sums.combine() == default
    assert gpu_msm.msm(dev, scalars) == default  # the table again, scratch reused
    picks = [0, 1, n - 1]
    rows = gpu_msm.DevicePoints(data=cupy.ascontiguousarray(table.data.reshape(windows, n, 24)[:, picks]
                                                            .reshape(-1, 24)), n=3 * windows,
                                backend=dev.backend).to_points()
    bases = [G1Point.from_xy_bytes_unchecked_le(bytes(xy)) for xy in dev.to_points().xy[picks]]
    want = [p * Scalar(pow(2, c * w, R_MODULUS)) for w in range(windows) for p in bases]
    assert rows == G1Points.from_objects(want)
    msm_tables.TABLES.drop(dev)
    small = _points(rng, 1 << 14)
    small_dev = gpu_msm.DevicePoints.from_points(small)
    for wide in (22, 24):
        cases = carry_scalars(wide, rng)
        values = [rng.choice(cases) if rng.random() < 0.5 else rng.randrange(R_MODULUS)
                  for _ in range(1 << 14)]
        small_scalars = _mont_scalars(values)
        msm_tables.TABLES.build(small_dev, wide)
        _poison()
        assert gpu_msm.msm(small_dev, small_scalars) == point_to_bytes(msm(small, small_scalars)), wide


# ---------------------------------------------------------------- G2


def _g2_points(rng: random.Random, n: int) -> G2Points:
    side = max(1, int(n**0.5) + 1)
    rows = [G2Point() * Scalar(rng.randrange(1, R_MODULUS)) for _ in range(side)]
    cols = [G2Point() * Scalar(rng.randrange(1, R_MODULUS)) for _ in range(side)]
    return G2Points.from_objects([rows[i // side] + cols[i % side] for i in range(n)])


@pytest.mark.parametrize("log2", [8, 12, 15])
def test_g2_msm_matches_library(rng: random.Random, msm_path: str, log2: int):
    n = (1 << log2) + 5
    points = _g2_points(rng, n)
    values = [rng.randrange(R_MODULUS) for _ in range(n - 3)] + [0, 1, R_MODULUS - 1]
    scalars = _mont_scalars(values)
    dev = gpu_msm.DevicePoints.from_points(points)
    assert dev.to_points() == points
    _poison()
    assert gpu_msm.msm(dev, scalars) == point_to_bytes(msm(points, scalars))
    indices = np.array(sorted(rng.sample(range(n), n // 3)), dtype=np.int64)
    _poison()
    got = gpu_msm.msm(dev, cupy.asarray(scalars[: len(indices)]), cupy.asarray(indices))
    assert got == point_to_bytes(msm(points, scalars[: len(indices)], indices))


@pytest.mark.parametrize("log2", [9, 15])
def test_g2_batch_add_matches_library(rng: random.Random, log2: int):
    n = (1 << log2) + 3
    points = _g2_points(rng, n)
    dev = gpu_msm.DevicePoints.from_points(points)
    nprng = np.random.default_rng(rng.randrange(2**32))
    for mask in (nprng.random(n) < 0.5, np.ones(n, bool), np.zeros(n, bool)):
        bitmap = np.packbits(mask, bitorder="little")
        _poison()
        assert gpu_msm.batch_add(dev, cupy.asarray(bitmap)) == point_to_bytes(batch_add(points, mask))


# ---------------------------------------------------------------- affine rounds (batch_affine.cuh)

INV_TEST_KERNEL = r"""
extern "C" __global__ void fp_binv(const uint4* a, uint4* out, unsigned long long n, unsigned int binary)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        fp_store(out, i, fp_inv_batch(fp_load(a, i), binary));
}
"""


@pytest.mark.parametrize("binary", [1, 0], ids=["binary", "batched"])
def test_batch_inversions_match_python_ints(rng: random.Random, binary: int):
    """fp_inv_binary and fp_inv_batched on the device, with the batched one's hardest inputs:
    powers of two (2^380 needs 26 of the 27 batches), P minus powers of two, values of few bits."""
    from workbench.gpu import kernels

    code = kernels.expand_includes('#include "batch_affine.cuh"\n' + INV_TEST_KERNEL)
    module = cupy.RawModule(code=code, options=("-std=c++17",))
    xs = [0, 1, 2, P - 1, P - 2, R384, 2**380, P - 2**32] + [rng.randrange(P) for _ in range(3000)]
    xs += [1 << k for k in range(381)] + [P - (1 << k) for k in range(380)]
    xs += [rng.randrange(1, 1 << rng.randrange(1, 381)) for _ in range(1000)]
    out = cupy.full((len(xs), 12), 0xFFFFFFFF, dtype=cupy.uint32)
    module.get_function("fp_binv")((16,), (128,), (cupy.asarray(_fp_limbs(xs)), out, np.uint64(len(xs)),
                                                   np.uint32(binary)))
    want = [0 if x == 0 else pow(x * R384_INV % P, -1, P) * R384 % P for x in xs]
    assert _fp_ints(out.get()) == want


@pytest.fixture(params=["wide", "looping"])
def forced_rounds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Rounds on every MSM and batch addition, down to one point a bucket, with the batched
    inversion; "looping" leaves fewer threads than chunks, with the binary inversion."""
    from workbench.gpu import affine_rounds

    for name, value in (("MIN_PAIRS", 1), ("MIN_FRACTION", 0.0), ("MIN_PAIRS_G2", 1),
                        ("MIN_FRACTION_G2", 0.0),
                        ("INVERSION", "batched" if request.param == "wide" else "binary")):
        monkeypatch.setattr(affine_rounds, name, value)
    if request.param == "looping":
        monkeypatch.setattr(affine_rounds, "MAX_THREADS", 96)
    return str(request.param)


@pytest.mark.parametrize("case", ["random", "one", "repeated", "cancel", "infinity", "indices"])
def test_msm_with_affine_rounds(rng: random.Random, msm_path: str, forced_rounds: str, case: str):
    n = 5000
    points = _points(rng, n)
    values = [rng.randrange(R_MODULUS) for _ in range(n)]
    indices = None
    if case == "one":
        values = [1] * n
    elif case == "repeated":  # equal points in one bucket: P + P inside a batch
        points = G1Points(np.repeat(points.xy[:2], [2500, 2500], axis=0))
        values = [rng.choice([3, 5, 2**130 + 3]) for _ in range(n)]
    elif case == "cancel":
        values = [values[0], R_MODULUS - values[0]] * (n // 2)
        points = G1Points(np.repeat(points.xy[:1], n, axis=0))
    elif case == "infinity":
        xy = np.array(points.xy)
        xy[::7] = 0
        points = G1Points(xy)
    elif case == "indices":
        indices = np.array(sorted(rng.sample(range(n), 1500)), dtype=np.int64)
        values = values[:1500]
    scalars = _mont_scalars(values)
    want = point_to_bytes(msm(points, scalars, indices))
    assert _device_msm(points, scalars, indices) == want, forced_rounds


def test_batch_add_and_g2_with_affine_rounds(rng: random.Random, forced_rounds: str):
    n = 6001
    points = _points(rng, n)
    dev = gpu_msm.DevicePoints.from_points(points)
    nprng = np.random.default_rng(rng.randrange(2**32))
    for mask in (nprng.random(n) < 0.5, np.ones(n, bool)):
        _poison()
        assert gpu_msm.batch_add(dev, cupy.asarray(np.packbits(mask, bitorder="little"))) == point_to_bytes(
            batch_add(points, mask))
    p = G1Point() * Scalar(rng.randrange(1, R_MODULUS))
    pairs = gpu_msm.DevicePoints.from_points(G1Points.from_objects([p, -p] * 300 + [p, p]))
    _poison()
    every = np.packbits(np.ones(602, bool), bitorder="little")
    assert gpu_msm.batch_add(pairs, every) == point_to_bytes(p + p)
    g2 = _g2_points(rng, 1500)
    g2_dev = gpu_msm.DevicePoints.from_points(g2)
    scalars = _mont_scalars([rng.randrange(R_MODULUS) for _ in range(1500)])
    g2_mask = nprng.random(1500) < 0.7
    _poison()
    assert gpu_msm.msm(g2_dev, scalars) == point_to_bytes(msm(g2, scalars))
    assert gpu_msm.batch_add(g2_dev, np.packbits(g2_mask, bitorder="little")) == point_to_bytes(
        batch_add(g2, g2_mask))


def test_affine_rounds_agree_with_xyzz_at_scale(rng: random.Random, monkeypatch: pytest.MonkeyPatch):
    """At sizes where the rounds run by default (2^22 points), against the XYZZ-only path:
    two different formulas, and the quarters of the MSM summed against the whole."""
    from workbench.gpu import affine_rounds

    nprng = np.random.default_rng(rng.randrange(2**32))
    n = 1 << 22
    dev = srs_gen.device_points_from_scalars(srs_gen.random_scalars(n, nprng))
    scalars = cupy.asarray(srs_gen.random_scalars(n, nprng))  # uniform below r, read as Montgomery
    bitmap = cupy.asarray(np.packbits(nprng.random(n) < 0.5, bitorder="little"))
    quarter = gpu_msm.views(dev, 4)
    _poison()
    monkeypatch.setattr(affine_rounds, "INVERSION", "batched")
    affine = gpu_msm.msm(quarter[0], scalars[: 1 << 20]), gpu_msm.batch_add(dev, bitmap)
    monkeypatch.setattr(affine_rounds, "MIN_PAIRS", 1 << 62)
    _poison()
    assert (gpu_msm.msm(quarter[0], scalars[: 1 << 20]), gpu_msm.batch_add(dev, bitmap)) == affine


# ---------------------------------------------------------------- the rounds' build options

# affine_rounds.PRODUCTS and SQUARE: each build of kernels/affine_round.cu against the default
# rounds (msm.cu's and batch_add.cu's own: rolled products) and the library.
ROUND_BUILDS = {"inline": ("inline", "product"), "called": ("called", "product"),
                "called_sqr": ("called", "dedicated"), "rolled_sqr": ("rolled", "dedicated"),
                "sqr": ("inline", "dedicated")}

SQR_TEST_KERNEL = r"""
extern "C" __global__ void fp_products(const uint4* a, const uint4* b, uint4* out, unsigned long long n)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const fp_t x = fp_load(a, i), y = fp_load(b, i);
        fp_store(out, 2 * i, fp_sqr_dedicated(x));
        fp_store(out, 2 * i + 1, fp_mul_rolled(x, y));
    }
}
"""


def test_product_forms_match_python_ints(rng: random.Random):
    """fp_sqr_dedicated over every a < 2^382 that it admits, fp_mul_rolled over a, b < p: the
    device's own carry chains."""
    module = cupy.RawModule(code=(KERNELS / "fp.cuh").read_text() + SQR_TEST_KERNEL, options=("-std=c++17",))
    edges = [0, 1, 2, P - 1, P - 2, R384, 2**32 - 1, 2**380, P - 2**32]
    reduced = edges + [rng.randrange(P) for _ in range(3000)]
    wide = [P, P + 1, 2 * P - 1, 2 * P, 2**381, 2**382 - 1] + [rng.randrange(P, 2**382) for _ in range(1000)]
    xs = reduced + wide
    ys = [rng.choice(reduced) for _ in xs]
    n = len(xs)
    out = cupy.full((2 * n, 12), 0xFFFFFFFF, dtype=cupy.uint32)
    args = (cupy.asarray(_fp_limbs(xs)), cupy.asarray(_fp_limbs(ys)), out, np.uint64(n))
    module.get_function("fp_products")((32,), (128,), args)
    got = _fp_ints(out.get())
    assert got[0::2] == [x * x * R384_INV % P for x in xs]
    assert got[1:2 * len(reduced):2] == [x * y * R384_INV % P for x, y in zip(reduced, ys, strict=False)]


class _SetInputs:
    """G1 and G2 MSM and batch-addition inputs with infinity (every `zero_step`-th point), P + P
    (a run of equal points) and P + (-P) (scalars r - 5 beside 5), checked against the library,
    and a 2^18 set the default thresholds' path takes."""

    def __init__(self, rng: random.Random, n: int, n_g2: int, zero_step: int, repeat: int) -> None:
        xy = np.array(_points(rng, n).xy)
        xy[::zero_step] = 0
        xy[1000:1000 + repeat] = xy[999]
        self.points = G1Points(xy)
        values = [rng.choice([5, R_MODULUS - 5, rng.randrange(R_MODULUS)]) for _ in range(n)]
        self.scalars = _mont_scalars(values)
        nprng = np.random.default_rng(rng.randrange(2**32))
        self.mask = nprng.random(n) < 0.6
        self.mask[999:1000 + repeat] = True
        self.bitmap = np.packbits(self.mask, bitorder="little")
        self.dev = gpu_msm.DevicePoints.from_points(self.points)
        self.g2 = _g2_points(rng, n_g2)
        self.g2_dev = gpu_msm.DevicePoints.from_points(self.g2)
        self.g2_scalars = _mont_scalars([rng.randrange(R_MODULUS) for _ in range(n_g2)])
        self.g2_mask = nprng.random(n_g2) < 0.7
        self.g2_bitmap = np.packbits(self.g2_mask, bitorder="little")
        big_n = 1 << 18
        self.big = srs_gen.device_points_from_scalars(srs_gen.random_scalars(big_n, nprng))
        self.big_scalars = cupy.asarray(srs_gen.random_scalars(big_n, nprng))
        self.big_bitmap = cupy.asarray(np.packbits(nprng.random(big_n) < 0.5, bitorder="little"))

    def small(self) -> list[bytes]:
        return [gpu_msm.msm(self.dev, self.scalars), gpu_msm.batch_add(self.dev, self.bitmap),
                gpu_msm.msm(self.g2_dev, self.g2_scalars), gpu_msm.batch_add(self.g2_dev, self.g2_bitmap)]

    def large(self) -> list[bytes]:
        return [gpu_msm.msm(self.big, self.big_scalars), gpu_msm.batch_add(self.big, self.big_bitmap)]

    def library(self) -> list[bytes]:
        return [point_to_bytes(msm(self.points, self.scalars)),
                point_to_bytes(batch_add(self.points, self.mask)),
                point_to_bytes(msm(self.g2, self.g2_scalars)),
                point_to_bytes(batch_add(self.g2, self.g2_mask))]


@pytest.mark.parametrize("build", sorted(ROUND_BUILDS))
def test_round_builds_match_default(rng: random.Random, monkeypatch: pytest.MonkeyPatch, build: str):
    """Rounds on every MSM and batch addition (G1 and G2, P + P, P + (-P), infinity), each
    build's results equal to the default's and the library's; and at 2^18, where the rounds
    run with k = 32 and more, equal to the default's."""
    from workbench.gpu import affine_rounds

    for name in ("MIN_PAIRS", "MIN_PAIRS_G2"):
        monkeypatch.setattr(affine_rounds, name, 1)
    for name in ("MIN_FRACTION", "MIN_FRACTION_G2"):
        monkeypatch.setattr(affine_rounds, name, 0.0)
    inputs = _SetInputs(rng, 4001, 900, zero_step=97, repeat=400)

    def run() -> list[bytes]:
        _poison()
        return [*inputs.small(), *inputs.large()]

    default = run()
    assert default[:4] == inputs.library()
    products, square = ROUND_BUILDS[build]
    monkeypatch.setattr(affine_rounds, "PRODUCTS", products)
    monkeypatch.setattr(affine_rounds, "SQUARE", square)
    assert affine_rounds.round_module("msm") != "msm"
    assert run() == default, build


# ---------------------------------------------------------------- the curve code's build (XYZZ_PRODUCTS)

@pytest.mark.parametrize("rounds", [False, True], ids=["xyzz", "rounds"])
def test_rolled_curve_build_matches_default(rng: random.Random, monkeypatch: pytest.MonkeyPatch,
                                            rounds: bool):
    """affine_rounds.XYZZ_PRODUCTS = "rolled" (the default: msm.cu and batch_add.cu built with
    EC_PRODUCTS_ROLLED): G1 and G2 MSMs and batch additions with P + P, P + (-P) and infinity,
    in XYZZ alone or after affine rounds, equal to the inline build's and the library's; and
    at 2^18, the default thresholds' path, equal to the inline build's."""
    from workbench.gpu import affine_rounds

    inputs = _SetInputs(rng, 3001, 700, zero_step=89, repeat=300)

    def run() -> list[bytes]:
        _poison()
        with monkeypatch.context() as m:
            if rounds:
                for name in ("MIN_PAIRS", "MIN_PAIRS_G2"):
                    m.setattr(affine_rounds, name, 1)
                for name in ("MIN_FRACTION", "MIN_FRACTION_G2"):
                    m.setattr(affine_rounds, name, 0.0)
            small = inputs.small()
        return [*small, *inputs.large()]

    monkeypatch.setattr(affine_rounds, "XYZZ_PRODUCTS", "inline")
    default = run()
    assert default[:4] == inputs.library()
    monkeypatch.setattr(affine_rounds, "XYZZ_PRODUCTS", "rolled")
    assert affine_rounds.curve_module("msm") == "msm+EC_PRODUCTS_ROLLED"
    assert run() == default


# ---------------------------------------------------------------- the hybrid batch addition (batch_add.cu)


@pytest.mark.parametrize("shape", ["one_word", "default"])
def test_batch_add_hybrid(rng: random.Random, monkeypatch: pytest.MonkeyPatch, shape: str):
    """affine_rounds.BATCH_ADD = "hybrid" against the library (infinity in the table, odd
    counts, P + (-P), P + P, G2, joined sets) and, at 2^20, against the default method."""
    from workbench.gpu import affine_rounds

    nprng = np.random.default_rng(rng.randrange(2**32))
    big_n = 1 << 20
    big = srs_gen.device_points_from_scalars(srs_gen.random_scalars(big_n, nprng))
    big_bitmap = cupy.asarray(np.packbits(nprng.random(big_n) < 0.5, bitorder="little"))
    _poison()
    default = gpu_msm.batch_add(big, big_bitmap)
    monkeypatch.setattr(affine_rounds, "BATCH_ADD", "hybrid")
    if shape == "one_word":
        monkeypatch.setattr(affine_rounds, "HYBRID_WORDS", 1)
        monkeypatch.setattr(affine_rounds, "HYBRID_THREADS", 96)
    _poison()
    assert gpu_msm.batch_add(big, big_bitmap) == default
    n = 6001
    xy = np.array(_points(rng, n).xy)
    xy[::97] = 0  # points at infinity in the table
    points = G1Points(xy)
    dev = gpu_msm.DevicePoints.from_points(points)
    odd = np.zeros(n, bool)
    odd[::3] = True
    for mask in (nprng.random(n) < 0.5, np.ones(n, bool), odd):
        _poison()
        assert gpu_msm.batch_add(dev, cupy.asarray(np.packbits(mask, bitorder="little"))) == point_to_bytes(
            batch_add(points, mask)), shape
    p = G1Point() * Scalar(rng.randrange(1, R_MODULUS))
    every = np.packbits(np.ones(1202, bool), bitorder="little")
    cancel = gpu_msm.DevicePoints.from_points(G1Points.from_objects([p, -p] * 600 + [p, p]))
    repeated = gpu_msm.DevicePoints.from_points(G1Points.from_objects([p] * 1202))
    _poison()
    assert gpu_msm.batch_add(cancel, every) == point_to_bytes(p + p)
    assert gpu_msm.batch_add(repeated, every) == point_to_bytes(p * Scalar(1202))
    g2 = _g2_points(rng, 1500)
    g2_mask = nprng.random(1500) < 0.7
    sets = [_points(rng, 2048) for _ in range(3)]
    joined = gpu_msm.concat([gpu_msm.DevicePoints.from_points(s) for s in sets])
    set_mask = nprng.random(2048) < 0.5
    _poison()
    g2_dev = gpu_msm.DevicePoints.from_points(g2)
    assert gpu_msm.batch_add(g2_dev, np.packbits(g2_mask, bitorder="little")) == point_to_bytes(
        batch_add(g2, g2_mask))
    assert gpu_msm.batch_add_sets(joined, 3, np.packbits(set_mask, bitorder="little")) == [
        point_to_bytes(batch_add(s, set_mask)) for s in sets]
