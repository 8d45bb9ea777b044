"""BLS12-381 point containers and CPU multi-scalar multiplication.

Points live in numpy byte arrays so that a GPU backend can upload them as-is;
the independent curve library's point objects are only built when a CPU MSM
needs them.

Byte layout of one affine point (the "xy little-endian" encoding):

* G1, 96 bytes: ``x`` (48 bytes) then ``y`` (48 bytes). Each coordinate is the
  canonical (fully reduced, non-Montgomery) base-field element, little-endian.
* G2, 192 bytes: ``x.c0, x.c1, y.c0, y.c1``, 48 bytes each, same encoding, where
  an Fp2 element is ``c0 + c1·u``.
* The identity is all-zero bytes. ``(0, 0)`` is not on either curve, so the
  encoding is unambiguous.

Scalars arrive as ``(n, 4)`` uint64 arrays of little-endian limbs in Montgomery
form (``x·2^256 mod r``, fully reduced).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Self, TypeAlias, overload

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

__all__ = [
    "R_MODULUS",
    "G1Points",
    "G2Points",
    "Point",
    "Points",
    "batch_add",
    "msm",
    "point_from_bytes",
    "point_to_bytes",
    "point_to_ints",
    "scalars_from_mont",
]

R_MODULUS = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
"""Order of the scalar field Fr."""

_FP_BYTES = 48
_R_INV = Scalar(pow(pow(2, 256, R_MODULUS), -1, R_MODULUS))
_ONE = Scalar(1)

Point: TypeAlias = G1Point | G2Point


class Points:
    """Immutable sequence of affine points of one group, stored as xy bytes.

    Use the concrete subclasses :class:`G1Points` and :class:`G2Points`.
    """

    GROUP: ClassVar[str]
    POINT_BYTES: ClassVar[int]
    LIBRARY_TYPE: ClassVar[type[G1Point] | type[G2Point]]

    __slots__ = ("_lock", "_objects", "_xy")

    def __init__(self, xy: np.ndarray) -> None:
        arr = np.asarray(xy)
        if arr.dtype != np.uint8 or arr.ndim != 2 or arr.shape[1] != self.POINT_BYTES:
            raise ValueError(
                f"{type(self).__name__} needs a uint8 array of shape (n, {self.POINT_BYTES}), "
                f"got {arr.dtype} {arr.shape}"
            )
        # A private read-only copy is what makes the container immutable: the
        # caller may keep writing to the array it passed in.
        own = np.array(arr, dtype=np.uint8, order="C", copy=True)
        own.setflags(write=False)
        self._init(own, None)

    def _init(self, xy: np.ndarray, objects: list[Point] | None) -> None:
        self._xy = xy
        self._objects = objects
        self._lock = threading.Lock()

    @classmethod
    def _wrap(cls, xy: np.ndarray, objects: list[Point] | None = None) -> Self:
        """Adopt an array this module created (read-only, contiguous) without copying."""
        self = cls.__new__(cls)
        self._init(xy, objects)
        return self

    @classmethod
    def from_objects(cls, points: Sequence[Point]) -> Self:
        """Encode library points (costs one field inversion each, ~11 µs)."""
        for p in points:
            if not isinstance(p, cls.LIBRARY_TYPE):
                raise TypeError(f"{cls.__name__} cannot hold {type(p).__name__}")
        raw = b"".join(p.to_xy_bytes_le() for p in points)
        xy = np.frombuffer(raw, dtype=np.uint8).reshape(len(points), cls.POINT_BYTES)
        # Cached objects are not kept: whether they come from here or from
        # bytes loaded off disk, MSMs then see identical inputs.
        return cls._wrap(xy)

    @property
    def xy(self) -> np.ndarray:
        """The read-only ``(n, POINT_BYTES)`` uint8 array."""
        return self._xy

    @property
    def nbytes(self) -> int:
        return int(self._xy.nbytes)

    def __len__(self) -> int:
        return int(self._xy.shape[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={len(self)})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Points)
        return bool(np.array_equal(self._xy, other._xy))

    __hash__ = None  # type: ignore[assignment]

    def objects(self) -> list[Point]:
        """Library point objects, parsed once and cached. Do not mutate the list."""
        objs = self._objects
        if objs is not None:
            return objs
        with self._lock:
            if self._objects is None:
                parse = self.LIBRARY_TYPE.from_xy_bytes_unchecked_le
                raw = self._xy.tobytes()
                size = self.POINT_BYTES
                self._objects = [parse(raw[i : i + size]) for i in range(0, len(raw), size)]
            return self._objects

    def take(self, indices: np.ndarray) -> Self:
        """Gather the points at ``indices`` into a new container."""
        idx = _as_indices(indices, len(self))
        xy = self._xy[idx]
        xy.setflags(write=False)
        objs = self._objects
        sub = None if objs is None else [objs[i] for i in idx.tolist()]
        return self._wrap(xy, sub)


class G1Points(Points):
    GROUP = "g1"
    POINT_BYTES = 2 * _FP_BYTES
    LIBRARY_TYPE = G1Point
    __slots__ = ()


class G2Points(Points):
    GROUP = "g2"
    POINT_BYTES = 4 * _FP_BYTES
    LIBRARY_TYPE = G2Point
    __slots__ = ()


def _as_indices(indices: np.ndarray, n: int) -> np.ndarray:
    idx = np.asarray(indices)
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"indices must be a 1-d integer array, got {idx.dtype} {idx.shape}")
    idx = idx.astype(np.int64, copy=False)
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise IndexError(f"indices out of range for {n} points")
    return idx


def _check_scalars(w: np.ndarray) -> np.ndarray:
    arr = np.asarray(w)
    if arr.dtype != np.uint64 or arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(
            f"scalars must be a uint64 array of shape (n, 4), got {arr.dtype} {arr.shape}"
        )
    return arr


def scalars_from_mont(w: np.ndarray) -> list[Scalar]:
    """Convert Montgomery-form limbs to library scalars (canonical values).

    Each row is read as the integer ``x·2^256 mod r`` and multiplied by
    ``2^-256`` inside the library, which measured ~0.3 µs per element, about
    three times faster than the same reduction with Python integers.
    Raises ``ValueError`` if a row is not fully reduced (≥ r).
    """
    arr = _check_scalars(w)
    raw = np.ascontiguousarray(arr, dtype="<u8").tobytes()
    parse = Scalar.from_le_bytes
    r_inv = _R_INV
    return [parse(raw[i : i + 32]) * r_inv for i in range(0, len(raw), 32)]


@overload
def msm(
    points: G1Points, scalars_mont: np.ndarray, indices: np.ndarray | None = None
) -> G1Point: ...
@overload
def msm(
    points: G2Points, scalars_mont: np.ndarray, indices: np.ndarray | None = None
) -> G2Point: ...
@overload
def msm(points: Points, scalars_mont: np.ndarray, indices: np.ndarray | None = None) -> Point: ...
def msm(points: Points, scalars_mont: np.ndarray, indices: np.ndarray | None = None) -> Point:
    """``sum(s_i · P_i)`` with the library's multi-exponentiation (GIL released).

    With ``indices``, only ``points[indices]`` take part and ``scalars_mont``
    holds one row per index; the parent's cached objects are reused, so
    repeated subset MSMs do not re-parse points.
    """
    scalars = scalars_from_mont(scalars_mont)
    objs = points.objects()
    if indices is not None:
        idx = _as_indices(indices, len(points))
        objs = [objs[i] for i in idx.tolist()]
    if len(objs) != len(scalars):
        raise ValueError(f"{len(objs)} points but {len(scalars)} scalars")
    return _multiexp(points, objs, scalars)


@overload
def batch_add(points: G1Points, selection: np.ndarray) -> G1Point: ...
@overload
def batch_add(points: G2Points, selection: np.ndarray) -> G2Point: ...
@overload
def batch_add(points: Points, selection: np.ndarray) -> Point: ...
def batch_add(points: Points, selection: np.ndarray) -> Point:
    """Sum of the points whose bit is set.

    ``selection`` is either a boolean mask of length ``len(points)`` or a
    packed bitmap (uint8, ``np.packbits(mask, bitorder="little")``).

    The sum runs as a multi-exponentiation with unit scalars rather than a
    Python loop of additions: that is native code with the GIL released, so
    it overlaps with other threads. Measured at 2^13 points it costs about a
    tenth of a general MSM of the same size and is within 2x of a Python
    addition loop, which would hold the GIL throughout.
    """
    mask = _selection_mask(selection, len(points))
    objs = points.objects()
    chosen = [objs[i] for i in np.flatnonzero(mask).tolist()]
    return _multiexp(points, chosen, [_ONE] * len(chosen))


# The library's multi-exponentiation runs on one core with the interpreter lock released, so
# a large one is cut into slices summed on a pool of threads, one a core. Below this many
# points a slice's fixed cost outweighs what another core brings.
MIN_SLICE = 4096
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _msm_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="curve-msm")
        return _pool


def _multiexp(points: Points, objs: list[Point], scalars: list[Scalar]) -> Point:
    if not objs:
        return points.LIBRARY_TYPE.identity()
    run: Callable[[list[Any], list[Scalar]], Any] = (
        G2Point.multiexp_unchecked if isinstance(points, G2Points) else G1Point.multiexp_unchecked
    )
    slices = min(os.cpu_count() or 1, len(objs) // MIN_SLICE)
    if slices < 2:
        return run(objs, scalars)
    bounds = [len(objs) * k // slices for k in range(slices + 1)]
    parts = [
        _msm_pool().submit(run, objs[lo:hi], scalars[lo:hi])
        for lo, hi in itertools.pairwise(bounds)
    ]
    total: Point = parts[0].result()
    for part in parts[1:]:
        total = total + part.result()
    return total


def _selection_mask(selection: np.ndarray, n: int) -> np.ndarray:
    sel = np.asarray(selection)
    if sel.ndim != 1:
        raise ValueError("selection must be 1-d")
    if sel.dtype == np.bool_:
        if sel.shape[0] != n:
            raise ValueError(f"mask has {sel.shape[0]} entries for {n} points")
        return sel
    if sel.dtype == np.uint8:
        if sel.shape[0] != (n + 7) // 8:
            raise ValueError(f"bitmap has {sel.shape[0]} bytes for {n} points")
        return np.unpackbits(sel, count=n, bitorder="little").astype(np.bool_)
    raise ValueError(f"selection must be bool (mask) or uint8 (packed bitmap), got {sel.dtype}")


def point_to_bytes(p: Point) -> bytes:
    """The xy little-endian encoding described in the module docstring."""
    return bytes(p.to_xy_bytes_le())


def point_from_bytes(data: bytes, *, check: bool = True) -> Point:
    """Inverse of :func:`point_to_bytes`; the group is chosen by length (96 or 192).

    With ``check`` the point is verified to be on the curve and in the subgroup.
    """
    raw = bytes(data)
    lib: type[G1Point] | type[G2Point]
    if len(raw) == G1Points.POINT_BYTES:
        lib = G1Point
    elif len(raw) == G2Points.POINT_BYTES:
        lib = G2Point
    else:
        raise ValueError(f"point encodings are 96 or 192 bytes, got {len(raw)}")
    if not any(raw):
        return lib.identity()
    return lib.from_xy_bytes_le(raw) if check else lib.from_xy_bytes_unchecked_le(raw)


def point_to_ints(p: Point) -> tuple[int, int] | tuple[tuple[int, int], tuple[int, int]]:
    """Affine coordinates as Python ints, for comparisons in tests.

    G1 gives ``(x, y)``, G2 gives ``((x.c0, x.c1), (y.c0, y.c1))``; the
    identity is all zeros.
    """
    raw = p.to_xy_bytes_le()
    c = [int.from_bytes(raw[i : i + _FP_BYTES], "little") for i in range(0, len(raw), _FP_BYTES)]
    if len(c) == 2:
        return (c[0], c[1])
    return ((c[0], c[1]), (c[2], c[3]))
