"""NTTs and the Groth16 quotient checked against naive sums over plain Python integers."""

from __future__ import annotations

import os
import random
import secrets
import threading
from collections.abc import Callable

import numpy as np
import pytest

from workbench.prover import field as F
from workbench.prover import ntt as N

R = F.MODULUS
G = F.GENERATOR


@pytest.fixture
def pyrng() -> random.Random:
    seed = int(os.environ.get("WORKBENCH_TEST_SEED", secrets.randbits(64)))
    print(f"random seed {seed} (rerun with WORKBENCH_TEST_SEED={seed})")
    return random.Random(seed)


def rand_vector(rng: random.Random, n: int) -> list[int]:
    special = [0, 1, R - 1, R - 2]
    return [rng.choice(special) if rng.random() < 0.1 else rng.randrange(R) for _ in range(n)]


def evaluate(coeffs: list[int], point: int) -> int:
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * point + c) % R
    return acc


def root(log2: int) -> int:
    return pow(G, (R - 1) >> log2, R)


def naive_dft(values: list[int], w: int) -> list[int]:
    n = len(values)
    return [evaluate(values, pow(w, j, R)) for j in range(n)]


def naive_interpolate(values: list[int], log2: int) -> list[int]:
    n_inv = pow(1 << log2, -1, R)
    return [v * n_inv % R for v in naive_dft(values, pow(root(log2), -1, R))]


def poly_mul(a: list[int], b: list[int]) -> list[int]:
    out = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] = (out[i + j] + x * y) % R
    return out


@pytest.mark.parametrize("bad", [0, 29, -1, 40, 2.0, True, "3"])
def test_domain_rejects_sizes_outside_range(bad: object) -> None:
    with pytest.raises(ValueError, match=r"\[1, 28\]"):
        N.Domain(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("log2", [1, 2, 10, 28])
def test_domain_constants(log2: int) -> None:
    d = N.Domain(log2)
    n = d.size
    assert n == 1 << log2
    assert pow(d.omega, n, R) == 1 and pow(d.omega, n // 2, R) == R - 1  # exact order n
    assert d.omega * d.omega_inv % R == 1 and n * d.n_inv % R == 1
    assert d.shift == 7 and d.shift * d.shift_inv % R == 1
    assert d.z_on_coset == (pow(7, n, R) - 1) % R != 0
    assert d.z_on_coset * d.z_on_coset_inv % R == 1


def test_tables_are_cached_and_read_only() -> None:
    a, b = N.Domain(6), N.Domain(6)
    assert a.twiddles is b.twiddles and a.bit_reversal is b.bit_reversal
    assert N.Domain(np.int64(6)).size == 64
    assert not a.twiddles.flags.writeable
    assert sorted(a.bit_reversal.tolist()) == list(range(64))
    assert a.bit_reversal[1] == 32 and a.bit_reversal[6] == 24


@pytest.mark.parametrize("log2", range(1, 7))
def test_ntt_matches_naive_dft(pyrng: random.Random, log2: int) -> None:
    d = N.Domain(log2)
    xs = rand_vector(pyrng, d.size)
    x = F.to_mont(xs)
    assert F.from_mont(N.ntt(x, d)) == naive_dft(xs, d.omega)
    assert F.from_mont(N.intt(x, d)) == naive_interpolate(xs, log2)
    points = [G * pow(d.omega, j, R) % R for j in range(d.size)]
    assert F.from_mont(N.coset_ntt(x, d)) == [evaluate(xs, p) for p in points]
    # coset_intt inverts evaluation on g·H
    assert F.from_mont(N.coset_intt(F.to_mont([evaluate(xs, p) for p in points]), d)) == xs


def test_ntt_of_special_vectors() -> None:
    d = N.Domain(4)
    delta = [0] * 16
    delta[1] = 1  # the polynomial X: its evaluations are the powers of omega
    assert F.from_mont(N.ntt(F.to_mont(delta), d)) == [pow(d.omega, j, R) for j in range(16)]
    ones = F.to_mont([1] * 16)
    assert F.from_mont(N.intt(ones, d)) == [1] + [0] * 15
    assert F.from_mont(N.ntt(F.to_mont([0] * 16), d)) == [0] * 16


@pytest.mark.parametrize("log2", [3, 5, 6])
def test_ntt_with_many_chunks_per_stage(pyrng: random.Random, monkeypatch: pytest.MonkeyPatch,
                                        log2: int) -> None:
    # Tiny chunks send every stage of a small transform through the multi-chunk paths
    # (twiddles repeated inside a chunk, and one twiddle per chunk).
    monkeypatch.setattr(F, "CHUNK", 4)
    d = N.Domain(log2)
    xs = rand_vector(pyrng, d.size)
    x = F.to_mont(xs)
    assert F.from_mont(N.ntt(x, d)) == naive_dft(xs, d.omega)
    points = [G * pow(d.omega, j, R) % R for j in range(d.size)]
    assert F.from_mont(N.coset_ntt(x, d)) == [evaluate(xs, p) for p in points]
    np.testing.assert_array_equal(N.intt(N.ntt(x, d), d), x)


@pytest.mark.parametrize("log2", [10, 16])
def test_large_transforms(pyrng: random.Random, log2: int) -> None:
    d = N.Domain(log2)
    xs = rand_vector(pyrng, d.size)
    x = F.to_mont(xs)
    y = N.ntt(x, d)
    got = F.from_mont(y)
    for j in [0, 1, d.size // 2, d.size - 1, *pyrng.sample(range(d.size), 3)]:
        assert got[j] == evaluate(xs, pow(d.omega, j, R)), j
    np.testing.assert_array_equal(N.intt(y, d), x)
    np.testing.assert_array_equal(N.coset_intt(N.coset_ntt(x, d), d), x)


def test_planes_transforms_keep_input_and_allow_out_aliasing(pyrng: random.Random) -> None:
    d = N.Domain(7)
    x = F.to_planes(F.to_mont(rand_vector(pyrng, d.size)))
    keep = x.copy()
    y = N.pntt(x, d)
    np.testing.assert_array_equal(x, keep)
    inplace = x.copy()
    assert N.pcoset_ntt(N.pintt(inplace, d, out=inplace), d, out=inplace) is inplace
    expected = N.pcoset_ntt(N.pintt(x, d), d)
    np.testing.assert_array_equal(inplace, expected)
    np.testing.assert_array_equal(N.pintt(y, d, out=y), x)
    with pytest.raises(ValueError):
        N.pntt(x[:, :64], d)
    with pytest.raises(ValueError):
        N.ntt(F.to_mont([1, 2, 3]), d)


@pytest.mark.parametrize("log2", range(2, 9))
def test_compute_h_matches_reference(pyrng: random.Random, log2: int) -> None:
    d = N.Domain(log2)
    n = d.size
    a, b = rand_vector(pyrng, n), rand_vector(pyrng, n)
    c = [x * y % R for x, y in zip(a, b, strict=True)]
    h = F.from_mont(N.compute_h(F.to_mont(a), F.to_mont(b), F.to_mont(c), d))
    assert h == N.h_reference(a, b, c, log2)
    assert h[n - 1] == 0
    # c != a·b: the quotient is still what a coset-evaluating prover gets.
    c2 = rand_vector(pyrng, n)
    h2 = F.from_mont(N.compute_h(F.to_mont(a), F.to_mont(b), F.to_mont(c2), d))
    assert h2 == N.h_reference(a, b, c2, log2)
    assert h2 != h


@pytest.mark.parametrize("log2", [2, 5])
def test_reference_quotient_is_exact_when_divisible(pyrng: random.Random, log2: int) -> None:
    n = 1 << log2
    a, b = rand_vector(pyrng, n), rand_vector(pyrng, n)
    c = [x * y % R for x, y in zip(a, b, strict=True)]
    pa, pb, pc = (naive_interpolate(v, log2) for v in (a, b, c))
    numerator = poly_mul(pa, pb)
    for i, v in enumerate(pc):
        numerator[i] = (numerator[i] - v) % R
    h = N.h_reference(a, b, c, log2)
    z = [R - 1] + [0] * (n - 1) + [1]  # X^n - 1
    product = poly_mul(h, z)
    assert product[: len(numerator)] == numerator and not any(product[len(numerator):])


def test_reference_matches_quotient_on_coset(pyrng: random.Random) -> None:
    log2, n = 3, 8
    a, b, c = (rand_vector(pyrng, n) for _ in range(3))
    pa, pb, pc = (naive_interpolate(v, log2) for v in (a, b, c))
    h = N.h_reference(a, b, c, log2)
    z_inv = pow(pow(G, n, R) - 1, -1, R)
    for j in range(n):
        p = G * pow(root(log2), j, R) % R
        expected = (evaluate(pa, p) * evaluate(pb, p) - evaluate(pc, p)) * z_inv % R
        assert evaluate(h, p) == expected


def test_compute_h_of_constant_inputs() -> None:
    d = N.Domain(4)
    zero, one = F.to_mont([0] * 16), F.to_mont([1] * 16)
    assert F.from_mont(N.compute_h(zero, zero, zero, d)) == [0] * 16
    assert F.from_mont(N.compute_h(one, one, one, d)) == [0] * 16
    # A = B = 1, C = 0: h = 1/Z on the coset, a constant.
    assert F.from_mont(N.compute_h(one, one, zero, d)) == [d.z_on_coset_inv] + [0] * 15


def test_compute_h_runs_exactly_seven_transforms(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real: Callable[..., np.ndarray] = N._dif

    def counting(*args: object, **kwargs: object) -> np.ndarray:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(N, "_dif", counting)
    d = N.Domain(5)
    x = F.to_mont(list(range(32)))
    N.compute_h(x, x, x, d)
    assert len(calls) == N.NTTS_PER_H == 7


def test_compute_h_from_several_threads(pyrng: random.Random) -> None:
    d = N.Domain(11)
    rng = np.random.default_rng(pyrng.randrange(2**63))
    jobs = []
    for _ in range(3):
        a, b = F.random_elements(rng, d.size), F.random_elements(rng, d.size)
        jobs.append((a, b, F.mul(a, b)))
    expected = [N.compute_h(*job, d) for job in jobs]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = N.compute_h(*jobs[i], d)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, h in enumerate(expected):
        np.testing.assert_array_equal(results[i], h)
        assert F.is_zero(h[-1:]).all()
