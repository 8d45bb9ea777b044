"""The host-side logic of the GPU MSM and SRS generation, without a GPU: window choice, the
digit recoding the kernels rely on, the window combination and XYZZ decoding, scalar
sampling and the fixed-base table."""

from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, Scalar

from workbench.gpu import msm as gpu_msm
from workbench.gpu import srs_gen
from workbench.prover.curve import R_MODULUS

P = gpu_msm.P_MODULUS


def _seeded() -> tuple[int, random.Random]:
    seed = random.SystemRandom().randrange(2**32)
    return seed, random.Random(seed)


def _ints(p: G1Point) -> tuple[int, int] | None:
    raw = p.to_xy_bytes_le()
    if not any(raw):
        return None
    return int.from_bytes(raw[:48], "little"), int.from_bytes(raw[48:], "little")


def test_window_bits_follow_the_cost_model():
    assert gpu_msm.window_bits(1 << 20) == 16
    assert gpu_msm.window_bits(1 << 22) == 16
    assert gpu_msm.window_bits(1 << 24) in (19, 20)
    sizes = [1, 2, 3, 100, 1000, 1 << 16, 1 << 26]
    chosen = [gpu_msm.window_bits(n) for n in sizes]
    assert chosen == sorted(chosen)
    assert all(2 <= c <= 20 for c in chosen)
    with pytest.raises(ValueError):
        gpu_msm.window_bits(0)


def test_window_bits_avoid_a_crowded_top_window():
    """A 2^22 witness's tail (10% of it): the cost model alone picks c = 14, whose top window
    has 2 bits, so a quarter of the points share each of its buckets."""
    n = 419_430
    assert gpu_msm._top_window_crowded(n, 14)
    assert not gpu_msm._top_window_crowded(n, 13)
    assert gpu_msm.window_bits(n) == 13
    for n in (1 << 10, 1 << 16, 100_000, 3_000_000, 1 << 22, 1 << 24):
        assert not gpu_msm._top_window_crowded(n, gpu_msm.window_bits(n)), n


@pytest.mark.parametrize("c", range(2, 21))
def test_window_count_leaves_room_for_the_last_carry(c: int):
    assert gpu_msm.window_count(c) * c >= 256
    assert (gpu_msm.window_count(c) - 1) * c < 256


def _signed_digits(scalar: int, c: int) -> list[int]:
    """msm_for_each_digit in kernels/msm.cu, written out."""
    windows = gpu_msm.window_count(c)
    half, mask = 1 << (c - 1), (1 << c) - 1
    digits, carry = [], 0
    for w in range(windows):
        d = ((scalar >> (w * c)) & mask) + carry
        carry = 0
        if d > half and w + 1 < windows:
            d -= 1 << c
            carry = 1
        digits.append(d)
    return digits


@pytest.mark.parametrize("c", [2, 3, 7, 13, 16, 19, 20])
def test_signed_recoding_is_exact_and_bounded(c: int):
    seed, rng = _seeded()
    half = 1 << (c - 1)
    for s in [0, 1, R_MODULUS - 1, 2**254, *(rng.randrange(R_MODULUS) for _ in range(200))]:
        digits = _signed_digits(s, c)
        assert sum(d << (c * w) for w, d in enumerate(digits)) == s, f"seed {seed}"
        assert all(-half < d <= half for d in digits), f"seed {seed}"


def test_slice_floor_is_twice_the_mean_bucket_load():
    assert gpu_msm.slice_floor(1 << 20, 16) == 64
    assert gpu_msm.slice_floor(10, 16) == 16


def test_combine_windows_matches_library():
    seed, rng = _seeded()
    for c in (3, 16, 20):
        windows = gpu_msm.window_count(c)
        pts = [G1Point() * Scalar(rng.randrange(R_MODULUS)) for _ in range(windows)]
        pts[1] = G1Point.identity()
        want = G1Point.identity()
        for w, p in enumerate(pts):
            want = want + p * Scalar(pow(2, c * w, R_MODULUS))
        got = gpu_msm.combine_windows([_ints(p) for p in pts], c)
        assert got == bytes(want.to_xy_bytes_le()), f"seed {seed}"
    assert gpu_msm.combine_windows([None, None], 5) == gpu_msm.IDENTITY_BYTES


def _xyzz_words(x: int, y: int, z: int) -> np.ndarray:
    r = 1 << 384
    coords = [x * z * z, y * z * z * z, z * z, z * z * z] if z else [0, 0, 0, 0]
    raw = b"".join((v % P * r % P).to_bytes(48, "little") for v in coords)
    return np.frombuffer(raw, dtype="<u4")


def test_xyzz_decoding():
    seed, rng = _seeded()
    p = G1Point() * Scalar(rng.randrange(1, R_MODULUS))
    xy = _ints(p)
    assert xy is not None
    q = G1Point() * Scalar(rng.randrange(1, R_MODULUS))
    xy_q = _ints(q)
    assert xy_q is not None
    rows = np.stack([_xyzz_words(*xy, rng.randrange(1, P)), _xyzz_words(*xy, 0),
                     _xyzz_words(*xy_q, rng.randrange(1, P)), _xyzz_words(*xy_q, 1)])
    assert gpu_msm.xyzz_rows_to_affine(rows) == [xy, None, xy_q, xy_q], f"seed {seed}"
    assert gpu_msm.xyzz_rows_to_affine(rows[1:2]) == [None]
    assert gpu_msm.encode_affine(None) == gpu_msm.IDENTITY_BYTES
    assert gpu_msm.encode_affine(xy) == bytes(p.to_xy_bytes_le())
    assert gpu_msm.to_library_point(bytes(p.to_xy_bytes_le())) == p


def test_random_scalars_are_canonical_nonzero_and_reproducible():
    a = srs_gen.random_scalars(5000, np.random.default_rng([7, 1]))
    b = srs_gen.random_scalars(5000, np.random.default_rng([7, 1]))
    assert a.dtype == np.uint64 and a.shape == (5000, 4)
    assert np.array_equal(a, b)
    values = [srs_gen.scalar_to_int(row) for row in a]
    assert all(0 < v < R_MODULUS for v in values)
    assert len(set(values)) == len(values)
    # The top bit of a 255-bit draw is set about half the time: no truncation to fewer bits.
    assert 0.35 < np.mean([v >> 254 for v in values]) < 0.5


def test_fixed_base_table_matches_library():
    seed, rng = _seeded()
    table = srs_gen.fixed_base_table()
    assert table.shape == (32 * 256, 24) and not table.flags.writeable
    assert not table[0].any() and not table[256 * 31].any()
    picks = [(rng.randrange(32), rng.randrange(1, 256)) for _ in range(10)]
    for w, d in [(0, 1), (0, 255), (31, 255), *picks]:
        want = G1Point() * Scalar(d * pow(2, 8 * w, R_MODULUS) % R_MODULUS)
        assert table[256 * w + d].astype("<u4").tobytes() == bytes(want.to_xy_bytes_le()), f"seed {seed}"


def test_workspace_reuses_memory():
    ws = gpu_msm._Workspace(np)
    a = ws.buffer("x", np.uint32, 100)
    b = ws.buffer("x", np.uint32, 60)
    assert np.shares_memory(a, b) and b.size == 60
    c = ws.buffer("x", np.uint32, 200)
    assert c.size == 200 and not np.shares_memory(a, c)
    ws.poison()
    assert (c == 0xFFFFFFFF).all()
