"""Witness classification, bitmap/tail layout and the split query results."""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point
from py_ecc.optimized_bls12_381 import FQ, FQ2, Z1, Z2, add, multiply, normalize

from workbench.prover.curve import R_MODULUS, msm, point_to_ints
from workbench.prover.prep import (
    MONT_ONE,
    QUERIES,
    b_g2_msm,
    batch_add_queries,
    prep_msm,
    query_points,
    tail_msm_queries,
)
from workbench.prover.srs import Srs

R = R_MODULUS
MONT = pow(2, 256, R)


def to_mont(values: list[int]) -> np.ndarray:
    out = np.zeros((len(values), 4), dtype=np.uint64)
    for i, v in enumerate(values):
        x = v % R * MONT % R
        out[i] = [(x >> (64 * j)) & (2**64 - 1) for j in range(4)]
    return out


def from_ecc_bytes(raw: bytes) -> Any:
    """xy little-endian bytes -> py_ecc Jacobian point (identity for zeros)."""
    c = [int.from_bytes(raw[i : i + 48], "little") for i in range(0, len(raw), 48)]
    if len(c) == 2:
        return Z1 if not any(c) else (FQ(c[0]), FQ(c[1]), FQ(1))
    return Z2 if not any(c) else (FQ2(c[0:2]), FQ2(c[2:4]), FQ2([1, 0]))


def ref_ints(p: Any) -> Any:
    x, y = normalize(p)
    if hasattr(x, "coeffs"):
        return ((int(x.coeffs[0]), int(x.coeffs[1])), (int(y.coeffs[0]), int(y.coeffs[1])))
    return (int(x.n), int(y.n))


def ref_msm(xy: np.ndarray, scalars: list[int], zero: Any) -> Any:
    acc = zero
    for row, s in zip(xy, scalars, strict=True):
        if s:
            acc = add(acc, multiply(from_ecc_bytes(row.tobytes()), s))
    return acc


def mixed_witness(rng: np.random.Generator, m: int, p_zero: float, p_one: float) -> list[int]:
    out = []
    for u in rng.random(m):
        if u < p_zero:
            out.append(0)
        elif u < p_zero + p_one:
            out.append(1)
        else:
            out.append(int.from_bytes(rng.bytes(40), "little") % R or 2)
    return out


@pytest.fixture(scope="module")
def seed() -> int:
    return secrets.randbits(32)


@pytest.fixture(scope="module")
def small_srs() -> Srs:
    return Srs.generate(3, 24, seed=11)


def test_mont_one_constant() -> None:
    assert sum(int(v) << (64 * i) for i, v in enumerate(MONT_ONE)) == MONT
    assert np.array_equal(to_mont([1])[0], MONT_ONE)


def test_classification_matches_python_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = mixed_witness(rng, 301, 0.3, 0.3)
    # Traps: limbs [1,0,0,0] is the canonical 1, not the Montgomery one; r-1 and
    # 2 sit next to the special values.
    values[:4] = [R - 1, 2, 0, 1]
    w = to_mont(values)
    w[4] = [1, 0, 0, 0]
    raw_rows = [tuple(int(v) for v in row) for row in w]
    mont_one = tuple(int(v) for v in MONT_ONE)
    ref_zero = sum(row == (0, 0, 0, 0) for row in raw_rows)
    ref_one = sum(row == mont_one for row in raw_rows)
    prep = prep_msm(w)
    assert (prep.m, prep.n_zero, prep.n_one) == (301, ref_zero, ref_one), f"seed={seed}"
    assert prep.n_other == 301 - ref_zero - ref_one
    assert prep.ones_mask.tolist() == [row == mont_one for row in raw_rows]


def test_bitmap_bits_match_mask(seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    for m in (1, 8, 13, 64, 77):
        prep = prep_msm(to_mont(mixed_witness(rng, m, 0.2, 0.5)))
        assert prep.ones_bitmap.dtype == np.uint8
        assert prep.ones_bitmap.shape == ((m + 7) // 8,)
        for i in range(m):
            bit = (int(prep.ones_bitmap[i // 8]) >> (i % 8)) & 1
            assert bool(bit) == bool(prep.ones_mask[i]), f"seed={seed} m={m} i={i}"
        # Padding bits past m stay clear so a device kernel may read whole bytes.
        assert int(np.unpackbits(prep.ones_bitmap, bitorder="little")[m:].sum()) == 0


@pytest.mark.parametrize(
    ("m", "n_other", "split"),
    [(10, 5, True), (10, 6, False), (9, 4, True), (9, 5, False), (10, 0, True), (10, 10, False)],
)
def test_split_decision_at_threshold(m: int, n_other: int, split: bool) -> None:
    values = [7 + i for i in range(n_other)] + [i % 2 for i in range(m - n_other)]
    prep = prep_msm(to_mont(values), split_threshold=0.5)
    assert prep.n_other == n_other
    assert dict(prep.split) == dict.fromkeys(QUERIES, split)


def test_threshold_extremes() -> None:
    w = to_mont([0, 1, 5, 6])
    assert not any(prep_msm(w, split_threshold=0.0).split.values())
    assert all(prep_msm(w, split_threshold=1.0).split.values())
    with pytest.raises(ValueError):
        prep_msm(w, split_threshold=1.5)
    with pytest.raises(ValueError):
        prep_msm(w.astype(np.int64))


def test_tail_arrays_gather_the_right_scalars(seed: int) -> None:
    rng = np.random.default_rng(seed + 2)
    values = mixed_witness(rng, 50, 0.4, 0.4)
    w = to_mont(values)
    split_prep = prep_msm(w, split_threshold=1.0)
    others = [i for i, v in enumerate(values) if v not in (0, 1)]
    assert split_prep.tail_indices.dtype == np.int64
    assert split_prep.tail_indices.tolist() == others, f"seed={seed}"
    assert split_prep.tail_scalars.dtype == np.uint64
    assert split_prep.tail_scalars.flags.c_contiguous
    assert np.array_equal(split_prep.tail_scalars, w[others])
    full_prep = prep_msm(w, split_threshold=0.0)
    nonzero = [i for i, v in enumerate(values) if v != 0]
    if len(others) > 0:
        assert not full_prep.split["l"]
        assert full_prep.tail_indices.tolist() == nonzero
        assert np.array_equal(full_prep.tail_scalars, w[nonzero])
    expected = (
        split_prep.ones_mask.nbytes
        + split_prep.ones_bitmap.nbytes
        + split_prep.tail_indices.nbytes
        + split_prep.tail_scalars.nbytes
    )
    assert split_prep.nbytes == expected


def test_empty_witness() -> None:
    prep = prep_msm(np.zeros((0, 4), np.uint64))
    assert (prep.m, prep.n_zero, prep.n_one, prep.n_other, prep.n_tail) == (0, 0, 0, 0, 0)
    assert prep.ones_bitmap.shape == (0,)


@pytest.mark.parametrize("threshold", [1.0, 0.0])
def test_batch_add_plus_tail_equals_reference_msm(
    small_srs: Srs, seed: int, threshold: float
) -> None:
    rng = np.random.default_rng(seed + 3)
    values = mixed_witness(rng, small_srs.m, 0.35, 0.45)
    values[0], values[1], values[2] = 0, 1, R - 1
    w = to_mont(values)
    prep = prep_msm(w, split_threshold=threshold)
    assert all(prep.split.values()) == (threshold == 1.0)
    batch = batch_add_queries(prep, small_srs)
    tail = tail_msm_queries(prep, small_srs)
    assert set(batch) == set(tail) == set(QUERIES)
    for q in QUERIES:
        if not prep.split[q]:
            assert batch[q] == G1Point.identity()
        combined = batch[q] + tail[q]
        ref = ref_msm(query_points(small_srs, q).xy, values, Z1)
        assert point_to_ints(combined) == ref_ints(ref), f"seed={seed} query={q}"
        assert combined == msm(query_points(small_srs, q), w)
    # The three queries use different points, so their results must differ.
    assert len({point_to_ints(batch[q] + tail[q]) for q in QUERIES}) == 3


def test_b_g2_msm_matches_reference(seed: int) -> None:
    srs = Srs.generate(2, 6, seed=5)
    rng = np.random.default_rng(seed + 4)
    values = mixed_witness(rng, 6, 0.3, 0.3)
    values[0] = 0
    got = b_g2_msm(to_mont(values), srs)
    assert point_to_ints(got) == ref_ints(ref_msm(srs.b_g2.xy, values, Z2)), f"seed={seed}"
    zero = b_g2_msm(to_mont([0] * 6), srs)
    assert point_to_ints(zero) == ((0, 0), (0, 0))


def test_size_mismatch_is_rejected(small_srs: Srs) -> None:
    prep = prep_msm(to_mont([1] * (small_srs.m - 1)))
    with pytest.raises(ValueError):
        batch_add_queries(prep, small_srs)
    with pytest.raises(ValueError):
        tail_msm_queries(prep, small_srs)
    with pytest.raises(ValueError):
        b_g2_msm(to_mont([1] * (small_srs.m + 1)), small_srs)
    with pytest.raises(KeyError):
        query_points(small_srs, "h")


@pytest.mark.parametrize("bool_fraction", [0.9, 0.2])
def test_b_g2_from_prep_equals_the_full_msm(bool_fraction):
    from workbench.prover.prep import b_g2_msm, b_g2_msm_prepared
    from workbench.prover.srs import load_or_generate

    key = load_or_generate(4, 40, 3)
    rng = np.random.default_rng()
    kinds = rng.random(40)
    values = [0 if k < bool_fraction / 2 else 1 if k < bool_fraction else int(rng.integers(2, 2**62))
              for k in kinds]
    w = np.array([[(v * pow(2, 256, R) % R) >> (64 * j) & (2**64 - 1) for j in range(4)] for v in values],
                 dtype=np.uint64)
    prepared = prep_msm(w)
    assert prepared.split["b"] == (bool_fraction == 0.9)
    assert b_g2_msm_prepared(prepared, key) == b_g2_msm(w, key)
