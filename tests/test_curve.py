"""Point containers, scalar conversion, MSM and batch_add against py_ecc."""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar
from py_ecc.optimized_bls12_381 import G1, G2, Z1, Z2, add, multiply, neg, normalize

from workbench.prover import curve
from workbench.prover.curve import (
    R_MODULUS,
    G1Points,
    G2Points,
    batch_add,
    msm,
    point_from_bytes,
    point_to_bytes,
    point_to_ints,
    scalars_from_mont,
)

R = R_MODULUS
MONT = pow(2, 256, R)


def to_mont(values: list[int]) -> np.ndarray:
    out = np.zeros((len(values), 4), dtype=np.uint64)
    for i, v in enumerate(values):
        x = v % R * MONT % R
        out[i] = [(x >> (64 * j)) & (2**64 - 1) for j in range(4)]
    return out


def ref_ints(p: Any) -> Any:
    """py_ecc point -> the shape point_to_ints returns."""
    x, y = normalize(p)
    if hasattr(x, "coeffs"):
        return ((int(x.coeffs[0]), int(x.coeffs[1])), (int(y.coeffs[0]), int(y.coeffs[1])))
    return (int(x.n), int(y.n))


def ref_bytes(p: Any) -> bytes:
    """py_ecc point -> xy little-endian bytes, identity as zeros, built by hand."""
    x, y = normalize(p)
    coords = [*x.coeffs, *y.coeffs] if hasattr(x, "coeffs") else [x.n, y.n]
    return b"".join(int(c).to_bytes(48, "little") for c in coords)


def ref_msm(points: list[Any], scalars: list[int], zero: Any) -> Any:
    acc = zero
    for p, s in zip(points, scalars, strict=True):
        acc = add(acc, multiply(p, s % R))
    return acc


def pack(points: list[Any], cls: type[curve.Points]) -> curve.Points:
    raw = b"".join(ref_bytes(p) for p in points)
    return cls(np.frombuffer(raw, dtype=np.uint8).reshape(len(points), cls.POINT_BYTES))


@pytest.fixture(scope="module")
def seed() -> int:
    return secrets.randbits(32)


@pytest.fixture(scope="module")
def g1_pool(seed: int) -> list[Any]:
    """40 independent G1 points (fresh each run; the seed is in failure messages)."""
    rng = np.random.default_rng(seed)
    return [multiply(G1, int(rng.integers(2, 2**63))) for _ in range(40)]


@pytest.fixture(scope="module")
def g2_pool(seed: int) -> list[Any]:
    rng = np.random.default_rng(seed + 1)
    return [multiply(G2, int(rng.integers(2, 2**63))) for _ in range(5)]


def rand_scalars(rng: np.random.Generator, n: int) -> list[int]:
    return [int.from_bytes(rng.bytes(40), "little") % R for _ in range(n)]


# ------------------------------------------------------------ encoding


def test_generator_byte_layout_matches_reference() -> None:
    assert point_to_bytes(G1Point()) == ref_bytes(G1)
    assert point_to_bytes(G2Point()) == ref_bytes(G2)
    assert point_to_ints(G1Point()) == ref_ints(G1)
    assert point_to_ints(G2Point()) == ref_ints(G2)


def test_identity_is_all_zero_bytes() -> None:
    assert point_to_bytes(G1Point.identity()) == bytes(96)
    assert point_to_bytes(G2Point.identity()) == bytes(192)
    assert point_from_bytes(bytes(96)) == G1Point.identity()
    assert point_from_bytes(bytes(192)) == G2Point.identity()
    assert point_to_ints(G1Point.identity()) == (0, 0)
    assert point_to_ints(G2Point.identity()) == ((0, 0), (0, 0))


def test_point_bytes_roundtrip_and_check() -> None:
    p1 = G1Point() * Scalar(123456789)
    p2 = G2Point() * Scalar(987654321)
    assert point_from_bytes(point_to_bytes(p1)) == p1
    assert point_from_bytes(point_to_bytes(p2)) == p2
    bad = bytearray(point_to_bytes(p1))
    bad[0] ^= 1
    with pytest.raises(ValueError):
        point_from_bytes(bytes(bad))
    with pytest.raises(ValueError):
        point_from_bytes(bytes(50))


# ------------------------------------------------------------ container


def test_points_are_immutable_copies(g1_pool: list[Any]) -> None:
    raw = np.array(pack(g1_pool[:4], G1Points).xy)
    pts = G1Points(raw)
    raw[:] = 0
    assert len(pts) == 4
    assert point_to_bytes(pts.objects()[1]) == ref_bytes(g1_pool[1])
    with pytest.raises(ValueError):
        pts.xy[0, 0] = 1
    with pytest.raises(ValueError):
        G1Points(np.zeros((3, 192), dtype=np.uint8))
    with pytest.raises(ValueError):
        G2Points(np.zeros((3, 96), dtype=np.uint8))


@pytest.mark.parametrize("prebuilt", [False, True])
def test_take_gathers_bytes_and_objects(g1_pool: list[Any], prebuilt: bool) -> None:
    pts = pack(g1_pool[:10], G1Points)
    if prebuilt:
        pts.objects()
    idx = np.array([9, 0, 3, 3, 7])
    sub = pts.take(idx)
    assert len(sub) == 5
    assert isinstance(sub, G1Points)
    for k, i in enumerate(idx):
        assert bytes(sub.xy[k]) == ref_bytes(g1_pool[i])
        assert point_to_bytes(sub.objects()[k]) == ref_bytes(g1_pool[i])
    assert len(pts.take(np.array([], dtype=np.int64))) == 0
    with pytest.raises(IndexError):
        pts.take(np.array([10]))


def test_objects_built_once_under_concurrency(
    g1_pool: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0

    class SlowParse:
        @staticmethod
        def from_xy_bytes_unchecked_le(b: bytes) -> G1Point:
            nonlocal calls
            calls += 1
            time.sleep(0.001)  # widen the race window
            return G1Point.from_xy_bytes_unchecked_le(b)

    monkeypatch.setattr(G1Points, "LIBRARY_TYPE", SlowParse)
    pts = pack(g1_pool[:8], G1Points)
    barrier = threading.Barrier(6)
    results: list[list[Any]] = []

    def worker() -> None:
        barrier.wait()
        results.append(pts.objects())

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == 8
    assert all(r is results[0] for r in results)


# ------------------------------------------------------------ scalars


def test_scalars_from_mont(seed: int) -> None:
    rng = np.random.default_rng(seed + 2)
    values = [0, 1, 2, R - 1, R - 2, 2**255 % R, *rand_scalars(rng, 20)]
    got = scalars_from_mont(to_mont(values))
    assert got == [Scalar(v) for v in values], f"seed={seed}"
    assert scalars_from_mont(np.zeros((0, 4), np.uint64)) == []


def test_scalars_from_mont_rejects_unreduced_and_bad_shape() -> None:
    w = np.array([[(R >> (64 * j)) & (2**64 - 1) for j in range(4)]], dtype=np.uint64)
    with pytest.raises(ValueError):
        scalars_from_mont(w)
    with pytest.raises(ValueError):
        scalars_from_mont(np.zeros((3, 4), np.int64))


# ------------------------------------------------------------ msm


@pytest.mark.parametrize("n", [1, 7, 33])
def test_msm_g1_random(g1_pool: list[Any], seed: int, n: int) -> None:
    rng = np.random.default_rng(seed + n)
    pts = g1_pool[:n]
    scalars = rand_scalars(rng, n)
    got = msm(pack(pts, G1Points), to_mont(scalars))
    assert point_to_ints(got) == ref_ints(ref_msm(pts, scalars, Z1)), f"seed={seed}"


def test_msm_g2_random(g2_pool: list[Any], seed: int) -> None:
    rng = np.random.default_rng(seed + 100)
    scalars = rand_scalars(rng, len(g2_pool))
    got = msm(pack(g2_pool, G2Points), to_mont(scalars))
    assert isinstance(got, G2Point)
    assert point_to_ints(got) == ref_ints(ref_msm(g2_pool, scalars, Z2)), f"seed={seed}"


def test_msm_edge_scalars(g1_pool: list[Any]) -> None:
    pts = g1_pool[:9]
    packed = pack(pts, G1Points)
    total = Z1
    for p in pts:
        total = add(total, p)
    assert msm(packed, to_mont([0] * 9)) == G1Point.identity()
    assert point_to_ints(msm(packed, to_mont([1] * 9))) == ref_ints(total)
    assert point_to_ints(msm(packed, to_mont([R - 1] * 9))) == ref_ints(neg(total))
    empty = packed.take(np.array([], dtype=np.int64))
    assert msm(empty, np.zeros((0, 4), np.uint64)) == G1Point.identity()
    with pytest.raises(ValueError):
        msm(packed, to_mont([1] * 8))


def test_msm_repeated_and_cancelling_points(g1_pool: list[Any], seed: int) -> None:
    p, q = g1_pool[0], g1_pool[1]
    pts = [p, p, p, neg(p), q]
    rng = np.random.default_rng(seed + 200)
    scalars = rand_scalars(rng, 5)
    got = msm(pack(pts, G1Points), to_mont(scalars))
    assert point_to_ints(got) == ref_ints(ref_msm(pts, scalars, Z1)), f"seed={seed}"
    cancel = msm(pack([p, neg(p)], G1Points), to_mont([5, 5]))
    assert cancel == G1Point.identity()


def test_msm_with_indices(g1_pool: list[Any], seed: int) -> None:
    rng = np.random.default_rng(seed + 300)
    packed = pack(g1_pool[:12], G1Points)
    idx = np.array([11, 2, 5, 5])
    scalars = rand_scalars(rng, 4)
    got = msm(packed, to_mont(scalars), idx)
    ref = ref_msm([g1_pool[i] for i in idx], scalars, Z1)
    assert point_to_ints(got) == ref_ints(ref), f"seed={seed}"


# ------------------------------------------------------------ batch_add


@pytest.mark.parametrize("n", [1, 13, 40])
def test_batch_add_mask_and_bitmap(g1_pool: list[Any], seed: int, n: int) -> None:
    rng = np.random.default_rng(seed + 400 + n)
    mask = rng.random(n) < 0.5
    packed = pack(g1_pool[:n], G1Points)
    ref = Z1
    for p, bit in zip(g1_pool[:n], mask, strict=True):
        if bit:
            ref = add(ref, p)
    by_mask = batch_add(packed, mask)
    by_bits = batch_add(packed, np.packbits(mask, bitorder="little"))
    assert point_to_ints(by_mask) == ref_ints(ref), f"seed={seed}"
    assert by_bits == by_mask


def test_batch_add_edges(g1_pool: list[Any], g2_pool: list[Any]) -> None:
    p = g1_pool[3]
    packed = pack([p, neg(p), p, g1_pool[4]], G1Points)
    assert batch_add(packed, np.zeros(4, bool)) == G1Point.identity()
    assert batch_add(packed, np.array([True, True, False, False])) == G1Point.identity()
    doubled = batch_add(packed, np.array([True, False, True, False]))
    assert point_to_ints(doubled) == ref_ints(add(p, p))
    assert point_to_ints(batch_add(packed, np.ones(4, bool))) == ref_ints(add(p, g1_pool[4]))
    g2 = pack(g2_pool[:3], G2Points)
    got = batch_add(g2, np.array([True, False, True]))
    assert isinstance(got, G2Point)
    assert point_to_ints(got) == ref_ints(add(g2_pool[0], g2_pool[2]))
    assert batch_add(g2, np.zeros(3, bool)) == G2Point.identity()


def test_batch_add_rejects_bad_selection(g1_pool: list[Any]) -> None:
    packed = pack(g1_pool[:9], G1Points)
    with pytest.raises(ValueError):
        batch_add(packed, np.ones(8, bool))
    with pytest.raises(ValueError):
        batch_add(packed, np.ones(1, np.uint8))
    with pytest.raises(ValueError):
        batch_add(packed, np.ones(9, np.int32))
