"""Fixed-base multiplication s_i·G on the GPU, in G1 and G2: the points of the Groth16 setup
(gpu/groth16_setup.py) and of random G1 queries for the MSM benchmarks.

The device runs a comb (kernels/fixed_base.cu): the table of d·2^(8w)·G for the 32 byte
positions w of a scalar and d < 256 is the CPU setup's own (prover/trusted_setup.py,
`comb_table_xy`: one table, built once per process with the curve library), so each product
is 32 mixed additions, plus one inversion for the affine result, and the result is exactly the
CPU's. Random scalars come from the caller's numpy generator, so random points are a
deterministic function of its seed. Outputs are :class:`~workbench.prover.curve.G1Points` or
G2Points bytes, the key cache's format.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.gpu import msm as gpu_msm
from workbench.prover.curve import R_MODULUS, G1Points
from workbench.prover.trusted_setup import comb_table_xy

__all__ = [
    "device_points_from_scalars",
    "fixed_base_on_device",
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


def fixed_base_table(group: str = "g1") -> np.ndarray:
    """(32 * 256, 24 or 48) uint32, read-only: canonical affine d * 2^(8w) * G at row 256 w + d
    (row 256 w is infinity, all zeros): the comb's table as the kernels' words."""
    return comb_table_xy(group).view("<u4")


def _device_table(be: Any, group: gpu_msm.Group) -> Any:
    """The table on the device in Montgomery form (the upload converts it)."""
    points = group.points_type(comb_table_xy(group.name))
    return gpu_msm.DevicePoints.from_points(points, backend=be).data


def fixed_base_on_device(be: Any, scalars: Any, group: gpu_msm.Group = gpu_msm.G1, out: Any = None) -> Any:
    """out[i] ((n, 24 or 48) uint32 device array) = canonical affine s_i * G for canonical
    (n, 4) uint64 device scalars, on the current stream."""
    n = scalars.shape[0]
    if out is None:
        out = be.xp.empty((n, group.affine_words), dtype=be.xp.uint32)
    if n:
        be.launch("fixed_base", group.kernel("fixed_base"), n,
                  (_device_table(be, group), scalars, out, np.uint64(n)))
    return out


def _fixed_base(be: Any, arr: np.ndarray, out: Any) -> None:
    """out[i] (device, (n, 24) uint32) = canonical affine s_i * G of host scalars, uploaded in
    batches of _BATCH."""
    n = arr.shape[0]
    scalars_dev = be.xp.empty((max(min(n, _BATCH), 1), 4), dtype=be.xp.uint64)
    for start in range(0, n, _BATCH):
        count = min(n, start + _BATCH) - start
        be.upload(scalars_dev[:count], arr[start : start + count])
        fixed_base_on_device(be, scalars_dev[:count], out=out[start : start + count])


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
