"""G1 query points for large SRS sizes, generated on the GPU.

Each point is s_i * G for an independent uniform scalar s_i in [1, r), the way a real
trusted setup's points look (no linear relations between them, unlike the CPU grid method
of :mod:`workbench.prover.srs`, which is faster on the CPU but structured).

The device does a fixed-base multiplication: a table of d * 2^(8w) * G for the 32 byte
positions w of a scalar and d < 256 (8160 points, built once on the host, ~0.1 s) turns
each product into 32 mixed additions, plus one inversion for the affine result
(kernels/msm.cu, g1_fixed_base). Scalars come from the caller's numpy generator, so the
points are a deterministic function of its seed, as the on-disk cache needs. The output is
:class:`~workbench.prover.curve.G1Points` bytes, the cache's format.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, Scalar

from workbench.gpu import msm as gpu_msm
from workbench.prover.curve import R_MODULUS, G1Points

__all__ = [
    "device_points_from_scalars",
    "fixed_base_table",
    "generate_g1",
    "generate_g1_from_scalars",
    "random_scalars",
    "scalar_to_int",
]

_R_LIMBS = np.array([(R_MODULUS >> (64 * k)) & (2**64 - 1) for k in range(4)], dtype=np.uint64)
_BATCH = 1 << 22  # points per launch: bounds scratch at 128 MB of scalars and 384 MB of output


def scalar_to_int(row: np.ndarray) -> int:
    return int.from_bytes(np.ascontiguousarray(row, dtype="<u8").tobytes(), "little")


def _below_r(s: np.ndarray) -> np.ndarray:
    """Rows (uint64 limbs, little-endian) that are < r, compared limb by limb from the top."""
    less = np.zeros(s.shape[0], dtype=bool)
    equal = np.ones(s.shape[0], dtype=bool)
    for k in range(3, -1, -1):
        less |= equal & (s[:, k] < _R_LIMBS[k])
        equal &= s[:, k] == _R_LIMBS[k]
    return less


def random_scalars(count: int, rng: np.random.Generator) -> np.ndarray:
    """(count, 4) uint64 canonical scalars, uniform in [1, r), by rejection of 255-bit draws
    (about 9% are redrawn); vectorised, about 1 s for 2^24."""
    out = np.empty((count, 4), dtype=np.uint64)
    todo = np.arange(count)
    while todo.size:
        draw = rng.integers(0, 2**64, size=(todo.size, 4), dtype=np.uint64, endpoint=False)
        draw[:, 3] &= np.uint64(2**63 - 1)
        ok = _below_r(draw) & draw.any(axis=1)
        out[todo[ok]] = draw[ok]
        todo = todo[~ok]
    return out


_table_lock = threading.Lock()
_table: np.ndarray | None = None


def fixed_base_table() -> np.ndarray:
    """(32 * 256, 24) uint32: canonical affine d * 2^(8w) * G at row 256 w + d (row 256 w is
    infinity, all zeros). Built once per process with the curve library."""
    global _table
    with _table_lock:
        if _table is None:
            rows = np.zeros((32 * 256, 96), dtype=np.uint8)
            base, shift = G1Point(), Scalar(256)
            for w in range(32):
                acc = G1Point.identity()
                for d in range(1, 256):
                    acc = acc + base
                    rows[256 * w + d] = np.frombuffer(bytes(acc.to_xy_bytes_le()), np.uint8)
                base = base * shift
            _table = rows.view("<u4").reshape(32 * 256, 24)
            _table.setflags(write=False)
        return _table


def _fixed_base(be: Any, arr: np.ndarray, out: Any) -> None:
    """out[i] (device, (n, 24) uint32) = canonical affine s_i * G, in launches of _BATCH."""
    xp = be.xp
    table = xp.empty((32 * 256, 24), dtype=xp.uint32)
    be.upload(table, fixed_base_table())
    elements = 2 * table.shape[0]
    be.launch("msm", "fp_array_to_mont", elements, (table, np.uint64(elements)), threads=256)
    n = arr.shape[0]
    scalars_dev = xp.empty((max(min(n, _BATCH), 1), 4), dtype=xp.uint64)
    for start in range(0, n, _BATCH):
        count = min(n, start + _BATCH) - start
        be.upload(scalars_dev[:count], arr[start : start + count])
        be.launch("msm", "g1_fixed_base", count,
                  (table, scalars_dev, out[start : start + count], np.uint64(count)))


def _check(scalars: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(scalars, dtype=np.uint64)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"scalars must be (n, 4) uint64, got {arr.shape}")
    return arr


def _points_of(be: Any, scalars: np.ndarray) -> Any:
    """(n, 24) uint32 device array of canonical affine s_i * G, on the current stream."""
    arr = _check(scalars)
    out = be.xp.empty((arr.shape[0], 24), dtype=be.xp.uint32)
    _fixed_base(be, arr, out)
    return out


def generate_g1_from_scalars(scalars: np.ndarray, backend: Any = None, stream: Any = None) -> G1Points:
    """s_i * G for canonical (n, 4) uint64 scalars, computed on the device, as host bytes."""
    be = backend if backend is not None else gpu_msm.default_backend()
    with be.stream_context(stream):
        out = _points_of(be, scalars)
        host = np.ascontiguousarray(be.download(out), dtype="<u4")
    return G1Points(host.view(np.uint8).reshape(out.shape[0], 96))


def device_points_from_scalars(scalars: np.ndarray, backend: Any = None,
                               stream: Any = None) -> gpu_msm.DevicePoints:
    """The same points left on the device, ready for MSMs (no host round trip)."""
    be = backend if backend is not None else gpu_msm.default_backend()
    with be.stream_context(stream):
        out = _points_of(be, scalars)
        n = out.shape[0]
        if n:
            be.launch("msm", "fp_array_to_mont", 2 * n, (out, np.uint64(2 * n)), threads=256)
    return gpu_msm.DevicePoints(data=out, n=n, backend=be)


def generate_g1(count: int, rng: np.random.Generator, backend: Any = None, stream: Any = None) -> G1Points:
    """``count`` points s_i * G with s_i from :func:`random_scalars` (deterministic in rng)."""
    return generate_g1_from_scalars(random_scalars(count, rng), backend=backend, stream=stream)
