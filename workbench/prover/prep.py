"""Witness preparation for the G1 query MSMs: split off the 0 and 1 scalars.

Real witnesses are dominated by 0 and 1 (booleans, selector wires). A zero
contributes nothing, and a one only needs the point itself, so a query can be
computed as a plain sum of the points whose scalar is one (``batch_add``) plus
an MSM over the remaining "other" scalars (the tail). That pays off when the
tail is small; otherwise a single MSM over every nonzero scalar is used.

In this workbench the queries L, A and B (G1) all range over the same full
witness vector (a real prover uses only the private part for L), so they get
the same classification and, with one threshold, the same split decision. The
decision is still reported per query so callers need not know that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from workbench.prover import native
from workbench.prover.curve import R_MODULUS, G1Points, batch_add, msm
from workbench.prover.srs import Srs

__all__ = [
    "MONT_ONE",
    "QUERIES",
    "PrepResult",
    "b_g2_msm",
    "b_g2_msm_prepared",
    "batch_add_queries",
    "prep_msm",
    "query_points",
    "tail_msm_queries",
]

QUERIES = ("l", "a", "b")
"""G1 queries over the witness, in the order they are reported."""

_MONT_ONE_INT = pow(2, 256, R_MODULUS)
MONT_ONE = np.array([(_MONT_ONE_INT >> (64 * i)) & (2**64 - 1) for i in range(4)], np.uint64)
"""The scalar 1 in Montgomery form, as little-endian limbs."""


@dataclass(frozen=True, eq=False)
class PrepResult:
    """Classification of a witness of ``m`` Montgomery scalars.

    ``tail_indices`` / ``tail_scalars`` are the scalars the MSM part of each
    query must process: the "other" scalars (neither 0 nor 1) when the query
    is split, otherwise every nonzero scalar (ones included), which makes the
    tail MSM the full MSM. They are shared by all queries, which is sound
    because the split decision is the same for all of them (see module doc).
    """

    m: int
    n_zero: int
    n_one: int
    n_other: int
    ones_mask: np.ndarray
    """bool (m,): scalar == 1."""
    ones_bitmap: np.ndarray
    """uint8 (ceil(m/8),): ``ones_mask`` packed, bit ``i % 8`` of byte ``i // 8``."""
    tail_indices: np.ndarray
    """int64 (t,): witness positions of the tail scalars, ascending."""
    tail_scalars: np.ndarray
    """uint64 (t, 4), C-contiguous: the witness rows at ``tail_indices``."""
    split: Mapping[str, bool]
    """Per query in :data:`QUERIES`: batch_add + tail MSM (True) or full MSM (False)."""
    split_threshold: float

    @property
    def nbytes(self) -> int:
        """Bytes of the prepared arrays (what a device backend would upload)."""
        return int(
            self.ones_mask.nbytes
            + self.ones_bitmap.nbytes
            + self.tail_indices.nbytes
            + self.tail_scalars.nbytes
        )

    @property
    def n_tail(self) -> int:
        return int(self.tail_indices.shape[0])


def prep_msm(w: np.ndarray, split_threshold: float = 0.5, native_code: bool | None = None) -> PrepResult:
    """Classify the witness and build the bitmap and tail arrays.

    A query is split when ``n_other <= split_threshold · m``. ``native_code`` as for
    SyntheticCircuit: None uses the compiled passes when available, False the numpy ones.
    """
    arr = np.asarray(w)
    if arr.dtype != np.uint64 or arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"witness must be uint64 of shape (m, 4), got {arr.dtype} {arr.shape}")
    if not 0.0 <= split_threshold <= 1.0:
        raise ValueError(f"split_threshold must be in [0, 1], got {split_threshold}")
    m = int(arr.shape[0])
    lib = None if native_code is False else native.library()
    if lib is None and native_code:
        raise native.NativeUnavailable(native.status())
    if lib is not None and m and arr.flags.c_contiguous:
        return _prep_native(lib, arr, split_threshold)

    # Pass 1: classify. Rows are fully reduced, so limb equality is value equality. Column by
    # column rather than row reductions over (m, 4) temporaries: less than half the time.
    limbs = [arr[:, k] for k in range(4)]
    nonzero = limbs[0] | limbs[1]
    nonzero |= limbs[2]
    nonzero |= limbs[3]
    zero = nonzero == 0
    one = limbs[0] == MONT_ONE[0]
    for k in range(1, 4):
        one &= limbs[k] == MONT_ONE[k]
    n_zero = int(np.count_nonzero(zero))
    n_one = int(np.count_nonzero(one))
    n_other = m - n_zero - n_one
    do_split = n_other <= split_threshold * m

    # Pass 2: the bitmap and the dense tail.
    ones_bitmap = np.packbits(one, bitorder="little")
    tail_sel = ~(zero | one) if do_split else ~zero
    tail_indices = np.flatnonzero(tail_sel).astype(np.int64, copy=False)
    tail_scalars = np.ascontiguousarray(arr[tail_indices])

    return _result(m, n_zero, n_one, one, ones_bitmap, tail_indices, tail_scalars, do_split,
                   split_threshold)


def _prep_native(lib: Any, arr: np.ndarray, split_threshold: float) -> PrepResult:
    """prep_msm through synthesis.c: the same two passes without numpy's temporaries."""
    m = int(arr.shape[0])
    one = np.empty(m, np.bool_)
    ones_bitmap = np.empty((m + 7) // 8, np.uint8)
    counts = np.zeros(2, np.uint64)
    lib.wb_classify(arr.ctypes.data, m, one.ctypes.data, ones_bitmap.ctypes.data, counts.ctypes.data)
    n_zero, n_one = int(counts[0]), int(counts[1])
    n_other = m - n_zero - n_one
    do_split = n_other <= split_threshold * m
    size = n_other if do_split else m - n_zero
    tail_indices = np.empty(size, np.int64)
    tail_scalars = np.empty((size, 4), np.uint64)
    written = lib.wb_tail(arr.ctypes.data, m, one.ctypes.data, int(do_split), tail_indices.ctypes.data,
                          tail_scalars.ctypes.data)
    if written != size:  # the witness changed under us: another thread wrote it between passes
        raise RuntimeError(f"prep_msm counted {size} tail scalars but found {written}")
    return _result(m, n_zero, n_one, one, ones_bitmap, tail_indices, tail_scalars, do_split,
                   split_threshold)


def _result(m: int, n_zero: int, n_one: int, one: np.ndarray, ones_bitmap: np.ndarray,
            tail_indices: np.ndarray, tail_scalars: np.ndarray, do_split: bool,
            split_threshold: float) -> PrepResult:
    for a in (one, ones_bitmap, tail_indices, tail_scalars):
        a.setflags(write=False)
    n_other = m - n_zero - n_one
    return PrepResult(
        m=m,
        n_zero=n_zero,
        n_one=n_one,
        n_other=n_other,
        ones_mask=one,
        ones_bitmap=ones_bitmap,
        tail_indices=tail_indices,
        tail_scalars=tail_scalars,
        split=MappingProxyType(dict.fromkeys(QUERIES, do_split)),
        split_threshold=float(split_threshold),
    )


def query_points(srs: Srs, query: str) -> G1Points:
    """The SRS points a query name in :data:`QUERIES` refers to."""
    points = {"l": srs.l, "a": srs.a, "b": srs.b_g1}.get(query)
    if points is None:
        raise KeyError(f"unknown query {query!r}; expected one of {QUERIES}")
    return points


def _check_sizes(prep: PrepResult, srs: Srs) -> None:
    if prep.m != srs.m:
        raise ValueError(f"witness has {prep.m} scalars but the SRS was built for m={srs.m}")


def batch_add_queries(prep: PrepResult, srs: Srs) -> dict[str, G1Point]:
    """Per query, the sum of the points whose scalar is 1.

    Queries that are not split get the identity, so for every query the result
    is ``batch_add_queries(...)[q] + tail_msm_queries(...)[q]``.
    """
    _check_sizes(prep, srs)
    out: dict[str, G1Point] = {}
    for q in QUERIES:
        points = query_points(srs, q)
        out[q] = batch_add(points, prep.ones_bitmap) if prep.split[q] else G1Point.identity()
    return out


def tail_msm_queries(prep: PrepResult, srs: Srs) -> dict[str, G1Point]:
    """Per query, the MSM over the tail (the full MSM for queries not split)."""
    _check_sizes(prep, srs)
    return {q: msm(query_points(srs, q), prep.tail_scalars, prep.tail_indices) for q in QUERIES}


def b_g2_msm(w: np.ndarray, srs: Srs) -> G2Point:
    """The B query in G2: one MSM over the nonzero scalars of the witness."""
    arr = np.asarray(w)
    if arr.dtype != np.uint64 or arr.ndim != 2 or arr.shape != (srs.m, 4):
        raise ValueError(
            f"witness must be uint64 of shape ({srs.m}, 4), got {arr.dtype} {arr.shape}"
        )
    nonzero = np.flatnonzero(arr.any(axis=1))
    return msm(srs.b_g2, np.ascontiguousarray(arr[nonzero]), nonzero)


def b_g2_msm_prepared(prep: PrepResult, srs: Srs) -> G2Point:
    """The B query in G2 from prep_msm's arrays, as the G1 queries do it: the points whose
    scalar is 1 summed by batch addition, an MSM over the tail only. Equal to
    :func:`b_g2_msm`, and much cheaper when most scalars are 0 or 1: an addition per one
    instead of a share of a 255-bit multiplication."""
    _check_sizes(prep, srs)
    tail = msm(srs.b_g2, prep.tail_scalars, prep.tail_indices)
    if not prep.split["b"]:
        return tail
    return batch_add(srs.b_g2, prep.ones_bitmap) + tail
