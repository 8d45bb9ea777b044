"""Vectorised arithmetic in the BLS12-381 scalar field Fr, in pure numpy.

Two layouts hold the same Montgomery value x*2^256 mod r, fully reduced:

* limbs (the exchange format other modules and GPU kernels read): uint64 array (n, 4),
  little-endian 64-bit limbs, 32 bytes per element.
* planes (the working format): int64 array (9, n), nine 29-bit limbs, one row per limb.
  29-bit limb products are < 2^58, so the nine products of a column plus the nine
  reduction terms add up below 2^63 without any hi/lo splitting, and every step is one
  ufunc over whole rows. Limbs are signed so borrows and carries use arithmetic shifts.
  Every planes function returns normalised values (each limb in [0, 2^29), value < r)
  and expects the same of its inputs.

Converting between the two is a bit repack, so a caller doing many operations (an NTT,
witness synthesis) converts once and stays in planes. Vectors are processed in chunks that
fit in the core's cache, with per-thread scratch, so concurrent callers do not interfere and
each ufunc call releases the GIL for a long stretch.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

Limbs = npt.NDArray[np.uint64]
Planes = npt.NDArray[np.int64]

MODULUS = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
LIMBS = 4
BYTES_PER_ELEMENT = 32
GENERATOR = 7
TWO_ADICITY = 32

PLANE_BITS = 29
PLANE_LIMBS = 9
# Elements per chunk of every planes kernel: each ufunc call costs about 1.5 us of fixed
# overhead, and a mul makes ~130 of them, so chunks are as long as the cache allows.
CHUNK = 8192
# Elements converted limbs<->planes at a time by the limbs-format functions.
BLOCK = 16384

_MASK = (1 << PLANE_BITS) - 1
_R_MOD = (1 << 256) % MODULUS
_R2_MOD = (1 << 512) % MODULUS


def _int_to_limbs(v: int) -> Limbs:
    return np.array([(v >> (64 * q)) & (2**64 - 1) for q in range(LIMBS)], dtype=np.uint64)


def _int_to_column(v: int) -> Planes:
    """Plane column of the integer v itself (no Montgomery factor), v < 2^261."""
    return np.array([[(v >> (PLANE_BITS * j)) & _MASK] for j in range(PLANE_LIMBS)], np.int64)


MONT_ONE: Limbs = _int_to_limbs(_R_MOD)
MONT_ONE.flags.writeable = False
_MOD_LIMBS = _int_to_limbs(MODULUS)
_P_COL = _int_to_column(MODULUS)
# r = 1 mod 2^32, so -r^-1 mod 2^29 is -1: the reduction digit is just -t mod 2^29.
assert MODULUS & _MASK == 1

# Where each 29-bit plane comes from in the 64-bit limbs, and the reverse.
_SPLIT = [(j, *divmod(PLANE_BITS * j, 64)) for j in range(PLANE_LIMBS)]
_JOIN = [
    [(j, PLANE_BITS * j - 64 * q) for j in range(PLANE_LIMBS)
     if PLANE_BITS * j < 64 * q + 64 and PLANE_BITS * j + PLANE_BITS > 64 * q]
    for q in range(LIMBS)
]


# ---------------------------------------------------------------- scalar helpers

def pow_int(x: int, e: int) -> int:
    """x^e mod r with Python ints; a negative e inverts first."""
    if e < 0:
        return pow(inv_int(x), -e, MODULUS)
    return pow(x % MODULUS, e, MODULUS)


def inv_int(x: int) -> int:
    """x^-1 mod r; ZeroDivisionError for x = 0 mod r."""
    if x % MODULUS == 0:
        raise ZeroDivisionError("0 has no inverse in Fr")
    return pow(x % MODULUS, -1, MODULUS)


# ---------------------------------------------------------------- planes kernels
# A kernel handles one chunk of at most CHUNK elements; operands are (9, m) or (9, 1).

class _Scratch:
    def __init__(self) -> None:
        c = CHUNK
        self.t = np.empty((2 * PLANE_LIMBS - 1, c), np.int64)
        self.tmp = np.empty((PLANE_LIMBS - 1, c), np.int64)
        self.pair = np.empty((PLANE_LIMBS, 2, c), np.int64)
        self.carry = np.empty((2, c), np.int64)
        self.digit = np.empty(c, np.int64)
        self.mult = np.empty((PLANE_LIMBS, c), np.int64)
        self.aux = np.empty((PLANE_LIMBS, c), np.int64)


_TLS = threading.local()


def _scratch() -> _Scratch:
    s: _Scratch | None = getattr(_TLS, "scratch", None)
    if s is None:
        s = _TLS.scratch = _Scratch()
    return s


def _k_finish(pair: Planes, out: Planes, s: _Scratch) -> None:
    """pair[:, 0] = x, pair[:, 1] = x - r, limbs unnormalised; out = the one in [0, r)."""
    m = out.shape[1]
    carry = s.carry[:, :m]
    for i in range(PLANE_LIMBS - 1):
        np.right_shift(pair[i], PLANE_BITS, out=carry)
        np.bitwise_and(pair[i], _MASK, out=pair[i])
        np.add(pair[i + 1], carry, out=pair[i + 1])
    # With the lower limbs normalised the top limb carries the sign: all ones when x < r.
    # A branch-free bit select; a masked copy (copyto where=) is several times slower.
    keep = carry[0]
    np.right_shift(pair[-1, 1], 63, out=keep)
    hi, lo = pair[:, 0], pair[:, 1]
    np.bitwise_xor(hi, lo, out=hi)
    np.bitwise_and(hi, keep, out=hi)
    np.bitwise_xor(hi, lo, out=out)


def _k_add(a: Planes, b: Planes, out: Planes, s: _Scratch) -> None:
    pair = s.pair[:, :, : out.shape[1]]
    np.add(a, b, out=pair[:, 0])
    np.subtract(pair[:, 0], _P_COL, out=pair[:, 1])
    _k_finish(pair, out, s)


def _k_sub(a: Planes, b: Planes, out: Planes, s: _Scratch) -> None:
    pair = s.pair[:, :, : out.shape[1]]
    np.subtract(a, b, out=pair[:, 1])
    np.add(pair[:, 1], _P_COL, out=pair[:, 0])
    _k_finish(pair, out, s)


def _k_prescale(b: Planes, out: Planes, tmp: Planes) -> None:
    """out = 32*b as an exact integer (not reduced), limbs normalised."""
    np.right_shift(b[:-1], PLANE_BITS - 5, out=tmp)
    np.left_shift(b, 5, out=out)
    np.bitwise_and(out[:-1], _MASK, out=out[:-1])
    np.add(out[1:], tmp, out=out[1:])


def _k_mul(a: Planes, b32: Planes, out: Planes, s: _Scratch) -> None:
    """out = a*b/2^256 mod r where b32 = 32*b, i.e. a*b32/2^261: REDC over nine 29-bit
    digits divides by 2^261, and the prescaled operand turns that into the 2^256 of the
    limbs format. Needs a*b < 2^256*r, which any a < 2^256 with b < r satisfies."""
    m = out.shape[1]
    t = s.t[:, :m]
    tmp = s.tmp[:, :m]
    digit = s.digit[:m]
    cy = s.carry[0, :m]
    top = PLANE_LIMBS - 1
    np.multiply(b32, a[0], out=t[:PLANE_LIMBS])
    for i in range(1, PLANE_LIMBS):
        np.multiply(b32[:top], a[i], out=tmp)
        np.add(t[i : i + top], tmp, out=t[i : i + top])
        np.multiply(b32[top], a[i], out=t[i + top])
    pair = s.pair[:, :, :m]
    for i in range(PLANE_LIMBS):
        ti = t[i]
        np.negative(ti, out=digit)
        np.bitwise_and(digit, _MASK, out=digit)
        # t_i + digit*r_0 (r_0 = 1) is the next multiple of 2^29, so its carry is ceil(t_i/2^29).
        np.add(ti, _MASK, out=cy)
        np.right_shift(cy, PLANE_BITS, out=cy)
        np.multiply(_P_COL[1:], digit, out=tmp)
        # The last step leaves the quotient (< 2r, unnormalised, ninth limb 0) where
        # _k_finish wants it instead of copying it there.
        dst = t[i + 1 : i + PLANE_LIMBS] if i < top else pair[:top, 0]
        np.add(t[i + 1 : i + PLANE_LIMBS], tmp, out=dst)
        np.add(dst[0], cy, out=dst[0])
    pair[top, 0].fill(0)
    np.subtract(pair[:top, 0], _P_COL[:top], out=pair[:top, 1])
    pair[top, 1].fill(-int(_P_COL[top, 0]))
    _k_finish(pair, out, s)


# ---------------------------------------------------------------- planes API

def _as_planes(x: npt.ArrayLike) -> Planes:
    arr = np.asarray(x)
    if arr.dtype != np.int64 or arr.shape[:1] != (PLANE_LIMBS,) or arr.ndim not in (1, 2):
        raise ValueError(f"expected an int64 planes array of shape (9, n), got "
                         f"{arr.dtype} {arr.shape}")
    return arr.reshape(PLANE_LIMBS, -1) if arr.ndim == 1 else arr


def _planes_out(out: Planes | None, *xs: Planes) -> Planes:
    widths = {x.shape[1] for x in xs} - {1}
    if len(widths) > 1:
        raise ValueError(f"cannot broadcast planes of widths {sorted(widths)}")
    n = widths.pop() if widths else 1
    if out is None:
        return np.empty((PLANE_LIMBS, n), np.int64)
    if out.shape != (PLANE_LIMBS, n) or out.dtype != np.int64:
        raise ValueError(f"out must be int64 of shape (9, {n}), got {out.dtype} {out.shape}")
    return out


def _chunks(n: int) -> Iterator[slice]:
    for lo in range(0, n, CHUNK):
        yield slice(lo, min(n, lo + CHUNK))


def _part(x: Planes, sl: slice) -> Planes:
    return x if x.shape[1] == 1 else x[:, sl]


def _binary(kernel: Callable[[Planes, Planes, Planes, _Scratch], None],
            a: npt.ArrayLike, b: npt.ArrayLike, out: Planes | None) -> Planes:
    pa, pb = _as_planes(a), _as_planes(b)
    res = _planes_out(out, pa, pb)
    s = _scratch()
    for sl in _chunks(res.shape[1]):
        kernel(_part(pa, sl), _part(pb, sl), res[:, sl], s)
    return res


def padd(a: Planes, b: Planes, out: Planes | None = None) -> Planes:
    """a + b. Operands are (9, n) or (9, 1); out may be one of them."""
    return _binary(_k_add, a, b, out)


def psub(a: Planes, b: Planes, out: Planes | None = None) -> Planes:
    """a - b."""
    return _binary(_k_sub, a, b, out)


def pneg(a: Planes, out: Planes | None = None) -> Planes:
    """-a."""
    return _binary(_k_sub, np.zeros((PLANE_LIMBS, 1), np.int64), a, out)


def prepare_multiplier(b: Planes) -> Planes:
    """The form of b that pmul_prepared takes (32*b, unreduced); build it once for a vector or
    constant that multiplies many times, such as twiddles."""
    pb = _as_planes(b)
    res = np.empty_like(pb, order="C")
    for sl in _chunks(pb.shape[1]):
        _k_prescale(pb[:, sl], res[:, sl], np.empty((PLANE_LIMBS - 1, sl.stop - sl.start),
                                                     np.int64))
    return res


def pmul_prepared(a: Planes, b32: Planes, out: Planes | None = None) -> Planes:
    """a * b where b32 = prepare_multiplier(b)."""
    return _binary(_k_mul, a, b32, out)


def pmul(a: Planes, b: Planes, out: Planes | None = None) -> Planes:
    """a * b (Montgomery product)."""
    pa, pb = _as_planes(a), _as_planes(b)
    if pa.shape[1] == 1 or pb.shape[1] == 1:
        var, const = (pa, pb) if pb.shape[1] == 1 else (pb, pa)
        return pmul_prepared(var, prepare_multiplier(const), out)
    res = _planes_out(out, pa, pb)
    s = _scratch()
    for sl in _chunks(res.shape[1]):
        mult = s.mult[:, : sl.stop - sl.start]
        _k_prescale(pb[:, sl], mult, s.tmp[:, : sl.stop - sl.start])
        _k_mul(pa[:, sl], mult, res[:, sl], s)
    return res


def psquare(a: Planes, out: Planes | None = None) -> Planes:
    """a^2."""
    return pmul(a, a, out)


def pmul_sub(a: Planes, b: Planes, c: Planes, out: Planes | None = None) -> Planes:
    """a*b - c in one pass over each chunk."""
    pa, pb, pc = _as_planes(a), _as_planes(b), _as_planes(c)
    res = _planes_out(out, pa, pb, pc)
    s = _scratch()
    b_const = prepare_multiplier(pb) if pb.shape[1] == 1 else None
    for sl in _chunks(res.shape[1]):
        m = sl.stop - sl.start
        if b_const is None:
            mult = s.mult[:, :m]
            _k_prescale(pb[:, sl], mult, s.tmp[:, :m])
        else:
            mult = b_const
        prod = s.aux[:, :m]
        _k_mul(_part(pa, sl), mult, prod, s)
        _k_sub(prod, _part(pc, sl), res[:, sl], s)
    return res


def pconst(k: int) -> Planes:
    """(9, 1) planes of the field element k (any int, taken mod r)."""
    return _int_to_column(k % MODULUS * _R_MOD % MODULUS)


def pscale(a: Planes, k: int, out: Planes | None = None) -> Planes:
    """a * k for a Python int k (taken mod r)."""
    return pmul_prepared(a, prepare_multiplier(pconst(k)), out)


def ppowers(base: int, count: int, first: int = 1) -> Planes:
    """Planes of first*base^i for i < count, by doubling a prefix: O(log count) vector ops."""
    res = np.empty((PLANE_LIMBS, count), np.int64)
    if count == 0:
        return res
    res[:, :1] = pconst(first)
    filled = 1
    while filled < count:
        step = min(filled, count - filled)
        mult = prepare_multiplier(pconst(pow_int(base, filled)))
        pmul_prepared(res[:, :step], mult, out=res[:, filled : filled + step])
        filled += step
    return res


def to_planes(x: Limbs, out: Planes | None = None) -> Planes:
    """Repack limbs (n, 4) or (4,) into planes (9, n). Values must be < 2^256 (a reduced
    element always is); planes ops other than the canonical conversions also need < r."""
    x2 = _as_limbs(x).reshape(-1, LIMBS)
    n = x2.shape[0]
    res = np.empty((PLANE_LIMBS, n), np.int64) if out is None else out
    if res.shape != (PLANE_LIMBS, n) or res.dtype != np.int64:
        raise ValueError(f"out must be int64 of shape (9, {n})")
    rv = res.view(np.uint64)
    tmp = np.empty(n, np.uint64)
    for j, q, sh in _SPLIT:
        np.right_shift(x2[:, q], sh, out=rv[j])
        if sh > 64 - PLANE_BITS and q + 1 < LIMBS:
            np.left_shift(x2[:, q + 1], 64 - sh, out=tmp)
            np.bitwise_or(rv[j], tmp, out=rv[j])
        np.bitwise_and(rv[j], _MASK, out=rv[j])
    return res


def from_planes(p: Planes, out: Limbs | None = None) -> Limbs:
    """Repack normalised planes (9, n) into limbs (n, 4)."""
    pl = _as_planes(p)
    n = pl.shape[1]
    res = np.empty((n, LIMBS), np.uint64) if out is None else out
    if res.shape != (n, LIMBS) or res.dtype != np.uint64:
        raise ValueError(f"out must be uint64 of shape ({n}, 4)")
    pv = pl.view(np.uint64)
    tmp = np.empty(n, np.uint64)
    for q, parts in enumerate(_JOIN):
        col = res[:, q]
        for idx, (j, sh) in enumerate(parts):
            dst = col if idx == 0 else tmp
            if sh >= 0:
                np.left_shift(pv[j], sh, out=dst)  # bits past 64 belong to the next limb
            else:
                np.right_shift(pv[j], -sh, out=dst)
            if idx:
                np.bitwise_or(col, tmp, out=col)
    return res


# ---------------------------------------------------------------- limbs API

def _as_limbs(x: npt.ArrayLike) -> Limbs:
    arr = np.asarray(x)
    if arr.dtype != np.uint64 or arr.ndim not in (1, 2) or arr.shape[-1] != LIMBS:
        raise ValueError(f"expected a uint64 limbs array of shape (n, 4) or (4,), got "
                         f"{arr.dtype} {arr.shape}")
    return arr


def _apply(fn: Callable[..., Planes], out: Limbs | None, *xs: npt.ArrayLike) -> Limbs:
    """Run a planes function over limbs operands block by block; (4,)/(1, 4) broadcast."""
    arrs = [_as_limbs(x) for x in xs]
    shape = np.broadcast_shapes(*(a.shape for a in arrs))
    if out is None:
        out = np.empty(shape, np.uint64)
    elif out.shape != shape or out.dtype != np.uint64 or not out.flags.c_contiguous:
        raise ValueError(f"out must be C-contiguous uint64 of shape {shape}")
    flat = out.reshape(-1, LIMBS)
    n = flat.shape[0]
    views = [a.reshape(-1, LIMBS) for a in arrs]
    fixed = [to_planes(v) if v.shape[0] == 1 else None for v in views]
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        args = [f if f is not None else to_planes(v[lo:hi]) for f, v in zip(fixed, views,
                                                                                strict=True)]
        from_planes(fn(*args), out=flat[lo:hi])
    return out


def add(a: Limbs, b: Limbs, out: Limbs | None = None) -> Limbs:
    """a + b on limbs; a single element (4,) or (1, 4) broadcasts. out may alias an input."""
    return _apply(padd, out, a, b)


def sub(a: Limbs, b: Limbs, out: Limbs | None = None) -> Limbs:
    """a - b."""
    return _apply(psub, out, a, b)


def neg(a: Limbs, out: Limbs | None = None) -> Limbs:
    """-a."""
    return _apply(pneg, out, a)


def mul(a: Limbs, b: Limbs, out: Limbs | None = None) -> Limbs:
    """a * b."""
    return _apply(pmul, out, a, b)


def square(a: Limbs, out: Limbs | None = None) -> Limbs:
    """a^2."""
    return _apply(psquare, out, a)


def mul_sub(a: Limbs, b: Limbs, c: Limbs, out: Limbs | None = None) -> Limbs:
    """a*b - c."""
    return _apply(pmul_sub, out, a, b, c)


def scale(a: Limbs, k: int, out: Limbs | None = None) -> Limbs:
    """a * k for a Python int k (negative allowed: k is taken mod r)."""
    mult = prepare_multiplier(pconst(operator.index(k)))
    return _apply(lambda p: pmul_prepared(p, mult), out, a)


def mul_scalar_vector(s: Limbs, v: Limbs, out: Limbs | None = None) -> Limbs:
    """s * v for one element s ((4,) or (1, 4)) and a vector v."""
    if _as_limbs(s).size != LIMBS:
        raise ValueError("s must be a single element")
    return _apply(pmul, out, v, s)


_TO_MONT = prepare_multiplier(_int_to_column(_R2_MOD))
_FROM_MONT = prepare_multiplier(_int_to_column(1))


def canonical_to_mont(x: Limbs, out: Limbs | None = None) -> Limbs:
    """Canonical integers (limbs, any 256-bit value) to Montgomery limbs. Policy: an input
    >= r is reduced mod r, never rejected."""
    return _apply(lambda p: pmul_prepared(p, _TO_MONT), out, x)


def mont_to_canonical(x: Limbs, out: Limbs | None = None) -> Limbs:
    """Montgomery limbs to canonical integers in [0, r) (an unreduced input is reduced)."""
    return _apply(lambda p: pmul_prepared(p, _FROM_MONT), out, x)


def to_mont(values: Sequence[int] | npt.NDArray[np.integer]) -> Limbs:
    """Python ints (any value >= 0, reduced mod r) to Montgomery limbs (n, 4)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        if values.ndim != 1:
            raise ValueError("to_mont takes a 1-D sequence of integers")
        if values.dtype.kind == "i" and bool((values < 0).any()):
            raise ValueError("negative value: to_mont takes integers >= 0")
        canon = np.zeros((values.shape[0], LIMBS), np.uint64)
        canon[:, 0] = values
        return canonical_to_mont(canon)
    ints = [operator.index(v) for v in (values.tolist() if isinstance(values, np.ndarray)
                                        else values)]
    if any(v < 0 for v in ints):
        raise ValueError("negative value: to_mont takes integers >= 0")
    raw = b"".join((v % MODULUS * _R_MOD % MODULUS).to_bytes(32, "little") for v in ints)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(len(ints), LIMBS)


def from_mont(x: Limbs) -> list[int]:
    """Montgomery limbs to canonical Python ints."""
    raw = mont_to_canonical(x).astype("<u8").tobytes()
    return [int.from_bytes(raw[i : i + 32], "little") for i in range(0, len(raw), 32)]


def is_reduced(x: Limbs) -> npt.NDArray[np.bool_]:
    """Per element: value < r (the limbs format requires it)."""
    arr = _as_limbs(x)
    lt = np.zeros(arr.shape[:-1], np.bool_)
    eq = np.ones(arr.shape[:-1], np.bool_)
    for q in reversed(range(LIMBS)):
        lt |= eq & (arr[..., q] < _MOD_LIMBS[q])
        eq &= arr[..., q] == _MOD_LIMBS[q]
    return lt


def is_zero(x: Limbs) -> npt.NDArray[np.bool_]:
    """Per element: x == 0."""
    return np.asarray((_as_limbs(x) == 0).all(axis=-1))


def is_one(x: Limbs) -> npt.NDArray[np.bool_]:
    """Per element: x == 1 (limbs equal MONT_ONE)."""
    return np.asarray((_as_limbs(x) == MONT_ONE).all(axis=-1))


def random_elements(rng: np.random.Generator, n: int) -> Limbs:
    """n independent uniform elements of Fr as Montgomery limbs (uniform < r by rejection)."""
    res = np.empty((n, LIMBS), np.uint64)
    todo = np.arange(n)
    while todo.size:
        draw = rng.integers(0, 2**64, size=(todo.size, LIMBS), dtype=np.uint64)
        draw[:, -1] &= np.uint64(2**63 - 1)
        ok = is_reduced(draw)
        res[todo[ok]] = draw[ok]
        todo = todo[~ok]
    return res
