"""The proving key's container, and synthetic key points with an on-disk and in-process cache.

:class:`Srs` holds a key's queries. The Groth16 key of the circuit, whose proofs verify, is
made by prover/trusted_setup.py (cached by prover/key_cache.py); it fills in IC, γ and the
trapdoor too. This module also makes a *synthetic* key of random points, for tests and
benchmarks of the MSMs alone (no backend runs with one): proofs made with it do not verify.

A real proving key needs one full scalar multiplication per point, which is
far too slow to produce in a notebook at 2^16. Instead each query of ``count``
points is built from two small sets of random base points
``B_0..B_{a-1}`` and ``C_0..C_{b-1}`` (``a·b ≥ count``, ``a + b ≈ 2·sqrt(count)``),
each the generator times a random scalar, and point ``i`` is ``B_j + C_k`` with
``(j, k) = divmod(i, b)``: one library addition per point.

The points are pairwise distinct (except with negligible probability) and no
point's discrete log is a simple function of its index, but the query is full
of linear relations (``P(j,k) - P(j,k') = C_k - C_k'`` for every ``j``). That is
irrelevant for timing and for checking that two MSM implementations agree; it
would be fatal for a real proof system.

Most of the generation time is spent encoding points as affine bytes (one
field inversion each, ~11 µs), not in the additions.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from workbench.prover.curve import (
    R_MODULUS,
    G1Points,
    G2Points,
    point_from_bytes,
    point_to_bytes,
)
from workbench.prover.pool import parallel_map
from workbench.trace import output

__all__ = [
    "FORMAT_VERSION",
    "Srs",
    "Trapdoor",
    "cache_path",
    "clear_memory_cache",
    "default_cache_dir",
    "load_or_generate",
]

FORMAT_VERSION = 1
"""Bump whenever generation or the file layout changes, so stale files are ignored."""

_P = TypeVar("_P", G1Point, G2Point)
_Ps = TypeVar("_Ps", G1Points, G2Points)

_MAX_LOG2 = 32  # two-adicity of Fr: no larger evaluation domain exists

# Stream ids keep each query's randomness independent of the others' sizes,
# e.g. H depends only on (log2_size, seed), not on m.
_STREAM_H, _STREAM_L, _STREAM_A, _STREAM_B_G1, _STREAM_B_G2, _STREAM_SINGLES = range(6)


@dataclass(frozen=True)
class Trapdoor:
    """The toxic waste of a Groth16 setup (canonical elements of Fr)."""

    alpha: int
    beta: int
    gamma: int
    delta: int
    tau: int

    def to_array(self) -> np.ndarray:
        values = (self.alpha, self.beta, self.gamma, self.delta, self.tau)
        raw = b"".join(v.to_bytes(32, "little") for v in values)
        return np.frombuffer(raw, np.uint8).copy()

    @classmethod
    def from_array(cls, arr: np.ndarray) -> Trapdoor:
        raw = np.asarray(arr, np.uint8).tobytes()
        if len(raw) != 5 * 32:
            raise ValueError(f"a trapdoor is 160 bytes, got {len(raw)}")
        values = [int.from_bytes(raw[i : i + 32], "little") for i in range(0, 160, 32)]
        if any(v >= R_MODULUS for v in values):
            raise ValueError("a trapdoor element is not below r")
        return cls(*values)


@dataclass(frozen=True)
class Srs:
    """Query points for domain size ``n = 2^log2_size`` and ``m`` witness scalars. A Groth16
    key (prover/trusted_setup.py) also has IC, γ·G2 and its trapdoor; a synthetic key has not."""

    log2_size: int
    m: int
    seed: int
    h: G1Points
    l: G1Points  # noqa: E741 - the conventional name of the query
    a: G1Points
    b_g1: G1Points
    b_g2: G2Points
    alpha_g1: G1Point
    beta_g1: G1Point
    beta_g2: G2Point
    delta_g1: G1Point
    delta_g2: G2Point
    gamma_g2: G2Point | None = None
    ic: G1Points | None = None
    trapdoor: Trapdoor | None = None

    @property
    def verifiable(self) -> bool:
        """Whether proofs made with this key can verify: a Groth16 key, not a synthetic one."""
        return self.ic is not None and self.gamma_g2 is not None

    @property
    def n(self) -> int:
        return 1 << self.log2_size

    @property
    def nbytes(self) -> int:
        return sum(q.nbytes for q in (self.h, self.l, self.a, self.b_g1, self.b_g2))

    @classmethod
    def generate(
        cls, log2_size: int, m: int, seed: int, g1_generator: G1Generator | None = None,
    ) -> Srs:
        """Build the key from scratch (deterministic in its arguments). `g1_generator(count,
        rng)` replaces the grid method for the G1 queries (the GPU's fixed-base generation
        at large sizes); G2 points are always built on the host."""
        _check_args(log2_size, m, seed)
        n = 1 << log2_size

        def rng(stream: int) -> np.random.Generator:
            return np.random.default_rng([seed, stream])

        g1, g2 = G1Point(), G2Point()

        def make_g1(count: int, stream_rng: np.random.Generator) -> G1Points:
            if g1_generator is not None:
                return g1_generator(count, stream_rng)
            return _grid_points(G1Points, g1, count, stream_rng)

        alpha, beta, delta = _random_scalars(rng(_STREAM_SINGLES), 3)
        return cls(
            log2_size=log2_size,
            m=m,
            seed=seed,
            h=make_g1(n, rng(_STREAM_H)),
            l=make_g1(m, rng(_STREAM_L)),
            a=make_g1(m, rng(_STREAM_A)),
            b_g1=make_g1(m, rng(_STREAM_B_G1)),
            b_g2=_grid_points(G2Points, g2, m, rng(_STREAM_B_G2)),
            alpha_g1=g1 * alpha,
            beta_g1=g1 * beta,
            beta_g2=g2 * beta,
            delta_g1=g1 * delta,
            delta_g2=g2 * delta,
        )


def _check_args(log2_size: int, m: int, seed: int) -> None:
    if not 0 <= log2_size <= _MAX_LOG2:
        raise ValueError(f"log2_size must be in [0, {_MAX_LOG2}], got {log2_size}")
    if m < 0:
        raise ValueError(f"m must be non-negative, got {m}")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")


def _random_scalars(rng: np.random.Generator, count: int) -> list[Scalar]:
    out = []
    for _ in range(count):
        # 512 random bits reduced mod r are uniform up to a 2^-257 bias.
        v = int.from_bytes(rng.bytes(64), "little") % R_MODULUS
        out.append(Scalar(v or 1))
    return out


# Encoding a point costs a field inversion (~11 µs for G1, more for G2) under the interpreter
# lock: from this many points the grid is encoded by a pool of processes, one a core.
PARALLEL_FROM = 1 << 16


def _grid_points(cls: type[_Ps], generator: Any, count: int, rng: np.random.Generator) -> _Ps:
    """The grid's points encoded: the same points (and bytes) serially or in parallel."""
    workers = min(os.cpu_count() or 1, 32)
    if count < PARALLEL_FROM or workers < 2:
        return cls.from_objects(_grid(generator, count, rng))
    rows_pts, cols_pts = _grid_bases(generator, count, rng)
    cols = len(cols_pts)
    row_bytes = [bytes(p.to_xy_bytes_le()) for p in rows_pts]
    col_bytes = [bytes(p.to_xy_bytes_le()) for p in cols_pts]
    bounds = [count * k // (4 * workers) for k in range(4 * workers + 1)]
    jobs = [(cls.GROUP, row_bytes, col_bytes, cols, lo, hi) for lo, hi in itertools.pairwise(bounds)]
    raw = b"".join(parallel_map(_encode_grid_slice, jobs, workers))
    return cls(np.frombuffer(raw, dtype=np.uint8).reshape(count, cls.POINT_BYTES))


def _encode_grid_slice(job: tuple[str, list[bytes], list[bytes], int, int, int]) -> bytes:
    group, row_bytes, col_bytes, cols, lo, hi = job
    kind: Any = G1Point if group == "g1" else G2Point
    first, last = lo // cols, (hi - 1) // cols if hi > lo else lo // cols
    rows = {r: kind.from_xy_bytes_unchecked_le(row_bytes[r]) for r in range(first, last + 1)}
    columns = [kind.from_xy_bytes_unchecked_le(c) for c in col_bytes]
    return b"".join(bytes((rows[i // cols] + columns[i % cols]).to_xy_bytes_le()) for i in range(lo, hi))


def _grid_bases(generator: _P, count: int, rng: np.random.Generator) -> tuple[list[_P], list[_P]]:
    rows = math.isqrt(count - 1) + 1
    cols = -(-count // rows)
    row_pts = [generator * s for s in _random_scalars(rng, rows)]
    col_pts = [generator * s for s in _random_scalars(rng, cols)]
    return row_pts, col_pts


def _grid(generator: _P, count: int, rng: np.random.Generator) -> list[_P]:
    if count == 0:
        return []
    row_pts, col_pts = _grid_bases(generator, count, rng)
    cols = len(col_pts)
    return [row_pts[i // cols] + col_pts[i % cols] for i in range(count)]


# ---------------------------------------------------------------- caching

_QUERY_KEYS = ("h", "l", "a", "b_g1", "b_g2")
_Key = tuple[int, int, int]
G1Generator = Callable[[int, np.random.Generator], G1Points]

_memory: dict[tuple[int, int, int, str], Srs] = {}
_key_locks: dict[tuple[int, int, int, str], threading.Lock] = {}
_key_locks_guard = threading.Lock()


def default_cache_dir() -> Path:
    """``$WORKBENCH_CACHE/srs`` if that variable is set, else ``~/.cache/workbench/srs``."""
    root = os.environ.get("WORKBENCH_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "workbench"
    return base / "srs"


def cache_path(
    log2_size: int, m: int, seed: int, cache_dir: str | Path | None = None, method: str = "grid",
) -> Path:
    """The cache file; keys made by another method than the grid carry its name, since
    their points differ."""
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    suffix = "" if method == "grid" else f"-{method}"
    return directory / f"srs-v{FORMAT_VERSION}-k{log2_size}-m{m}-s{seed}{suffix}.npz"


def clear_memory_cache() -> None:
    """Forget keys held in this process (files on disk are kept)."""
    with _key_locks_guard:
        _memory.clear()


def load_or_generate(
    log2_size: int, m: int, seed: int, cache_dir: str | Path | None = None,
    g1_generator: G1Generator | None = None, method: str = "grid",
) -> Srs:
    """Return the key from memory, else from the cache file, else generate and store it.

    A file that is unreadable, truncated, of another format version or for
    other parameters is silently replaced. Failing to write the file (e.g. a
    read-only directory) is not an error: the cache is only an optimisation.
    Concurrent callers in one process asking for the same key generate once.
    `g1_generator` and `method` name another way to make the G1 points (see Srs.generate).
    """
    _check_args(log2_size, m, seed)
    key = (log2_size, m, seed)
    memory_key = (*key, method)
    with _key_locks_guard:
        lock = _key_locks.setdefault(memory_key, threading.Lock())
    with lock:
        hit = _memory.get(memory_key)
        if hit is not None:
            return hit
        path = cache_path(log2_size, m, seed, cache_dir, method)
        srs = _read(path, key)
        if srs is None:
            extra = {} if g1_generator is None else {"g1_generator": g1_generator}
            srs = Srs.generate(log2_size, m, seed, **extra)
            _write(path, srs)
        _memory[memory_key] = srs
        return srs


def to_arrays(srs: Srs) -> dict[str, np.ndarray]:
    """The queries and single points of a key as the cache file's arrays."""
    arrays = {name: getattr(srs, name).xy for name in _QUERY_KEYS}
    arrays["version"] = np.array(FORMAT_VERSION, dtype=np.int64)
    arrays["params"] = np.array([srs.log2_size, srs.m, srs.seed], dtype=np.int64)
    g1 = (srs.alpha_g1, srs.beta_g1, srs.delta_g1)
    g2 = (srs.beta_g2, srs.delta_g2)
    arrays["singles_g1"] = np.frombuffer(b"".join(map(point_to_bytes, g1)), np.uint8)
    arrays["singles_g2"] = np.frombuffer(b"".join(map(point_to_bytes, g2)), np.uint8)
    return arrays


def _read(path: Path, key: _Key) -> Srs | None:
    if not path.is_file():
        return None
    # Any failure means "no usable cache": zip, npy-header and shape errors all
    # surface as different exception types, and regeneration is always safe.
    try:
        # Opening the file here, not in np.load, guarantees it is closed when
        # the zip turns out to be unreadable.
        with path.open("rb") as f, np.load(f, allow_pickle=False) as z:
            if int(z["version"]) != FORMAT_VERSION:
                return None
            if tuple(int(v) for v in z["params"]) != key:
                return None
            names = (*_QUERY_KEYS, "singles_g1", "singles_g2")
            arrays = {name: np.array(z[name]) for name in names}
        return from_arrays(key, arrays)
    except Exception:
        return None


def from_arrays(key: _Key, arrays: dict[str, np.ndarray]) -> Srs | None:
    """to_arrays' inverse for (log2_size, m, seed); None when a query has the wrong size."""
    log2_size, m, seed = key
    expected = {"h": 1 << log2_size, "l": m, "a": m, "b_g1": m, "b_g2": m}
    for name, count in expected.items():
        if arrays[name].shape[0] != count:
            return None
    s1 = arrays["singles_g1"].tobytes()
    s2 = arrays["singles_g2"].tobytes()
    w1, w2 = G1Points.POINT_BYTES, G2Points.POINT_BYTES
    if len(s1) != 3 * w1 or len(s2) != 2 * w2:
        return None
    # Checked parsing of the few single points catches most garbage; the bulk
    # query points are trusted, relying on the zip CRC for bit rot.
    alpha_g1, beta_g1, delta_g1 = (point_from_bytes(s1[i : i + w1]) for i in range(0, 3 * w1, w1))
    beta_g2, delta_g2 = (point_from_bytes(s2[i : i + w2]) for i in range(0, 2 * w2, w2))
    assert isinstance(alpha_g1, G1Point) and isinstance(beta_g1, G1Point)
    assert isinstance(delta_g1, G1Point)
    assert isinstance(beta_g2, G2Point) and isinstance(delta_g2, G2Point)
    return Srs(
        log2_size=log2_size,
        m=m,
        seed=seed,
        h=G1Points(arrays["h"]),
        l=G1Points(arrays["l"]),
        a=G1Points(arrays["a"]),
        b_g1=G1Points(arrays["b_g1"]),
        b_g2=G2Points(arrays["b_g2"]),
        alpha_g1=alpha_g1,
        beta_g1=beta_g1,
        beta_g2=beta_g2,
        delta_g1=delta_g1,
        delta_g2=delta_g2,
    )


def _write(path: Path, srs: Srs) -> None:
    write_arrays(path, to_arrays(srs))


def write_arrays(path: Path, arrays: dict[str, Any]) -> None:
    """Store arrays as an .npz file atomically; a failure to write is silently ignored."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Named after the writing process, as every output's temporary file is, so the part
        # file of a writer killed mid-save (gigabytes at 2^22) is removed by the next writer.
        output.remove_stale_temporaries(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=output.temporary_prefix(path),
                                   suffix=output.TEMPORARY_SUFFIX)
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        # Readers in other processes see either no file or a complete one.
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
