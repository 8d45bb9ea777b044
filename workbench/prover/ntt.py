"""Radix-2 NTTs over Fr on the planes layout, and the Groth16 quotient h = (A·B − C)/Z.

The transform is a decimation-in-frequency NTT in constant geometry: every stage pairs
element p with p + n/2 and writes the two results to 2p and 2p + 1. Both halves are read
as contiguous rows and the outputs are long stride-2 rows, so no stage ever runs a ufunc
over tiny inner dimensions, which is what makes the in-place Cooley-Tukey indexing slow in
numpy. After log2(n) stages the output is in bit-reversed order; one gather fixes it.

Twiddle, coset and bit-reversal tables are built once per size (with O(log n) vector ops)
and shared by all threads through a locked module-level cache.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from workbench.prover import field
from workbench.prover.field import (
    GENERATOR,
    MODULUS,
    PLANE_LIMBS,
    Limbs,
    Planes,
    from_planes,
    inv_int,
    pbutterfly,
    pconst,
    pmul_prepared,
    pmul_sub,
    ppowers,
    prepare_multiplier,
    to_planes,
)

MIN_LOG2_SIZE = 1
MAX_LOG2_SIZE = 28
NTTS_PER_H = 7


class _Tables:
    """Lazily built per-size tables; the lock makes concurrent first users wait, not race."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, np.ndarray] = {}

    def get(self, name: str, build: Callable[[], np.ndarray]) -> np.ndarray:
        with self._lock:
            item = self._items.get(name)
            if item is None:
                item = build()
                item.flags.writeable = False
                self._items[name] = item
            return item


_CACHE: dict[int, _Tables] = {}
_CACHE_LOCK = threading.Lock()


def clear_cache() -> None:
    """Drop every cached table (they are rebuilt on next use)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _tables(log2_size: int) -> _Tables:
    with _CACHE_LOCK:
        tables = _CACHE.get(log2_size)
        if tables is None:
            tables = _CACHE[log2_size] = _Tables()
        return tables


class Domain:
    """The subgroup H of the 2^k-th roots of unity, and its coset g·H with g = 7."""

    def __init__(self, log2_size: int) -> None:
        try:
            k = -1 if isinstance(log2_size, bool) else operator.index(log2_size)
        except TypeError:
            k = -1
        if not MIN_LOG2_SIZE <= k <= MAX_LOG2_SIZE:
            raise ValueError(f"log2_size must be an integer in [{MIN_LOG2_SIZE}, "
                             f"{MAX_LOG2_SIZE}], got {log2_size!r}")
        self.log2_size = log2_size = k
        self.size = n = 1 << log2_size
        self.omega = pow(GENERATOR, (MODULUS - 1) >> log2_size, MODULUS)
        self.omega_inv = inv_int(self.omega)
        self.n_inv = inv_int(n)
        self.shift = GENERATOR
        self.shift_inv = inv_int(GENERATOR)
        # Z(x) = x^n − 1 takes this one value on the whole coset; g is a non-residue, so it
        # is never 0 for n <= 2^32.
        self.z_on_coset = (pow(GENERATOR, n, MODULUS) - 1) % MODULUS
        self.z_on_coset_inv = inv_int(self.z_on_coset)
        self._tables = _tables(log2_size)

    def __repr__(self) -> str:
        return f"Domain(log2_size={self.log2_size})"

    def _powers(self, name: str, base: int, count: int, first: int = 1) -> Planes:
        return self._tables.get(
            name, lambda: prepare_multiplier(ppowers(base, count, first)))

    @property
    def twiddles(self) -> Planes:
        """omega^i for i < n/2, prepared multipliers."""
        return self._powers("twiddles", self.omega, self.size // 2)

    @property
    def inverse_twiddles(self) -> Planes:
        return self._powers("inverse_twiddles", self.omega_inv, self.size // 2)

    @property
    def bit_reversal(self) -> np.ndarray:
        def build() -> np.ndarray:
            idx = np.arange(self.size, dtype=np.intp)
            rev = np.zeros_like(idx)
            for b in range(self.log2_size):
                rev |= ((idx >> b) & 1) << (self.log2_size - 1 - b)
            return rev
        return self._tables.get("bit_reversal", build)

    def coset_factors(self, name: str) -> Planes:
        """Prepared multiplier vectors for the coset moves, n_inv folded in where useful:
        "shift": g^i; "unshift": g^-i/n; "shift_over_n": g^i/n (intt followed by a coset
        shift); "h": g^-i/(n·Z(g)) (the last step of compute_h)."""
        n = self.size
        first, base = {
            "shift": (1, self.shift),
            "unshift": (self.n_inv, self.shift_inv),
            "shift_over_n": (self.n_inv, self.shift),
            "h": (self.n_inv * self.z_on_coset_inv, self.shift_inv),
        }[name]
        return self._powers("coset_" + name, base, n, first)

    def _constant(self, name: str, value: int) -> Planes:
        return self._tables.get(name, lambda: prepare_multiplier(pconst(value)))


def _stage_twiddles(tw: Planes, stage: int, lo: int, hi: int, buf: Planes) -> Planes:
    """Twiddles of pairs lo..hi at this stage: omega^((p >> stage) << stage)."""
    run = 1 << stage
    if stage == 0:
        return tw[:, lo:hi]
    if run >= hi - lo:  # the whole chunk shares one twiddle
        first = (lo >> stage) << stage
        return tw[:, first : first + 1]
    np.copyto(buf.reshape(PLANE_LIMBS, -1, run), tw[:, lo:hi:run, None])
    return buf


def _dif(x: Planes, tw: Planes, domain: Domain, out: Planes | None = None,
         work: Planes | None = None) -> Planes:
    """Unscaled transform of x (natural order in and out) with twiddles tw; x is kept.
    work, if given, is a (9, n) buffer to use instead of allocating one."""
    k, n = domain.log2_size, domain.size
    half = n // 2
    if out is None:
        out = np.empty((PLANE_LIMBS, n), np.int64)
    # The last stage must land outside out (the closing gather cannot run in place), and no
    # stage may write over x; out serves as the other ping-pong buffer when it can.
    if work is None or np.shares_memory(work, x) or np.shares_memory(work, out):
        work = np.empty((PLANE_LIMBS, n), np.int64)
    last = work
    other = np.empty_like(last) if np.shares_memory(out, x) else out
    width = min(half, field.CHUNK)
    tw_buf = np.empty((PLANE_LIMBS, width), np.int64)
    src = x
    for stage in range(k):
        dst = last if (k - 1 - stage) % 2 == 0 else other
        # Results for pair p go to 2p and 2p + 1: (limb, pair, which) viewed as (limb, which, pair).
        pairs = dst.reshape(PLANE_LIMBS, half, 2).transpose(0, 2, 1)
        for lo in range(0, half, width):
            hi = lo + width
            # Every twiddle of the last stage is 1.
            w = None if stage == k - 1 else _stage_twiddles(tw, stage, lo, hi, tw_buf)
            pbutterfly(src[:, lo:hi], src[:, half + lo : half + hi], w, pairs[:, :, lo:hi])
        src = dst
    np.take(src, domain.bit_reversal, axis=1, out=out, mode="clip")
    return out


def _check_planes(x: Planes, domain: Domain) -> Planes:
    if x.shape != (PLANE_LIMBS, domain.size) or x.dtype != np.int64:
        raise ValueError(f"expected int64 planes of shape (9, {domain.size}), got "
                         f"{x.dtype} {x.shape}")
    return x


def pntt(x: Planes, domain: Domain, out: Planes | None = None) -> Planes:
    """Evaluations on H of the polynomial with coefficients x (planes, natural order)."""
    return _dif(_check_planes(x, domain), domain.twiddles, domain, out)


def pintt(x: Planes, domain: Domain, out: Planes | None = None) -> Planes:
    """Coefficients of the polynomial with evaluations x on H."""
    res = _dif(_check_planes(x, domain), domain.inverse_twiddles, domain, out)
    return pmul_prepared(res, domain._constant("n_inv", domain.n_inv), out=res)


def pcoset_ntt(x: Planes, domain: Domain, out: Planes | None = None) -> Planes:
    """Evaluations on g·H: coefficient i is multiplied by g^i, then an NTT."""
    shifted = pmul_prepared(_check_planes(x, domain), domain.coset_factors("shift"))
    return _dif(shifted, domain.twiddles, domain, out)


def pcoset_intt(x: Planes, domain: Domain, out: Planes | None = None) -> Planes:
    """Coefficients of the polynomial with evaluations x on g·H."""
    res = _dif(_check_planes(x, domain), domain.inverse_twiddles, domain, out)
    return pmul_prepared(res, domain.coset_factors("unshift"), out=res)


def _limbs_transform(fn: Callable[[Planes, Domain], Planes], x: Limbs,
                     domain: Domain) -> Limbs:
    if x.shape != (domain.size, 4):
        raise ValueError(f"expected limbs of shape ({domain.size}, 4), got {x.shape}")
    return from_planes(fn(to_planes(x), domain))


def ntt(x: Limbs, domain: Domain) -> Limbs:
    """Limbs version of pntt."""
    return _limbs_transform(pntt, x, domain)


def intt(x: Limbs, domain: Domain) -> Limbs:
    """Limbs version of pintt."""
    return _limbs_transform(pintt, x, domain)


def coset_ntt(x: Limbs, domain: Domain) -> Limbs:
    """Limbs version of pcoset_ntt."""
    return _limbs_transform(pcoset_ntt, x, domain)


def coset_intt(x: Limbs, domain: Domain) -> Limbs:
    """Limbs version of pcoset_intt."""
    return _limbs_transform(pcoset_intt, x, domain)


# A caller that times compute_h's two stages passes `stage(name)` returning a context
# manager: "forward" (the six forward transforms and the pointwise step), "inverse" (the
# last coset inverse transform).
Stage = Callable[[str], AbstractContextManager[object]]


def pcompute_h(a: Planes, b: Planes, c: Planes, domain: Domain, stage: Stage | None = None) -> Planes:
    """Planes version of compute_h; a, b, c are kept."""
    n = domain.size
    enter = stage or _no_stage
    work, coeffs = np.empty((PLANE_LIMBS, n), np.int64), np.empty((PLANE_LIMBS, n), np.int64)
    with enter("forward"):
        evals = []
        for x in (a, b, c):
            _dif(_check_planes(x, domain), domain.inverse_twiddles, domain, coeffs, work)  # intt
            # The intt's 1/n and the coset shift g^i are one multiplication.
            pmul_prepared(coeffs, domain.coset_factors("shift_over_n"), out=coeffs)
            evals.append(_dif(coeffs, domain.twiddles, domain, work=work))  # coset_ntt
        quotient = pmul_sub(evals[0], evals[1], evals[2], out=evals[0])
    with enter("inverse"):
        h = _dif(quotient, domain.inverse_twiddles, domain, coeffs, work)  # coset_intt
        # coset_intt's g^-i/n and the division by the constant Z(g·w^i) = g^n − 1 in one go.
        return pmul_prepared(h, domain.coset_factors("h"), out=h)


def _no_stage(name: str) -> AbstractContextManager[object]:
    return nullcontext()


def compute_h(a: Limbs, b: Limbs, c: Limbs, domain: Domain, stage: Stage | None = None) -> Limbs:
    """Coefficients of h = (A·B − C)/Z from the evaluations a, b, c of A, B, C on H, exactly
    as a GPU prover does it: 3 intt, 3 coset_ntt, a pointwise product on g·H, 1 coset_intt
    (NTTS_PER_H transforms). When a·b = c on H, Z divides A·B − C and h[n-1] = 0; otherwise
    h is the degree < n polynomial matching (A·B − C)/Z on g·H (see h_reference)."""
    for x in (a, b, c):
        if x.shape != (domain.size, 4):
            raise ValueError(f"expected limbs of shape ({domain.size}, 4), got {x.shape}")
    return from_planes(pcompute_h(to_planes(a), to_planes(b), to_planes(c), domain, stage))


def h_reference(a_ints: Sequence[int], b_ints: Sequence[int], c_ints: Sequence[int],
                log2: int) -> list[int]:
    """What compute_h computes, by another route and with Python ints only (O(n^2); for
    tests): interpolate A, B, C by naive inverse DFT sums, multiply A·B − C out, reduce it
    mod X^n − g^n (on g·H, X^n = g^n) and divide by Z(g·w^i) = g^n − 1."""
    r, n, g = MODULUS, 1 << log2, GENERATOR
    if not len(a_ints) == len(b_ints) == len(c_ints) == n:
        raise ValueError(f"expected {n} values each")
    w_inv = pow(pow(GENERATOR, (r - 1) >> log2, r), -1, r)
    w_pows = [pow(w_inv, e, r) for e in range(n)]
    n_inv = pow(n, -1, r)

    def interpolate(vals: Sequence[int]) -> list[int]:
        return [n_inv * sum(v * w_pows[i * j % n] for i, v in enumerate(vals)) % r
                for j in range(n)]

    pa, pb, pc = interpolate(a_ints), interpolate(b_ints), interpolate(c_ints)
    prod = [0] * (2 * n)
    for i, x in enumerate(pa):
        for j, y in enumerate(pb):
            prod[i + j] += x * y
    g_n = pow(g, n, r)
    z_inv = pow(g_n - 1, -1, r)
    return [(prod[j] - pc[j] + g_n * prod[j + n]) * z_inv % r for j in range(n)]
