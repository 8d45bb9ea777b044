"""Vectorised arithmetic in the BLS12-381 scalar field Fr, in pure numpy.

Two layouts hold the same Montgomery value x*2^256 mod r, fully reduced:

* limbs (the exchange format other modules and GPU kernels read): uint64 array (n, 4),
  little-endian 64-bit limbs, 32 bytes per element.
* planes (the working format): int64 array (9, n), nine 29-bit limbs, one row per limb.
  29-bit limb products are < 2^58, so the nine products of a column plus the nine
  reduction terms add up below 2^63 without any hi/lo splitting, and every step is one
  ufunc over whole rows. Limbs are signed so borrows and carries are arithmetic shifts.
  Every planes function returns normalised values (each limb in [0, 2^29), value < r)
  and expects the same of its inputs.

Converting between the two is a bit repack, so a caller doing many operations (an NTT,
witness synthesis) converts once and stays in planes. Work runs in chunks through
per-thread scratch: concurrent callers do not interfere, kernels allocate nothing, and
each ufunc call runs long enough with the GIL released for threads to overlap.
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
# Elements per chunk of every planes kernel. A multiplication makes about 95 ufunc calls,
# and every call drops and retakes the interpreter lock: with a dozen threads and one of them
# running Python, each retake can wait a whole switch interval. At 8192 (the fastest for one
# thread alone) a 2^21 synthesis took 15 s beside one busy Python thread instead of 1.6 s;
# at 65536 it took 4.5 s and alone it is as fast (1.4 s on the 2-core development box).
CHUNK = 65536
# Elements repacked limbs<->planes at a time, through per-thread buffers: a fresh large
# temporary costs more in first-touch page faults than the repack itself.
BLOCK = 65536

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

# Repacking 64-bit limbs <-> 29-bit planes with a few whole-array ops. Plane j is limb
# j*29 // 64 shifted right, OR the next limb shifted left (row 4 is a zero row for planes
# that do not straddle two limbs).
_SPLIT_LO = np.array([PLANE_BITS * j // 64 for j in range(PLANE_LIMBS)], np.intp)
_SPLIT_RSH = np.array([[PLANE_BITS * j % 64] for j in range(PLANE_LIMBS)], np.uint64)
_SPLIT_HI = np.array([q + 1 if s + PLANE_BITS > 64 else LIMBS
                      for q, s in zip(_SPLIT_LO.tolist(), _SPLIT_RSH[:, 0].tolist(),
                                      strict=True)], np.intp)
_SPLIT_LSH = np.minimum(64 - _SPLIT_RSH, 63).astype(np.uint64)
# Limb q is the OR of the planes overlapping it, each shifted into place.
_JOIN = [(q, j, PLANE_BITS * j - 64 * q) for q in range(LIMBS) for j in range(PLANE_LIMBS)
         if PLANE_BITS * j < 64 * q + 64 and PLANE_BITS * j + PLANE_BITS > 64 * q]
_JOIN_PLANE = np.array([j for _, j, _ in _JOIN], np.intp)
_JOIN_RSH = np.array([[max(-sh, 0)] for _, _, sh in _JOIN], np.uint64)
_JOIN_LSH = np.array([[max(sh, 0)] for _, _, sh in _JOIN], np.uint64)
assert [q for q, _, _ in _JOIN] == [q for q in range(LIMBS) for _ in range(3)]


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

_I29 = np.int64(PLANE_BITS)
_I63 = np.int64(63)
_IMASK = np.int64(_MASK)
_P_TAIL = np.ascontiguousarray(_P_COL[1:])  # limbs 1..8 of r (limb 0 is 1)
_TOP = PLANE_LIMBS - 1


class _Scratch:
    """One thread's buffers for chunks of up to CHUNK elements."""

    def __init__(self) -> None:
        self.size = c = CHUNK
        self.acc = np.empty((2 * PLANE_LIMBS - 1, c), np.int64)
        self.tmp = np.empty((PLANE_LIMBS, c), np.int64)
        # [limb, output, candidate (x or x - r), element]: up to two results finish together.
        self.stack = np.empty((PLANE_LIMBS, 2, 2, c), np.int64)
        self.carry = np.empty((2, 2, c), np.int64)
        self.digit = np.empty(c, np.int64)
        self.cy = np.empty(c, np.int64)
        self.mult = np.empty((PLANE_LIMBS, c), np.int64)
        self.aux = np.empty((PLANE_LIMBS, c), np.int64)
        self._views: dict[int, _Views] = {}

    def views(self, m: int) -> _Views:
        v = self._views.get(m)
        if v is None:
            if len(self._views) > 64:
                self._views.clear()
            v = self._views[m] = _Views(self, m)
        return v


class _Views:
    """Every view a kernel slices, made once per chunk width: Python-level slicing runs with
    the GIL held, and a multiplication issues about a hundred ufunc calls."""

    def __init__(self, s: _Scratch, m: int) -> None:
        acc = s.acc[:, :m]
        self.acc_head, self.acc_tail = acc[:PLANE_LIMBS], acc[PLANE_LIMBS:]
        self.windows = [acc[i : i + PLANE_LIMBS] for i in range(PLANE_LIMBS)]
        self.reduce_windows = [acc[i + 1 : i + PLANE_LIMBS] for i in range(_TOP)]
        self.rows = list(acc)
        self.tmp, self.tmp8 = s.tmp[:, :m], s.tmp[:_TOP, :m]
        self.digit, self.cy = s.digit[:m], s.cy[:m]
        self.mult, self.aux = s.mult[:, :m], s.aux[:, :m]
        self.stacks = [s.stack[:, :k, :, :m] for k in (1, 2)]
        self.stack_rows = [list(st) for st in self.stacks]
        self.carries = [s.carry[:k, :, :m] for k in (1, 2)]
        self.keeps = [s.carry[:k, 0, :m] for k in (1, 2)]
        self.cands = [(st[:, :, 0], st[:, :, 1]) for st in self.stacks]
        self.out_x = [s.stack[:, k, 0, :m] for k in (0, 1)]
        self.out_lo = [s.stack[:, k, 1, :m] for k in (0, 1)]


_TLS = threading.local()


def _scratch() -> _Scratch:
    s: _Scratch | None = getattr(_TLS, "scratch", None)
    if s is None or s.size != CHUNK:
        s = _TLS.scratch = _Scratch()
    return s


def _k_select(v: _Views, count: int, out: Planes) -> None:
    """For each of `count` results held as candidates x and x - r (limbs unnormalised, value
    of x in [0, 2r)): normalise both and write the one in [0, r) to out (9, count, m)."""
    rows, carry = v.stack_rows[count - 1], v.carries[count - 1]
    for i in range(_TOP):
        row, nxt = rows[i], rows[i + 1]
        np.right_shift(row, _I29, carry)
        np.bitwise_and(row, _IMASK, row)
        np.add(nxt, carry, nxt)
    # With the lower limbs normalised the top limb carries the sign: all ones when x < r.
    # A branch-free bit select; a masked copy (copyto where=) is several times slower.
    x, lo = v.cands[count - 1]
    keep = v.keeps[count - 1]
    np.right_shift(lo[_TOP], _I63, keep)
    np.bitwise_xor(x, lo, x)
    np.bitwise_and(x, keep, x)
    np.bitwise_xor(x, lo, out)


def _k_add_into(a: Planes, b: Planes, v: _Views, k: int) -> None:
    x, lo = v.out_x[k], v.out_lo[k]
    np.add(a, b, x)
    np.subtract(x, _P_COL, lo)


def _k_sub_into(a: Planes, b: Planes, v: _Views, k: int) -> None:
    x, lo = v.out_x[k], v.out_lo[k]
    np.subtract(a, b, lo)
    np.add(lo, _P_COL, x)


def _k_prepare(b: Planes, out: Planes, tmp8: Planes) -> None:
    """out = -32*b as an exact integer (not reduced); see _k_mul_into for why."""
    np.right_shift(b[:_TOP], np.int64(PLANE_BITS - 5), tmp8)
    np.left_shift(b, np.int64(5), out)
    np.bitwise_and(out[:_TOP], _IMASK, out[:_TOP])
    np.add(out[1:], tmp8, out[1:])
    np.negative(out, out)


def _k_mul_into(a: Planes, nb32: Planes, v: _Views, k: int) -> None:
    """Candidates for a*b/2^256 mod r into output slot k, where nb32 = -32*b.

    REDC over nine 29-bit digits divides by 2^261; the factor 32 in the multiplier turns
    that into the 2^256 of the limbs format. The accumulator holds -a*b*32 so that the
    reduction digit (-t mod 2^29, as r = 1 mod 2^29) is a plain mask and its carry a plain
    shift. Needs |a limbs| < 2^30 and a*b < 2^256*r; the quotient is then in [0, 2r)."""
    np.multiply(nb32, a[0], v.acc_head)
    v.acc_tail.fill(0)
    tmp = v.tmp
    for i in range(1, PLANE_LIMBS):
        np.multiply(nb32, a[i], tmp)
        win = v.windows[i]
        np.add(win, tmp, win)
    digit, cy, tmp8, rows = v.digit, v.cy, v.tmp8, v.rows
    for i in range(PLANE_LIMBS):
        row = rows[i]
        np.bitwise_and(row, _IMASK, digit)
        np.right_shift(row, _I29, cy)
        np.multiply(_P_TAIL, digit, tmp8)
        if i < _TOP:
            win, nxt = v.reduce_windows[i], rows[i + 1]
            np.subtract(win, tmp8, win)
            np.add(nxt, cy, nxt)
    # Last digit: the quotient is minus the top half, written straight into its slot.
    x, lo = v.out_x[k], v.out_lo[k]
    np.subtract(tmp8, v.acc_tail, x[:_TOP])
    np.subtract(x[0], cy, x[0])
    x[_TOP].fill(0)
    np.subtract(x, _P_COL, lo)


def _k_mul(a: Planes, nb32: Planes, out: Planes, v: _Views) -> None:
    _k_mul_into(a, nb32, v, 0)
    _k_select(v, 1, out[:, None])


def _k_add(a: Planes, b: Planes, out: Planes, v: _Views) -> None:
    _k_add_into(a, b, v, 0)
    _k_select(v, 1, out[:, None])


def _k_sub(a: Planes, b: Planes, out: Planes, v: _Views) -> None:
    _k_sub_into(a, b, v, 0)
    _k_select(v, 1, out[:, None])


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


def _binary(kernel: Callable[[Planes, Planes, Planes, _Views], None],
            a: npt.ArrayLike, b: npt.ArrayLike, out: Planes | None) -> Planes:
    pa, pb = _as_planes(a), _as_planes(b)
    res = _planes_out(out, pa, pb)
    s = _scratch()
    for sl in _chunks(res.shape[1]):
        kernel(_part(pa, sl), _part(pb, sl), res[:, sl], s.views(sl.stop - sl.start))
    return res


def padd(a: Planes, b: Planes, out: Planes | None = None) -> Planes:
    """a + b. Operands are (9, n) or (9, 1); out may be one of them (not a partial overlap)."""
    return _binary(_k_add, a, b, out)


def psub(a: Planes, b: Planes, out: Planes | None = None) -> Planes:
    """a - b."""
    return _binary(_k_sub, a, b, out)


def pneg(a: Planes, out: Planes | None = None) -> Planes:
    """-a."""
    return _binary(_k_sub, np.zeros((PLANE_LIMBS, 1), np.int64), a, out)


def prepare_multiplier(b: Planes) -> Planes:
    """The form of b that pmul_prepared and pbutterfly take (-32*b, unreduced); build it once
    for a vector or constant that multiplies many times, such as twiddles."""
    pb = _as_planes(b)
    res = np.empty(pb.shape, np.int64)
    for sl in _chunks(pb.shape[1]):
        _k_prepare(pb[:, sl], res[:, sl], np.empty((_TOP, sl.stop - sl.start), np.int64))
    return res


def pmul_prepared(a: Planes, nb32: Planes, out: Planes | None = None) -> Planes:
    """a * b where nb32 = prepare_multiplier(b)."""
    return _binary(_k_mul, a, nb32, out)


def pmul(a: Planes, b: Planes, out: Planes | None = None) -> Planes:
    """a * b (Montgomery product)."""
    pa, pb = _as_planes(a), _as_planes(b)
    if pa.shape[1] == 1 or pb.shape[1] == 1:
        var, const = (pa, pb) if pb.shape[1] == 1 else (pb, pa)
        return pmul_prepared(var, prepare_multiplier(const), out)
    res = _planes_out(out, pa, pb)
    s = _scratch()
    for sl in _chunks(res.shape[1]):
        v = s.views(sl.stop - sl.start)
        _k_prepare(pb[:, sl], v.mult, v.tmp8)
        _k_mul(pa[:, sl], v.mult, res[:, sl], v)
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
        v = s.views(sl.stop - sl.start)
        if b_const is None:
            _k_prepare(pb[:, sl], v.mult, v.tmp8)
        _k_mul(_part(pa, sl), v.mult if b_const is None else b_const, v.aux, v)
        _k_sub(v.aux, _part(pc, sl), res[:, sl], v)
    return res


def pbutterfly(u: Planes, v: Planes, nw32: Planes | None, out: Planes) -> Planes:
    """out[:, 0] = u + v and out[:, 1] = (u - v)*w, for nw32 = prepare_multiplier(w) or None
    for w = 1; out is (9, 2, m), any strides (an NTT passes interleaved output slots).
    One pass finishes both results, halving the calls of separate add, sub and mul."""
    pu, pv = _as_planes(u), _as_planes(v)
    m = pu.shape[1]
    if pv.shape[1] != m or out.shape != (PLANE_LIMBS, 2, m):
        raise ValueError(f"butterfly shapes do not match: {pu.shape} {pv.shape} {out.shape}")
    s = _scratch()
    for sl in _chunks(m):
        vw = s.views(sl.stop - sl.start)
        uu, vv = pu[:, sl], pv[:, sl]
        _k_add_into(uu, vv, vw, 0)
        if nw32 is None:
            _k_sub_into(uu, vv, vw, 1)
        else:
            # u - v + r lies in (0, 2r) with limbs in (-2^29, 2^30): fine for the product
            # as it is, so no normalisation pass before the multiplication.
            diff = vw.aux
            np.subtract(uu, vv, diff)
            np.add(diff, _P_COL, diff)
            _k_mul_into(diff, _part(nw32, sl), vw, 1)
        _k_select(vw, 2, out[:, :, sl])
    return out


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


class _Repack:
    """One thread's buffers for repacking and for the limbs-format functions."""

    def __init__(self) -> None:
        self.size = b = BLOCK
        self.rows = np.zeros((LIMBS + 1, b), np.uint64)  # row 4 stays zero
        self.parts = np.empty((2 * PLANE_LIMBS, b), np.uint64)
        self.planes = np.empty((4, PLANE_LIMBS, b), np.int64)


def _repack() -> _Repack:
    r: _Repack | None = getattr(_TLS, "repack", None)
    if r is None or r.size != BLOCK:
        r = _TLS.repack = _Repack()
    return r


def to_planes(x: Limbs, out: Planes | None = None) -> Planes:
    """Repack limbs (n, 4) or (4,) into planes (9, n). Values must be < 2^256 (a reduced
    element always is); planes ops other than the canonical conversions also need < r."""
    x2 = _as_limbs(x).reshape(-1, LIMBS)
    n = x2.shape[0]
    res = np.empty((PLANE_LIMBS, n), np.int64) if out is None else out
    if res.shape != (PLANE_LIMBS, n) or res.dtype != np.int64:
        raise ValueError(f"out must be int64 of shape (9, {n})")
    rv = res.view(np.uint64)
    r = _repack()
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        m = hi - lo
        rows, high, low = r.rows[:, :m], r.parts[:PLANE_LIMBS, :m], r.parts[PLANE_LIMBS:, :m]
        np.copyto(rows[:LIMBS], x2[lo:hi].T)
        np.take(rows, _SPLIT_HI, axis=0, out=high, mode="clip")
        np.left_shift(high, _SPLIT_LSH, high)  # bits past 64 fall off
        np.take(rows, _SPLIT_LO, axis=0, out=low, mode="clip")
        np.right_shift(low, _SPLIT_RSH, low)
        dst = rv[:, lo:hi]
        np.bitwise_or(low, high, dst)
        np.bitwise_and(dst, _MASK, dst)
    return res


def from_planes(p: Planes, out: Limbs | None = None) -> Limbs:
    """Repack normalised planes (9, n) into limbs (n, 4)."""
    pl = _as_planes(p)
    n = pl.shape[1]
    res = np.empty((n, LIMBS), np.uint64) if out is None else out
    if res.shape != (n, LIMBS) or res.dtype != np.uint64:
        raise ValueError(f"out must be uint64 of shape ({n}, 4)")
    pv = pl.view(np.uint64)
    r = _repack()
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        parts = r.parts[: 3 * LIMBS, : hi - lo]
        np.take(pv[:, lo:hi], _JOIN_PLANE, axis=0, out=parts, mode="clip")
        np.right_shift(parts, _JOIN_RSH, parts)
        np.left_shift(parts, _JOIN_LSH, parts)  # bits past 64 belong to the next limb
        three = parts.reshape(LIMBS, 3, hi - lo)  # every limb overlaps exactly three planes
        np.bitwise_or(three[:, 0], three[:, 1], three[:, 0])
        np.bitwise_or(three[:, 0], three[:, 2], res[lo:hi].T)
    return res


# ---------------------------------------------------------------- limbs API

def _as_limbs(x: npt.ArrayLike) -> Limbs:
    arr = np.asarray(x)
    if arr.dtype != np.uint64 or arr.ndim not in (1, 2) or arr.shape[-1] != LIMBS:
        raise ValueError(f"expected a uint64 limbs array of shape (n, 4) or (4,), got "
                         f"{arr.dtype} {arr.shape}")
    return arr


def _apply(fn: Callable[..., Planes], out: Limbs | None, *xs: npt.ArrayLike) -> Limbs:
    """Run a planes function over limbs operands block by block; (4,)/(1, 4) broadcast.
    fn takes the operands' planes and an out= for the result."""
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
    bufs = _repack().planes
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        args = [f if f is not None else to_planes(v[lo:hi], out=bufs[k, :, : hi - lo])
                for k, (f, v) in enumerate(zip(fixed, views, strict=True))]
        res = fn(*args, out=bufs[3, :, : hi - lo])
        from_planes(res, out=flat[lo:hi])
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
    return _apply(lambda p, out: pmul_prepared(p, mult, out), out, a)


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
    return _apply(lambda p, out: pmul_prepared(p, _TO_MONT, out), out, x)


def mont_to_canonical(x: Limbs, out: Limbs | None = None) -> Limbs:
    """Montgomery limbs to canonical integers in [0, r) (an unreduced input is reduced)."""
    return _apply(lambda p, out: pmul_prepared(p, _FROM_MONT, out), out, x)


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
