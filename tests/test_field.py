"""Fr arithmetic checked element by element against plain Python integers."""

from __future__ import annotations

import os
import random
import secrets
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.prover import field as F

R = F.MODULUS
R_MONT = (1 << 256) % R
# Small, large, just below r, and values whose 29-bit or 64-bit limbs are all ones or zero.
EDGES = [0, 1, 2, 3, R - 1, R - 2, R - 3, (R - 1) // 2, (R + 1) // 2, 2**254, 2**254 - 1,
         2**29 - 1, 2**29, 2**64 - 1, 2**64, 2**128 - 1, 2**232 - 1, 2**232, 2**253 + 2**29 - 1,
         R - 2**32, R - 2**64]
# Canonical inputs at or above r: reduced mod r by policy.
ABOVE_R = [R, R + 1, 2 * R - 1, 2 * R, 2**255 - 1, 2**255, 2**256 - 1]

elements = st.one_of(st.integers(0, R - 1), st.sampled_from(EDGES))
HYPO = settings(max_examples=40, deadline=None, database=None)


@pytest.fixture
def pyrng() -> random.Random:
    seed = int(os.environ.get("WORKBENCH_TEST_SEED", secrets.randbits(64)))
    print(f"random seed {seed} (rerun with WORKBENCH_TEST_SEED={seed})")
    return random.Random(seed)


def sample(rng: random.Random, n: int) -> list[int]:
    """Mostly uniform values with edge values mixed in at random places."""
    return [rng.choice(EDGES) if rng.random() < 0.1 else rng.randrange(R) for _ in range(n)]


def limbs_of(value: int) -> list[int]:
    return [(value >> (64 * q)) & (2**64 - 1) for q in range(4)]


def canonical_limbs(values: list[int]) -> np.ndarray:
    return np.array([limbs_of(v) for v in values], dtype=np.uint64).reshape(-1, 4)


def planes_value(p: np.ndarray) -> list[int]:
    return [sum(int(p[j, i]) << (29 * j) for j in range(9)) for i in range(p.shape[1])]


def test_constants() -> None:
    assert R == 52435875175126190479447740508185965837690552500527637822603658699938581184513
    assert R.bit_length() == 255
    assert (R - 1) % 2**F.TWO_ADICITY == 0 and ((R - 1) >> F.TWO_ADICITY) % 2 == 1
    # 7 is a non-residue, so its powers reach a primitive 2^32-th root of unity.
    assert pow(F.GENERATOR, (R - 1) // 2, R) == R - 1
    assert (F.LIMBS, F.BYTES_PER_ELEMENT) == (4, 32)
    assert F.MONT_ONE.dtype == np.uint64 and F.MONT_ONE.shape == (4,)
    assert F.MONT_ONE.tolist() == limbs_of(R_MONT)
    assert F.from_mont(F.MONT_ONE) == [1]


def test_to_mont_storage_format(pyrng: random.Random) -> None:
    values = sample(pyrng, 50) + EDGES
    x = F.to_mont(values)
    assert x.dtype == np.uint64 and x.shape == (len(values), 4) and x.flags.c_contiguous
    assert x.tolist() == [limbs_of(v * R_MONT % R) for v in values]
    assert x.tobytes() == b"".join((v * R_MONT % R).to_bytes(32, "little") for v in values)


def test_to_mont_reduces_large_and_rejects_negative() -> None:
    big = [*ABOVE_R, 2**300 + 5, 10**100]
    assert F.from_mont(F.to_mont(big)) == [v % R for v in big]
    with pytest.raises(ValueError):
        F.to_mont([1, -1])
    with pytest.raises(ValueError):
        F.to_mont(np.array([3, -2], dtype=np.int64))
    with pytest.raises(TypeError):
        F.to_mont([1.5])  # type: ignore[list-item]
    arr = np.array([0, 1, 2**63 + 11, 2**64 - 1], dtype=np.uint64)
    assert F.from_mont(F.to_mont(arr)) == [int(v) for v in arr]
    assert F.from_mont(F.to_mont(np.array([5, 7], dtype=np.int32))) == [5, 7]
    assert F.to_mont([]).shape == (0, 4)


@HYPO
@given(st.lists(elements, min_size=1, max_size=30))
def test_mont_roundtrip(values: list[int]) -> None:
    assert F.from_mont(F.to_mont(values)) == values


def test_canonical_conversions_reduce_mod_r(pyrng: random.Random) -> None:
    values = EDGES + ABOVE_R + [pyrng.randrange(2**256) for _ in range(200)]
    mont = F.canonical_to_mont(canonical_limbs(values))
    assert mont.tolist() == [limbs_of(v % R * R_MONT % R) for v in values]
    assert F.mont_to_canonical(mont).tolist() == [limbs_of(v % R) for v in values]
    # An unreduced Montgomery input is reduced too.
    raw = canonical_limbs(ABOVE_R)
    assert F.mont_to_canonical(raw).tolist() == [
        limbs_of(v * pow(R_MONT, -1, R) % R) for v in ABOVE_R]


def test_conversions_across_blocks(pyrng: random.Random, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "BLOCK", 48)
    monkeypatch.setattr(F, "CHUNK", 16)
    values = [pyrng.randrange(2**256) for _ in range(203)]
    mont = F.canonical_to_mont(canonical_limbs(values))
    assert F.from_mont(mont) == [v % R for v in values]


OPS = {
    "add": (lambda a, b: F.add(a, b), lambda x, y: (x + y) % R),
    "sub": (lambda a, b: F.sub(a, b), lambda x, y: (x - y) % R),
    "mul": (lambda a, b: F.mul(a, b), lambda x, y: x * y % R),
    "mul_sub": (lambda a, b: F.mul_sub(a, b, a), lambda x, y: (x * y - x) % R),
    "square": (lambda a, b: F.square(b), lambda x, y: y * y % R),
    "neg": (lambda a, b: F.neg(a), lambda x, y: -x % R),
    "scale": (lambda a, b: F.scale(a, -7), lambda x, y: -7 * x % R),
}


@HYPO
@given(st.integers(1, 20).flatmap(
    lambda n: st.tuples(st.lists(elements, min_size=n, max_size=n),
                        st.lists(elements, min_size=n, max_size=n))))
def test_ops_match_python(pair: tuple[list[int], list[int]]) -> None:
    xs, ys = pair
    a, b = F.to_mont(xs), F.to_mont(ys)
    for name, (op, ref) in OPS.items():
        got = op(a, b)
        assert F.is_reduced(got).all(), name
        assert F.from_mont(got) == [ref(x, y) for x, y in zip(xs, ys, strict=True)], name


@pytest.mark.parametrize("chunk", [16, F.CHUNK])
def test_ops_over_many_chunks(pyrng: random.Random, monkeypatch: pytest.MonkeyPatch,
                              chunk: int) -> None:
    monkeypatch.setattr(F, "CHUNK", chunk)
    n = 2 * chunk + 7 if chunk > 16 else 101
    xs, ys = sample(pyrng, n), sample(pyrng, n)
    a, b = F.to_mont(xs), F.to_mont(ys)
    for name, (op, ref) in OPS.items():
        assert F.from_mont(op(a, b)) == [ref(x, y) for x, y in zip(xs, ys, strict=True)], name


def test_all_edge_pairs() -> None:
    xs = [x for x in EDGES for _ in EDGES]
    ys = EDGES * len(EDGES)
    a, b = F.to_mont(xs), F.to_mont(ys)
    for name, (op, ref) in OPS.items():
        assert F.from_mont(op(a, b)) == [ref(x, y) for x, y in zip(xs, ys, strict=True)], name


@pytest.mark.parametrize("single_shape", [(4,), (1, 4)])
def test_broadcasting_single_element(pyrng: random.Random, single_shape: tuple[int, ...]) -> None:
    xs = sample(pyrng, 37)
    s = pyrng.randrange(R)
    a = F.to_mont(xs)
    one = F.to_mont([s]).reshape(single_shape)
    assert F.from_mont(F.mul(a, one)) == [x * s % R for x in xs]
    assert F.from_mont(F.mul(one, a)) == [x * s % R for x in xs]
    assert F.from_mont(F.add(one, a)) == [(x + s) % R for x in xs]
    assert F.from_mont(F.sub(a, one)) == [(x - s) % R for x in xs]
    assert F.from_mont(F.sub(one, a)) == [(s - x) % R for x in xs]
    assert F.from_mont(F.mul_scalar_vector(one, a)) == [x * s % R for x in xs]
    assert F.from_mont(F.mul_sub(a, one, a)) == [(x * s - x) % R for x in xs]
    assert F.mul(one, one).shape == single_shape
    with pytest.raises(ValueError):
        F.mul_scalar_vector(a, a)


def test_out_parameter_and_aliasing(pyrng: random.Random) -> None:
    xs, ys = sample(pyrng, 29), sample(pyrng, 29)
    a, b = F.to_mont(xs), F.to_mont(ys)
    out = np.empty_like(a)
    assert F.mul(a, b, out=out) is out
    assert F.from_mont(out) == [x * y % R for x, y in zip(xs, ys, strict=True)]
    F.add(a, b, out=a)  # in place
    assert F.from_mont(a) == [(x + y) % R for x, y in zip(xs, ys, strict=True)]
    with pytest.raises(ValueError):
        F.mul(a, b, out=np.empty((28, 4), np.uint64))
    with pytest.raises(ValueError):
        F.add(a, b.astype(np.int64))
    with pytest.raises(ValueError):
        F.add(a, b[:5])


def test_predicates() -> None:
    x = F.to_mont([0, 1, R - 1, 2, 0])
    assert F.is_zero(x).tolist() == [True, False, False, False, True]
    assert F.is_one(x).tolist() == [False, True, False, False, False]
    assert bool(F.is_one(F.MONT_ONE)) and not bool(F.is_zero(F.MONT_ONE))
    raw = canonical_limbs([R - 1, R, R + 1, 2**256 - 1, 0, R - 2**192])
    assert F.is_reduced(raw).tolist() == [True, False, False, False, True, True]


def test_random_elements_are_reduced_and_spread(pyrng: random.Random) -> None:
    rng = np.random.default_rng(pyrng.randrange(2**63))
    x = F.random_elements(rng, 4000)
    assert x.dtype == np.uint64 and x.shape == (4000, 4)
    raw = [int.from_bytes(row.tobytes(), "little") for row in x]
    assert max(raw) < R and F.is_reduced(x).all()
    assert F.from_mont(x) == [v * pow(R_MONT, -1, R) % R for v in raw]
    assert len(set(raw)) == len(raw)
    # Uniform below r: about 1/4 of the draws in each quarter of [0, r).
    quarters = np.bincount([4 * v // R for v in raw], minlength=4)
    assert (quarters > 800).all(), quarters
    assert F.random_elements(rng, 0).shape == (0, 4)


def test_scalar_helpers(pyrng: random.Random) -> None:
    for x in [*sample(pyrng, 20), 1, R - 1]:
        if x == 0:
            continue
        assert F.inv_int(x) * x % R == 1
        assert F.pow_int(x, -3) * pow(x, 3, R) % R == 1
        assert F.pow_int(x, R - 1) == 1
    assert F.pow_int(5, 0) == 1 and F.pow_int(R + 2, 2) == 4
    with pytest.raises(ZeroDivisionError):
        F.inv_int(R)


def test_planes_layout_and_ops(pyrng: random.Random) -> None:
    xs, ys, zs = sample(pyrng, 45), sample(pyrng, 45), sample(pyrng, 45)
    a, b, c = (F.to_planes(F.to_mont(v)) for v in (xs, ys, zs))
    assert a.dtype == np.int64 and a.shape == (9, 45)
    assert ((a >= 0) & (a < 2**29)).all()
    assert planes_value(a) == [x * R_MONT % R for x in xs]
    assert F.from_planes(a).tolist() == F.to_mont(xs).tolist()

    def check(p: np.ndarray, expected: list[int]) -> None:
        assert ((p >= 0) & (p < 2**29)).all()
        assert F.from_mont(F.from_planes(p)) == expected

    pairs = list(zip(xs, ys, strict=True))
    check(F.padd(a, b), [(x + y) % R for x, y in pairs])
    check(F.psub(a, b), [(x - y) % R for x, y in pairs])
    check(F.pneg(a), [-x % R for x in xs])
    check(F.pmul(a, b), [x * y % R for x, y in pairs])
    check(F.psquare(a), [x * x % R for x in xs])
    check(F.pscale(a, 12345), [x * 12345 % R for x in xs])
    check(F.pmul_sub(a, b, c), [(x * y - z) % R for (x, y), z in zip(pairs, zs, strict=True)])
    check(F.pmul_prepared(a, F.prepare_multiplier(b)), [x * y % R for x, y in pairs])
    k = pyrng.randrange(R)
    check(F.pmul(a, F.pconst(k)), [x * k % R for x in xs])
    check(F.padd(F.pconst(k), b), [(k + y) % R for y in ys])
    out = np.empty_like(a)
    assert F.pmul(a, b, out=out) is out
    with pytest.raises(ValueError):
        F.padd(a, b[:, :3])


@pytest.mark.parametrize("with_twiddle", [True, False])
def test_butterfly(pyrng: random.Random, with_twiddle: bool) -> None:
    corners = [0, 1, R - 1, R - 2, 2**254, 2**232 - 1]
    triples = [(x, y, z) for x in corners for y in corners for z in corners]
    triples += [(x, y, z) for x, y, z in (sample(pyrng, 3) for _ in range(40))]
    us, vs, ws = (list(t) for t in zip(*triples, strict=True))
    n = len(us)
    u, v, w = (F.to_planes(F.to_mont(x)) for x in (us, vs, ws))
    dst = np.zeros((9, 2 * n), np.int64)
    pairs = dst.reshape(9, n, 2).transpose(0, 2, 1)  # interleaved, as the NTT writes them
    F.pbutterfly(u, v, F.prepare_multiplier(w) if with_twiddle else None, pairs)
    got = F.from_mont(F.from_planes(dst))
    for i in range(n):
        diff = (us[i] - vs[i]) % R
        assert got[2 * i] == (us[i] + vs[i]) % R
        assert got[2 * i + 1] == (diff * ws[i] % R if with_twiddle else diff)


def test_powers() -> None:
    base, first = 5, 11
    for count in [0, 1, 2, 7, 64, 100]:
        p = F.ppowers(base, count, first)
        assert F.from_mont(F.from_planes(p)) == [first * pow(base, i, R) % R
                                                 for i in range(count)]


def test_threads_do_not_share_scratch(pyrng: random.Random) -> None:
    rng = np.random.default_rng(pyrng.randrange(2**63))
    inputs = [(F.random_elements(rng, 20000), F.random_elements(rng, 20000)) for _ in range(4)]
    expected = [F.mul(a, b) for a, b in inputs]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        for _ in range(3):
            results[i] = F.mul(*inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, exp in enumerate(expected):
        np.testing.assert_array_equal(results[i], exp)
