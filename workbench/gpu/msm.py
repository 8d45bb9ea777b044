"""Multi-scalar multiplication and batch addition of BLS12-381 G1 and G2 points on the GPU.

Device layout: :class:`DevicePoints` holds n affine points as an ``(n, 24)`` uint32 array
for G1 (x then y, each coordinate twelve little-endian 32-bit limbs in Montgomery form,
kernels/fp.cuh) or ``(n, 48)`` for G2 (each coordinate two such elements, c0 then c1,
kernels/fp2.cuh); the point at infinity stays all zeros. Results come back to the host as
the 96- or 192-byte "xy little-endian" encoding of :mod:`workbench.prover.curve`
(:func:`to_library_point` turns one into the curve library's point). One set of kernels
serves both groups (kernels/curve.cuh); :class:`Group` says which to launch and how large
a point is.

The MSM is Pippenger's method over signed c-bit digits (kernels/msm.cu describes the
device pipeline). The window size comes from a cost model, :func:`window_bits`. The last
step, sum_w 2^(c w) * T_w over the W window sums, runs here on the host with the curve
library: it is a serial chain of about 255 doublings, which one GPU thread runs far slower
than native host code, and the result has to come to the host anyway.

With precomputed window multiples of the bases (switch PRECOMPUTED, tables in msm_tables.py)
every window's digits share one set of buckets, reduced once, and that one sum is the MSM:
nothing is left to combine.

Bucket accumulation and batch addition first halve their runs of points in affine rounds
(affine_rounds.py) while those pay, and finish in XYZZ coordinates.

Scratch memory lives in a per-thread, per-device workspace that grows to the largest size
seen and is then reused, so repeated calls of one size allocate nothing; concurrent workers
(one thread and stream each) never share scratch.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from workbench.gpu import affine_rounds, kernels, msm_tables
from workbench.gpu.msm_tables import window_count
from workbench.prover.curve import G1Points, G2Points

__all__ = [
    "G1",
    "G2",
    "IDENTITY_BYTES",
    "P_MODULUS",
    "CupyBackend",
    "DevicePoints",
    "Group",
    "WindowSums",
    "batch_add",
    "batch_add_sets",
    "combine_windows",
    "concat",
    "default_backend",
    "msm",
    "msm_windows",
    "msm_windows_sets",
    "slice_floor",
    "to_library_point",
    "views",
    "window_bits",
    "window_count",
]

P_MODULUS = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
"""The base field modulus p."""

IDENTITY_BYTES = bytes(96)
"""The encoding of the point at infinity."""

_MAX_WINDOW_BITS = 20  # 13 windows x 2^19 buckets x 192 bytes = 1.3 GB of G1 bucket sums
_BATCH_CHUNK = 256  # points per thread in batch_add's first pass: 2^16 threads at 2^24, one full wave
_GROUP = 16  # partials per thread in each later pass
_BATCH_THREADS = 1 << 16  # first-pass threads batch_add aims for (see _batch_chunk)
_MAX_BLOCKS = 1 << 20

REDUCE = "scan"
"""The bucket reduction's levels: "pending" (msm_reduce_step: each level's scale left to the
next, G1's running sums' additions inlined) down to one point a row, or "scan" ("pending"
while rows are longer than SCAN_ROWS, then a suffix scan and a tree of sums: msm_suffix_step
and after). "scan" won at every size on the H200 (2^20 3.7 against 6.3 ms, 2^24 25.3 against
30.4 for the scaled levels it replaced, which were removed; NOTES_msm.md rows 4a, 4b)."""

PRECOMPUTED = "prepared"
"""Whether G1 MSMs run over precomputed window multiples of their bases (msm_tables.py: every
window's digits in one set of buckets, reduced once): "off"; "prepared", over the tables
built beforehand (msm_tables.TABLES.build; the GPU backend's setup builds the H query's when it
has at least PRECOMPUTED_MIN_POINTS bases), bases without one taking the path of a bucket set
per window; or "always", a table built on first use for every set of G1 bases, at
msm_tables.fixed_window_bits of that first MSM (tests, benchmarks). G2 MSMs take the per-window
path in every mode. On the H200 (kernels/NOTES_msm.md, row 6) a table won at 2^22 and 2^24."""

PRECOMPUTED_MIN_POINTS = 1 << 21
"""The fewest bases the GPU backend's setup builds a window table for: over one the H200 took
17.60 ms against 16.34 at 2^20, 39.61 against 43.96 at 2^22 and 129.64 against 164.06 at 2^24
(random scalars, medians of 10, 2026-12-02), the table 1.31, 4.88 and 18.0 GiB."""


def wants_table(bases: int) -> bool:
    """Whether the GPU backend builds a window table for a query of this many bases."""
    return PRECOMPUTED != "off" and bases >= PRECOMPUTED_MIN_POINTS


REDUCE_FIRST_SEG_LOG2, REDUCE_SEG_LOG2 = 4, 2  # buckets a thread folds at the first level, and after
SCAN_ROWS = 4096  # REDUCE = "scan": rows at most that the scan finishes (its work is m log2 m a row)
SCAN_GROUP = 4  # points a thread sums in the scan's tree

phase_hook: Any = None
"""Called with a phase name at each MSM phase boundary when set (benchmarks record device
events there); None costs nothing."""


def _phase(name: str) -> None:
    if phase_hook is not None:
        phase_hook(name)


# ---------------------------------------------------------------- groups


@dataclass(frozen=True)
class Group:
    """Which curve group a set of points is in: its kernels' suffix and its sizes."""

    name: str
    kernel_suffix: str
    degree: int  # Fp elements per coordinate: 1 (G1 over Fp) or 2 (G2 over Fp2)
    points_type: type[G1Points] | type[G2Points]
    library_type: type[G1Point] | type[G2Point]

    @property
    def point_bytes(self) -> int:
        return 96 * self.degree

    @property
    def affine_words(self) -> int:  # uint32 words of an affine point
        return 24 * self.degree

    @property
    def xyzz_words(self) -> int:  # uint32 words of an XYZZ point (four coordinates)
        return 48 * self.degree

    @property
    def identity(self) -> bytes:
        return bytes(self.point_bytes)

    def kernel(self, name: str) -> str:
        return name + self.kernel_suffix


G1 = Group("g1", "", 1, G1Points, G1Point)
G2 = Group("g2", "_g2", 2, G2Points, G2Point)


def group_of(points: G1Points | G2Points) -> Group:
    if isinstance(points, G2Points):
        return G2
    if isinstance(points, G1Points):
        return G1
    raise TypeError(f"expected G1Points or G2Points, got {type(points).__name__}")


# ---------------------------------------------------------------- parameters


def window_bits(n: int) -> int:
    """Window size c for an MSM of n scalars.

    Minimises  n * W + 4 * W * (2^(c-1) + 1)  over c in [2, 20]: n * W mixed additions to
    fill the buckets, and about four mixed-addition equivalents per bucket to reduce them
    (two full additions of the running sum at ~1.4 each, plus the sums of bucket pieces and
    of segments). It gives c = 16 at 2^20 and 2^22 and c = 20 at 2^24, where the bucket
    memory cap of 20 bits is also reached. Measured on the H200 at 2^24, filling cost about
    0.9 ns per entry and reducing about 6 ns per bucket, which makes c = 19 and 20 equal.
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")

    def cost(c: int) -> tuple[int, int]:
        w = window_count(c)
        return (n * w + 4 * w * ((1 << (c - 1)) + 1), -c)

    fair = [c for c in range(2, _MAX_WINDOW_BITS + 1) if not _top_window_crowded(n, c)]
    return min(fair or range(2, _MAX_WINDOW_BITS + 1), key=cost)


def _top_window_crowded(n: int, c: int) -> bool:
    """Whether the top window's few buckets would set the slice length (kernels/msm.cu,
    msm_slice_size: at least sqrt of the largest bucket). The top window holds the scalars'
    last 255 - (W-1) c bits, counted here for scalars below 2^254 to be safe; when that is
    a handful of bits, each of its buckets gets a large share of all n points and every
    accumulating thread's serial run grows with it. At n = 419k (a 2^22 witness's tail)
    c = 14 leaves 2 bits there: slices of 324 entries instead of 104, a quarter of the
    threads, and bucket sums chaining 324 pieces; that MSM took 28 ms on the H200."""
    top_bits = max(0, 254 - (window_count(c) - 1) * c)
    largest = -(-n // (1 << top_bits))
    return math.isqrt(largest - 1) + 1 > slice_floor(n, c)


def slice_floor(n: int, c: int) -> int:
    """Least entries per accumulating thread (kernels/msm.cu, msm_slice_size): twice the mean
    bucket load n / 2^(c-1), so about one bucket in two is cut between threads and needs one
    more addition; that still leaves over 2^18 threads from 2^20 points up."""
    return max(16, 2 * -(-n // (1 << (c - 1))))


# ---------------------------------------------------------------- host side of the results

Affine = tuple[int, int] | None  # None is the point at infinity
Fp2 = tuple[int, int]  # c0 + c1 u
Affine2 = tuple[Fp2, Fp2] | None


def _montgomery_fp(rows: np.ndarray) -> list[int]:
    raw = np.ascontiguousarray(rows, dtype="<u4").tobytes()
    return [int.from_bytes(raw[i : i + 48], "little") for i in range(0, len(raw), 48)]


def xyzz_rows_to_affine(rows: np.ndarray) -> list[Affine]:
    """G1 XYZZ points as the kernels store them ((k, 48) uint32, Montgomery form) -> affine
    ints, with one inversion for all of them (x = X / ZZ, y = Y / ZZZ; t = 1 / (ZZ ZZZ)
    gives both, and a running product shares one inversion among the rows). The quotients
    are taken of the Montgomery forms as they are: the factor R of each coordinate cancels."""
    p = P_MODULUS
    coords = _montgomery_fp(rows)
    points = [tuple(coords[k : k + 4]) for k in range(0, len(coords), 4)]
    prefix, running = [], 1
    for _, _, zz, zzz in points:
        prefix.append(running)
        if zz:
            running = running * zz % p * zzz % p
    inverse = pow(running, -1, p)
    out: list[Affine] = [None] * len(points)
    for k in range(len(points) - 1, -1, -1):
        x, y, zz, zzz = points[k]
        if zz:
            t = inverse * prefix[k] % p  # 1 / (zz zzz)
            inverse = inverse * zz % p * zzz % p
            out[k] = (x * t % p * zzz % p, y * t % p * zz % p)
    return out


def _fp2_mul(a: Fp2, b: Fp2) -> Fp2:
    p = P_MODULUS
    return ((a[0] * b[0] - a[1] * b[1]) % p, (a[0] * b[1] + a[1] * b[0]) % p)


def _fp2_inv(a: Fp2) -> Fp2:
    p = P_MODULUS
    t = pow((a[0] * a[0] + a[1] * a[1]) % p, -1, p)
    return (a[0] * t % p, -a[1] * t % p)


def xyzz_rows_to_affine_g2(rows: np.ndarray) -> list[Affine2]:
    """G2 XYZZ points ((k, 96) uint32, Montgomery form) -> affine Fp2 pairs. The rows are
    a window's few sums, so each gets its own inversion; as in G1's, the Montgomery factor
    cancels in the quotients."""
    flat = _montgomery_fp(rows)
    out: list[Affine2] = []
    for k in range(0, len(flat), 8):
        x, y, zz, zzz = ((flat[k + 2 * j], flat[k + 2 * j + 1]) for j in range(4))
        if zz == (0, 0):
            out.append(None)
            continue
        t = _fp2_inv(_fp2_mul(zz, zzz))
        out.append((_fp2_mul(x, _fp2_mul(t, zzz)), _fp2_mul(y, _fp2_mul(t, zz))))
    return out


def _rows_to_affine(rows: np.ndarray, group: Group) -> list[Any]:
    return xyzz_rows_to_affine(rows) if group is G1 else xyzz_rows_to_affine_g2(rows)


def encode_affine(point: Affine | Affine2, group: Group = G1) -> bytes:
    if point is None:
        return group.identity
    if group is G1:
        x, y = point
        assert isinstance(x, int) and isinstance(y, int)
        return x.to_bytes(48, "little") + y.to_bytes(48, "little")
    return b"".join(v.to_bytes(48, "little") for coord in point for v in coord)  # type: ignore[union-attr]


def combine_windows(window_sums: Sequence[Any], c: int, group: Group = G1) -> bytes:
    """sum_w 2^(c w) * window_sums[w] by Horner's rule from the top window, with the curve
    library (about 0.1 ms for 16 G1 windows; the same chain in Python integers took 3 ms)."""
    lib: Any = group.library_type  # G1Point or G2Point: the same methods
    acc, shift = lib.identity(), Scalar(1 << c)
    for point in reversed(window_sums):
        acc = acc * shift
        if point is not None:
            acc = acc + lib.from_xy_bytes_unchecked_le(encode_affine(point, group))
    return bytes(acc.to_xy_bytes_le())


def to_library_point(xy: bytes) -> G1Point | G2Point:
    """The curve library's point for a result: 96 bytes are G1, 192 bytes G2."""
    lib: Any = {96: G1Point, 192: G2Point}.get(len(xy))
    if lib is None:
        raise ValueError(f"a point is 96 (G1) or 192 (G2) bytes, got {len(xy)}")
    return lib.identity() if not any(xy) else lib.from_xy_bytes_unchecked_le(bytes(xy))


# ---------------------------------------------------------------- device plumbing


class CupyBackend:
    """Launches the kernels through the shared RawModule loader, on the current stream."""

    def __init__(self) -> None:
        self.xp = kernels.require_cupy()

    def launch(self, module: str, kernel: str, work: int, args: tuple[Any, ...], threads: int = 128) -> None:
        blocks = max(1, min(-(-work // threads), _MAX_BLOCKS))
        kernels.function(module, kernel)((blocks,), (threads,), args)

    # Both copies name the current stream: on a non-blocking stream, a copy on the legacy
    # default stream would not wait for the kernels before it.
    def upload(self, dst: Any, src: np.ndarray) -> None:
        dst.set(src, stream=self.xp.cuda.get_current_stream())

    def download(self, arr: Any) -> np.ndarray:
        return np.asarray(arr.get(stream=self.xp.cuda.get_current_stream(), blocking=True))

    def stream_context(self, stream: Any) -> Any:
        return stream if stream is not None else contextlib.nullcontext()

    def workspace_key(self) -> Any:
        return ("cupy", self.xp.cuda.Device().id)

    def is_device_array(self, arr: Any) -> bool:
        return isinstance(arr, self.xp.ndarray)


_default: CupyBackend | None = None
_default_lock = threading.Lock()


def default_backend() -> CupyBackend:
    global _default
    with _default_lock:
        if _default is None:
            _default = CupyBackend()
        return _default


class _Workspace:
    """Named flat scratch arrays that grow to the largest size asked for and are then reused."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self.arrays: dict[str, Any] = {}

    def buffer(self, name: str, dtype: Any, size: int) -> Any:
        arr = self.arrays.get(name)
        if arr is None or arr.dtype != dtype or arr.size < size:
            arr = self.arrays[name] = self.xp.empty(max(size, 1), dtype=dtype)
        return arr[:size]

    def poison(self) -> None:
        """Fill every scratch array with ones, so that a read of memory no kernel wrote shows up."""
        for arr in self.arrays.values():
            arr.view(self.xp.uint8).fill(0xFF)


_local = threading.local()


def _workspace(backend: Any) -> _Workspace:
    spaces = getattr(_local, "spaces", None)
    if spaces is None:
        spaces = _local.spaces = {}
    key = (id(backend), backend.workspace_key())
    ws = spaces.get(key)
    if ws is None:
        ws = spaces[key] = _Workspace(backend.xp)
    return ws


@dataclass(frozen=True, eq=False)
class DevicePoints:
    """Affine G1 or G2 points resident on the device (layout in the module docstring)."""

    data: Any
    n: int
    backend: Any
    group: Group = G1

    @classmethod
    def from_points(cls, points: G1Points | G2Points, stream: Any = None,
                    backend: Any = None) -> DevicePoints:
        """Upload once; the conversion to Montgomery form runs on the device, on ``stream``
        (the current one by default): work on another stream must be ordered after it."""
        be = backend if backend is not None else default_backend()
        group = group_of(points)
        n = len(points)
        words = np.ascontiguousarray(points.xy).view("<u4").reshape(n, group.affine_words)
        with be.stream_context(stream):
            data = be.xp.empty((n, group.affine_words), dtype=be.xp.uint32)
            if n:
                be.upload(data, words)
                elements = 2 * group.degree * n
                be.launch("msm", "fp_array_to_mont", elements, (data, np.uint64(elements)), threads=256)
        return cls(data=data, n=n, backend=be, group=group)

    def to_points(self, stream: Any = None) -> G1Points | G2Points:
        """Download as canonical xy bytes (for checks and the SRS cache)."""
        be, group = self.backend, self.group
        with be.stream_context(stream):
            out = be.xp.empty((self.n, group.affine_words), dtype=be.xp.uint32)
            if self.n:
                elements = 2 * group.degree * self.n
                be.launch("msm", "fp_array_from_mont", elements, (out, self.data, np.uint64(elements)),
                          threads=256)
            host = be.download(out)
        xy = np.ascontiguousarray(host, dtype="<u4").view(np.uint8).reshape(self.n, group.point_bytes)
        return group.points_type(xy)


def _on_device(be: Any, ws: _Workspace, name: str, arr: Any, dtype: Any, width: int | None) -> Any:
    """arr as a C-contiguous device array, uploading a host array into scratch."""
    if not be.is_device_array(arr):
        arr = np.asarray(arr)
    shape_ok = arr.ndim == (1 if width is None else 2) and (width is None or arr.shape[1] == width)
    if arr.dtype != dtype or not shape_ok:
        shape = "(m,)" if width is None else f"(m, {width})"
        raise ValueError(f"{name} must be {np.dtype(dtype)} of shape {shape}, got {arr.dtype} {arr.shape}")
    if be.is_device_array(arr):
        if not arr.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        return arr
    host = np.ascontiguousarray(arr)
    dev = ws.buffer(name, dtype, host.size).reshape(host.shape)
    be.upload(dev, host)
    return dev


@dataclass(frozen=True, eq=False)
class WindowSums:
    """An MSM's per-window sums, read back from the device. What is left, combining them, is
    host work: a caller holding the GPU can give it up first (`combine` needs no device)."""

    rows: np.ndarray | None  # (W, xyzz words) uint32; None for an empty MSM
    c: int
    group: Group

    def combine(self) -> bytes:
        """The MSM as xy little-endian (96 or 192 bytes)."""
        if self.rows is None:
            return self.group.identity
        _phase("combine")
        result = combine_windows(_rows_to_affine(self.rows, self.group), self.c, self.group)
        _phase("done")
        return result


def msm(points: DevicePoints, scalars: Any, indices: Any = None, stream: Any = None, *,
        window: int | None = None) -> bytes:
    """sum_i s_i * points[indices[i]] (or points[i]) as xy little-endian (96 or 192 bytes).

    ``scalars``: (m, 4) uint64 Montgomery-form Fr, fully reduced, on the host or the device.
    ``indices``: optional (m,) int64, host or device; host indices are range-checked.
    ``window``: c in [2, 20] instead of :func:`window_bits` (tests and tuning); over a
    precomputed table (PRECOMPUTED), None takes the table's window.
    """
    return msm_windows(points, scalars, indices, stream, window=window).combine()


def msm_windows(points: DevicePoints, scalars: Any, indices: Any = None, stream: Any = None, *,
                window: int | None = None) -> WindowSums:
    """The device part of :func:`msm` (same arguments): its window sums, to combine later."""
    return msm_windows_sets(points, 1, scalars, indices, stream, window=window)[0]


def msm_windows_sets(points: DevicePoints, sets: int, scalars: Any, indices: Any = None,
                     stream: Any = None, *, window: int | None = None) -> list[WindowSums]:
    """The MSMs of one scalar vector against `sets` point sets of one group stored back to
    back in `points` (:func:`concat`), each of points.n / sets points; `indices` index
    within a set. The G1 queries of a proof share their scalars: one sort serves every set,
    and each later kernel runs once over all of them, with `sets` times the threads. On the
    H200 the reductions of a 2^22 witness's tails were latency-bound: a third of their time
    was launches of a few thousand threads each."""
    if window is not None and not 2 <= window <= _MAX_WINDOW_BITS:
        raise ValueError(f"window must be in [2, {_MAX_WINDOW_BITS}], got {window}")
    if sets < 1 or points.n % sets:
        raise ValueError(f"{points.n} points do not split into {sets} sets")
    size = points.n // sets
    be = points.backend
    ws = _workspace(be)
    m = int(scalars.shape[0]) if scalars.ndim == 2 else -1
    if indices is None and m != size:
        raise ValueError(f"{size} points but {m} scalars")
    if indices is not None:
        if not be.is_device_array(indices):
            idx = np.asarray(indices)
            if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= size):
                raise IndexError(f"indices out of range for {size} points")
        if int(indices.shape[0]) != m:
            raise ValueError(f"{indices.shape[0]} indices but {m} scalars")
    if m == 0:
        return [WindowSums(None, 0, points.group) for _ in range(sets)]
    with be.stream_context(stream):
        table = _table_of(points, sets, m, window)
        if table is not None:
            return _msm(be, ws, points, sets, size, scalars, indices, m, table.c, table)
        return _msm(be, ws, points, sets, size, scalars, indices, m, window or window_bits(m))


def _table_of(points: DevicePoints, sets: int, m: int, window: int | None) -> msm_tables.WindowTable | None:
    """The precomputed table the MSM runs over (PRECOMPUTED), or None for the per-window path;
    a table of another window than the one asked for does not serve."""
    if PRECOMPUTED not in ("off", "prepared", "always"):
        raise ValueError(f"PRECOMPUTED must be 'off', 'prepared' or 'always', got {PRECOMPUTED!r}")
    if PRECOMPUTED == "off" or points.group is not G1:  # kernels/msm.cu builds G1 tables only
        return None
    table = msm_tables.TABLES.get(points)
    if PRECOMPUTED == "always" and (table is None or window not in (None, table.c)):
        table = msm_tables.TABLES.build(points, window or msm_tables.fixed_window_bits(m, sets))
    if table is None or window not in (None, table.c) or table.n != points.n:
        return None
    return table


def concat(sets: Sequence[DevicePoints]) -> DevicePoints:
    """Point sets of one group in one device table, back to back (for msm_windows_sets and
    batch_add_sets); `views` gives each set back without a copy."""
    if not sets:
        raise ValueError("no point sets to join")
    first = sets[0]
    if any(p.group is not first.group or p.backend is not first.backend or p.n != first.n for p in sets):
        raise ValueError("point sets to join must share group, backend and size")
    data = first.backend.xp.concatenate([p.data for p in sets])
    return DevicePoints(data=data, n=first.n * len(sets), backend=first.backend, group=first.group)


def views(points: DevicePoints, sets: int) -> list[DevicePoints]:
    """The sets of a joined table, as tables of their own sharing its memory."""
    if sets < 1 or points.n % sets:
        raise ValueError(f"{points.n} points do not split into {sets} sets")
    size = points.n // sets
    return [DevicePoints(data=points.data[q * size:(q + 1) * size], n=size, backend=points.backend,
                         group=points.group) for q in range(sets)]


def _msm(be: Any, ws: _Workspace, points: DevicePoints, sets: int, size: int, scalars: Any,
         indices: Any, m: int, c: int, table: msm_tables.WindowTable | None = None) -> list[WindowSums]:
    """The MSM's device pipeline (kernels/msm.cu). With a table (PRECOMPUTED), one set of
    buckets takes every window's entries, each naming the table row of its window's multiple
    of its point, and the reduction gives one sum a point set: set q's entries are set 0's with
    q * size added, as without a table, since row w n + q size + i is point q size + i's."""
    module = affine_rounds.curve_module("msm")  # the XYZZ_PRODUCTS build
    xp, group = be.xp, points.group
    words = group.xyzz_words
    windows = window_count(c)
    rows = (1 << (c - 1)) + 1  # buckets per window, index = digit magnitude
    bucket_sets = windows if table is None else 1
    buckets = bucket_sets * rows
    rows_named = points.n if table is None else windows * points.n
    if sets * m * windows >= 1 << 31 or rows_named >= 1 << 31:
        raise ValueError(f"MSM of {m} scalars over {sets} sets is past the 32-bit entry indexing")
    scalars_dev = _on_device(be, ws, "scalars", scalars, np.uint64, 4)
    indices_dev = scalars_dev if indices is None else _on_device(be, ws, "indices", indices, np.int64, None)
    digit_args = (np.uint64(m), np.uint32(c), np.uint32(windows))

    _phase("sort")
    has_indices = np.uint32(indices is not None)
    counts = ws.buffer("counts", np.uint32, buckets)
    ends = ws.buffer("ends", np.uint32, buckets)
    entries = ws.buffer("entries", np.uint32, m * windows)
    fixed = "" if table is None else "_fixed"
    counts.fill(0)
    be.launch(module, "msm_count" + fixed, m, (scalars_dev, counts, *digit_args), threads=256)
    xp.cumsum(counts, dtype=np.uint32, out=ends)
    cursor = ws.buffer("cursor", np.uint32, buckets)
    xp.subtract(ends, counts, out=cursor)
    table_n = () if table is None else (np.uint64(points.n),)
    be.launch(module, "msm_scatter" + fixed, m, (scalars_dev, indices_dev, has_indices, cursor, entries,
                                                *digit_args, *table_n), threads=256)
    most_entries = m * windows
    if sets > 1:
        # Set q's sorted entries are set 0's with q * size added to the point index (below the
        # sign bit: points.n < 2^31), its buckets after the sets before it.
        total = int(be.download(ends[buckets - 1:])[0])
        offsets = xp.arange(sets, dtype=np.uint32)
        joined = ws.buffer("entries_sets", np.uint32, sets * total).reshape(sets, total)
        xp.add(entries[None, :total], (offsets * np.uint32(size))[:, None], out=joined)
        joined_ends = ws.buffer("ends_sets", np.uint32, sets * buckets).reshape(sets, buckets)
        xp.add(ends[None, :], (offsets * np.uint32(total))[:, None], out=joined_ends)
        joined_counts = ws.buffer("counts_sets", np.uint32, sets * buckets).reshape(sets, buckets)
        joined_counts[...] = counts[None, :]
        entries, ends, counts = joined.reshape(-1), joined_ends.reshape(-1), joined_counts.reshape(-1)
        most_entries = max(sets * total, 1)

    _phase("rounds")
    k0 = slice_floor(m if table is None else m * windows, c)  # about twice a bucket's mean load
    all_buckets = sets * buckets
    source = points.data if table is None else table.data
    if affine_rounds.round_pays(most_entries // 2, most_entries, g2=group is G2):
        # Halve the buckets in affine rounds while that pays; XYZZ accumulation takes the rest.
        total = int(be.download(ends[all_buckets - 1:])[0])
        halved = affine_rounds.halve_runs(be, ws, module, group.kernel("affine_round"), group.affine_words,
                                          source, entries, counts, ends, all_buckets, total)
        if halved.rounds:
            source, entries, counts, ends = halved.data, halved.entries, halved.counts, halved.ends
            most_entries = max(halved.total, 1)
            k0 = max(16, 2 * -(-halved.total // all_buckets))
    _phase("accumulate")
    largest = ws.buffer("largest", np.uint32, 1).reshape(())
    xp.max(counts, out=largest)
    max_slices = -(-most_entries // k0)  # slices are at least k0 entries long
    heads = ws.buffer("heads", np.uint32, max_slices * words)
    tails = ws.buffer("tails", np.uint32, max_slices * words)
    sums = ws.buffer("sums", np.uint32, all_buckets * words)
    be.launch(module, group.kernel("msm_accumulate"), max_slices,
              (source, entries, ends, largest, heads, tails, sums, np.uint64(all_buckets),
               np.uint64(max_slices), np.uint32(k0)))
    be.launch(module, group.kernel("msm_bucket_sum"), all_buckets,
              (heads, tails, counts, ends, largest, sums, np.uint64(all_buckets), np.uint32(k0)))
    _phase("reduce")
    reduced = _reduce_windows(be, ws, group, sums, sets * bucket_sets, rows)
    window_sums = be.download(reduced).reshape(sets, bucket_sets, words)
    return [WindowSums(window_sums[q], c, group) for q in range(sets)]


def _reduce_windows(be: Any, ws: _Workspace, group: Group, sums: Any, windows: int, rows: int) -> Any:
    """Per window, sum_j j * S_j over its row of bucket sums (msm_reduce_step and the scan, in
    msm.cu)."""
    module = affine_rounds.curve_module("msm")  # the XYZZ_PRODUCTS build
    if REDUCE not in ("pending", "scan"):
        raise ValueError(f"REDUCE must be 'pending' or 'scan', got {REDUCE!r}")
    scan = REDUCE == "scan"
    kernel = group.kernel("msm_reduce_step")
    x, a = sums, None
    m_in, scale, parity = rows, 0, 0
    while m_in > (SCAN_ROWS if scan else 1):
        # Wide segments where the rows are long (fewer outputs); then short ones, which
        # shorten each thread's serial chain once there are too few rows to fill the GPU.
        seg_log2 = REDUCE_FIRST_SEG_LOG2 if a is None else REDUCE_SEG_LOG2
        m_out = -(-m_in // (1 << seg_log2))
        u_out = ws.buffer(f"level_u{parity}", np.uint32, windows * m_out * group.xyzz_words)
        a_out = ws.buffer(f"level_a{parity}", np.uint32, windows * m_out * group.xyzz_words)
        be.launch(module, kernel, windows * m_out,
                  (x, x if a is None else a, np.uint32(a is not None), u_out, a_out, np.uint64(windows),
                   np.uint64(m_in), np.uint64(m_out), np.uint32(seg_log2), np.uint32(scale)))
        x, a = u_out, a_out
        # The step kernel's last argument is the pending scale: the level before's segment.
        m_in, scale, parity = m_out, seg_log2, parity ^ 1
    if scan:
        return _scan_windows(be, ws, group, x, a, windows, m_in, scale)
    assert a is not None  # rows >= 2, so at least one level ran
    return a


def _scan_windows(be: Any, ws: _Workspace, group: Group, x: Any, a: Any, windows: int, m: int,
                  pending: int) -> Any:
    """total = sum A + 2^pending * WS(X) over rows of m points (msm.cu: msm_suffix_step, the
    suffix sums of X by doubling steps; msm_scan_terms; msm_sum_groups). `a` None: no A yet."""
    module = affine_rounds.curve_module("msm")  # the XYZZ_PRODUCTS build
    words = group.xyzz_words
    current, parity, off = x, 0, 1
    while off < m:
        out = ws.buffer(f"scan{parity}", np.uint32, windows * m * words)
        be.launch(module, group.kernel("msm_suffix_step"), windows * m,
                  (current, out, np.uint64(windows), np.uint64(m), np.uint64(off)))
        current, parity, off = out, parity ^ 1, 2 * off
    terms = ws.buffer(f"scan{parity}", np.uint32, windows * m * words)
    be.launch(module, group.kernel("msm_scan_terms"), windows * m,
              (current, x if a is None else a, np.uint32(a is not None), terms, np.uint64(windows),
               np.uint64(m), np.uint32(pending)))
    current, parity = terms, parity ^ 1
    while m > 1:
        m_out = -(-m // SCAN_GROUP)
        out = ws.buffer(f"scan{parity}", np.uint32, windows * m_out * words)
        be.launch(module, group.kernel("msm_sum_groups"), windows * m_out,
                  (current, out, np.uint64(windows), np.uint64(m), np.uint64(m_out), np.uint32(SCAN_GROUP)))
        current, m, parity = out, m_out, parity ^ 1
    return current


def batch_add(points: DevicePoints, bitmap: Any, stream: Any = None) -> bytes:
    """Sum of the points whose bit is set, as xy little-endian (96 or 192 bytes).

    ``bitmap``: uint8 of length ceil(n / 8), bit i % 8 of byte i // 8 (``np.packbits(mask,
    bitorder="little")``), on the host or the device.
    """
    return batch_add_sets(points, 1, bitmap, stream)[0]


def batch_add_sets(points: DevicePoints, sets: int, bitmap: Any, stream: Any = None) -> list[bytes]:
    """:func:`batch_add` of one bitmap over `sets` point sets stored back to back (concat),
    each pass launched once for all of them.

    Many selected points: their indices are compacted into one run per set, halved in affine
    rounds (affine_rounds.py) and the rest summed in XYZZ; few: XYZZ additions straight from
    the bitmap (batch_add_chunks), where a round would not pay. With affine_rounds.BATCH_ADD
    "hybrid": two rounds inside each thread over slices of the bitmap (_batch_add_hybrid)."""
    if sets < 1 or points.n % sets:
        raise ValueError(f"{points.n} points do not split into {sets} sets")
    size = points.n // sets
    _check_bitmap(bitmap, size)
    be, group = points.backend, points.group
    if size == 0:
        return [group.identity] * sets
    ws = _workspace(be)
    with be.stream_context(stream):
        bits = _on_device(be, ws, "bitmap", bitmap, np.uint8, None)
        if affine_rounds.BATCH_ADD == "hybrid":
            sums = _batch_add_hybrid(be, ws, points, sets, size, bits)
            return [encode_affine(point, group) for point in _rows_to_affine(sums, group)]
        if affine_rounds.round_pays(sets * (size // 2), sets * size, g2=group is G2):
            totals = _batch_add_affine(be, ws, points, sets, size, bits)
            if totals is not None:
                return [encode_affine(point, group) for point in _rows_to_affine(totals, group)]
        return _batch_add_xyzz(be, ws, points, sets, size, bits)


def _batch_add_hybrid(be: Any, ws: _Workspace, points: DevicePoints, sets: int, size: int,
                      bits: Any) -> np.ndarray:
    """Per set, the XYZZ sum of its selected points by batch_add_slices (two affine rounds in
    each thread over slices of HYBRID_WORDS bitmap words) and batch_slice_sums, then pairwise
    XYZZ passes: no compaction, no read-back before the result. Scratch is sized for slices
    whose every bit is set."""
    module = affine_rounds.curve_module("batch_add")  # the XYZZ_PRODUCTS build
    group = points.group
    words = max(1, min(affine_rounds.HYBRID_WORDS, 1024))
    slices = -(-size // (64 * words))
    total = sets * slices
    threads = max(1, min(affine_rounds.HYBRID_THREADS, total))
    pairs = 32 * words  # round 0's pairs (and outputs) in a slice whose every bit is set
    left = ws.buffer("hybrid_left", np.uint32, total * (pairs // 2) * group.affine_words)
    counts = ws.buffer("hybrid_counts", np.uint32, total)
    slots = ws.buffer("hybrid_slots", np.uint32, threads * pairs * group.affine_words)
    prefix = ws.buffer("hybrid_prefix", np.uint32, threads * pairs * group.affine_words // 2)
    picks = ws.buffer("hybrid_picks", np.uint32, threads * pairs)
    be.launch(module, group.kernel("batch_add_slices"), threads,
              (points.data, bits, left, counts, slots, prefix, picks, np.uint64(size), np.uint64(slices),
               np.uint64(total), np.uint64(threads), np.uint32(words), affine_rounds.binary_flag()))
    per_set = 1 << max(0, slices - 1).bit_length()  # a power of two: the pairwise passes never mix sets
    partials = ws.buffer("batch_partials", np.uint32, sets * per_set * group.xyzz_words)
    be.launch(module, group.kernel("batch_slice_sums"), sets * per_set,
              (left, counts, partials, np.uint64(slices), np.uint64(total), np.uint64(per_set),
               np.uint64(sets)))
    current = _sum_partials(be, ws, group, partials, sets * per_set, sets)
    return be.download(current[:sets * group.xyzz_words]).reshape(sets, group.xyzz_words)


def _batch_add_affine(be: Any, ws: _Workspace, points: DevicePoints, sets: int, size: int,
                      bits: Any) -> np.ndarray | None:
    """Per set, the XYZZ sum of its selected points by affine rounds; None when no round
    pays (too few selected)."""
    module = affine_rounds.curve_module("batch_add")  # the XYZZ_PRODUCTS build
    xp, group = be.xp, points.group
    selected = xp.flatnonzero(xp.unpackbits(bits, bitorder="little")[:size]).astype(np.uint32)
    m = int(selected.size)
    if not affine_rounds.round_pays(sets * (m // 2), sets * m, g2=group is G2):
        return None
    offsets = xp.arange(sets, dtype=np.uint32) * np.uint32(size)
    entries = ws.buffer("batch_entries", np.uint32, sets * m).reshape(sets, m)
    xp.add(selected[None, :], offsets[:, None], out=entries)
    counts = ws.buffer("batch_counts", np.uint32, sets)
    counts.fill(m)
    ends = ws.buffer("batch_ends", np.uint32, sets)
    ends[...] = (xp.arange(1, sets + 1, dtype=np.uint32) * np.uint32(m))
    halved = affine_rounds.halve_runs(be, ws, module, group.kernel("affine_round"), group.affine_words,
                                      points.data, entries.reshape(-1), counts, ends, sets, sets * m)
    if not halved.rounds:
        return None
    left = halved.total // sets  # every set has the same selection, so the same run lengths
    per_set = 1
    while per_set * 2 <= max(1, _BATCH_THREADS // sets) and per_set * 2 * 16 <= left:
        per_set *= 2
    chunk = -(-left // per_set)
    count = sets * per_set
    partials = ws.buffer("batch_partials", np.uint32, count * group.xyzz_words)
    be.launch(module, group.kernel("affine_chunk_sums"), count,
              (halved.data, partials, np.uint64(sets), np.uint64(left), np.uint64(per_set), np.uint32(chunk)))
    current = _sum_partials(be, ws, group, partials, count, sets)
    return be.download(current[:sets * group.xyzz_words]).reshape(sets, group.xyzz_words)


def _batch_add_xyzz(be: Any, ws: _Workspace, points: DevicePoints, sets: int, size: int,
                    bits: Any) -> list[bytes]:
    """batch_add_sets by XYZZ additions straight from the bitmap. Sizes whose passes would
    mix sets (not a multiple of the first pass's chunk, or a chunk count that is not a power
    of two) run one set at a time."""
    module = affine_rounds.curve_module("batch_add")  # the XYZZ_PRODUCTS build
    group, words = points.group, points.group.xyzz_words
    chunk = _batch_chunk(points.n if sets > 1 else size)
    per_set = size // chunk if size % chunk == 0 else 0
    if sets > 1 and (size % 8 or per_set == 0 or per_set & (per_set - 1)):
        return [_batch_add_xyzz(be, ws, p, 1, size, bits)[0] for p in views(points, sets)]
    if sets == 1:
        chunk = _batch_chunk(size)
        count = -(-size // chunk)
        joined = bits
    else:
        count = sets * per_set
        joined = ws.buffer("bitmap_sets", np.uint8, sets * bits.size).reshape(sets, bits.size)
        joined[...] = bits[None, :]
        joined = joined.reshape(-1)
    current = ws.buffer("batch_partials", np.uint32, count * words)
    be.launch(module, group.kernel("batch_add_chunks"), count,
              (points.data, joined, current, np.uint64(points.n), np.uint64(count), np.uint32(chunk)))
    current = _sum_partials(be, ws, group, current, count, sets)
    totals = be.download(current[:sets * words]).reshape(sets, words)
    return [encode_affine(point, group) for point in _rows_to_affine(totals, group)]


def _sum_partials(be: Any, ws: _Workspace, group: Group, current: Any, count: int, sets: int) -> Any:
    """batch_add's later passes: groups of partials summed until one is left per set. With
    several sets each set's count is a power of two, and so is every group size: a group
    never straddles two sets."""
    module = affine_rounds.curve_module("batch_add")  # the XYZZ_PRODUCTS build
    parity = 0
    while count > sets:
        size = _GROUP if sets == 1 else min(_GROUP, count // sets)
        out_count = -(-count // size)
        out = ws.buffer(f"batch_level{parity}", np.uint32, out_count * group.xyzz_words)
        be.launch(module, group.kernel("xyzz_sum_groups"), out_count,
                  (current, out, np.uint64(count), np.uint64(out_count), np.uint32(size)))
        current, count, parity = out, out_count, parity ^ 1
    return current


def _check_bitmap(bitmap: Any, n: int) -> None:
    if bitmap.ndim != 1 or bitmap.dtype != np.uint8 or int(bitmap.shape[0]) != (n + 7) // 8:
        raise ValueError(f"bitmap must be uint8 of {(n + 7) // 8} bytes, got {bitmap.dtype} {bitmap.shape}")


def _batch_chunk(points: int) -> int:
    """Points per thread in batch_add's first pass: 256 (one full wave of 2^16 threads at
    2^24), halved down to 64 (the kernel reads the bitmap a 64-bit word at a time) while fewer
    than 2^16 threads would run. One set of 2^22 points gave 16k threads, a sixteenth of what
    the H200 keeps resident."""
    chunk = _BATCH_CHUNK
    while chunk > 64 and -(-points // chunk) < _BATCH_THREADS:
        chunk //= 2
    return chunk
