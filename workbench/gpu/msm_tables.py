"""Precomputed window multiples of fixed MSM bases, and the window rule of the MSM over them.

The bases of a prover's MSMs are its proving key's points, fixed for the whole run, so a
table built from them once is fair (issue 17's rules), its memory and setup time counted.
For c-bit windows, W = :func:`window_count` (c) of them, the table of n bases holds
Q_{w,i} = 2^(c w) * P_i at row w * n + i (kernels/msm.cu, msm_window_table), so that
sum_i s_i P_i = sum_{w,i} d_{w,i} Q_{w,i} over the scalars' signed digits: the MSM's sort puts
every window's entries into one set of 2^(c-1) + 1 buckets (msm_sort.cuh, the *_fixed
kernels), the bucket reduction runs once instead of W times, and no window combination is
left. The price is W times the bases' memory on each GPU that holds them (2^24 G1 bases at
c = 22: 12 windows, 19.3 GB) and one pass of about c (W - 1) doublings a base to build it.

Tables are built for G1 bases only (kernels/msm.cu says why). This module sits below msm.py
(which runs the MSM over a table, switch msm.PRECOMPUTED): it knows the bases only by their
attributes (data, n, backend, group).
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.gpu import affine_rounds

MAX_WINDOW_BITS = 24
"""The widest window over a table: 2^23 buckets of 192-byte G1 sums (1.6 GB), paid once."""

BUCKET_WEIGHT = 5
"""What one bucket costs beside one entry, in the window rule below: on the H200 at 2^24
(kernels/NOTES_msm.md, sitting D) the sort, rounds and accumulation took ~0.78 ns an entry
(171 ms for 218M) and the reduction ~3.8 ns a bucket (26.0 ms for 6.8M)."""


def window_count(c: int) -> int:
    """Windows of c bits for scalars below r < 2^255 with signed digits: W * c >= 256 leaves
    room for the last carry (kernels/msm_sort.cuh, msm_for_each_digit)."""
    return -(-256 // c)


def fixed_window_bits(m: int, sets: int = 1) -> int:
    """Window size c for an MSM of m scalars over a table (`sets` point sets sharing them).

    Minimises  m * W + BUCKET_WEIGHT * sets * 2^(c-1)  over c in [2, MAX_WINDOW_BITS]: m W
    entries to sort and accumulate, and one set of buckets a point set to reduce (not W of
    them, as without a table, so wider windows pay). It gives c = 19 at 2^20, 20 at 2^22 and
    22 at 2^24, where the table holds 12 windows instead of the 13 of c = 20.
    """
    if m < 1:
        raise ValueError(f"m must be positive, got {m}")
    return min(range(2, MAX_WINDOW_BITS + 1),
               key=lambda c: (m * window_count(c) + BUCKET_WEIGHT * sets * (1 << (c - 1)), -c))


@dataclass(frozen=True, eq=False)
class WindowTable:
    """The window multiples of one set of bases, on the device that holds the bases."""

    data: Any  # (windows * n, affine words) uint32: row w * n + i is 2^(c w) * P_i
    n: int
    c: int
    windows: int
    setup_ms: float  # the build, measured on the host around the launch and a read-back
    group: str

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    def describe(self) -> dict[str, Any]:
        """For a run's metadata: what the table costs and where it lives."""
        return {"group": self.group, "bases": self.n, "window_bits": self.c, "windows": self.windows,
                "bytes": self.nbytes, "setup_ms": round(self.setup_ms, 3), "where": "device memory per GPU"}


def table_bytes(n: int, c: int, affine_words: int) -> int:
    """Device bytes of the table of n bases at window c."""
    return window_count(c) * n * affine_words * 4


def build(points: Any, c: int, stream: Any = None) -> WindowTable:
    """The table of `points` (msm.DevicePoints) at window c, built on its device on `stream`
    (the current one by default)."""
    if not 2 <= c <= MAX_WINDOW_BITS:
        raise ValueError(f"window must be in [2, {MAX_WINDOW_BITS}], got {c}")
    windows = window_count(c)
    if windows * points.n >= 1 << 31:
        raise ValueError(f"a table of {windows} x {points.n} rows is past the 32-bit entry indexing")
    be, group = points.backend, points.group
    if group.name != "g1":
        raise ValueError(f"window tables are built for G1 bases only, got {group.name}")
    with be.stream_context(stream):
        data = be.xp.empty((windows * points.n, group.affine_words), dtype=np.uint32)
        start = time.perf_counter()
        if points.n:
            be.download(points.data[:1])  # work queued before the build is not its time
            start = time.perf_counter()
            be.launch(affine_rounds.curve_module("msm"), group.kernel("msm_window_table"), points.n,
                      (points.data, data, np.uint64(points.n), np.uint32(c), np.uint32(windows)))
            be.download(data[-1:])  # waits for the build
        setup_ms = (time.perf_counter() - start) * 1e3
    return WindowTable(data=data, n=points.n, c=c, windows=windows, setup_ms=setup_ms, group=group.name)


class TableCache:
    """One table per set of bases (per device-points object, so per GPU), kept while those
    bases live: repeated MSMs over the same bases reuse it."""

    def __init__(self) -> None:
        self._tables: weakref.WeakKeyDictionary[Any, WindowTable] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, points: Any) -> WindowTable | None:
        with self._lock:
            return self._tables.get(points)

    def build(self, points: Any, c: int, stream: Any = None) -> WindowTable:
        """The table of `points` at window c: the cached one if it has that window, else a new
        one, replacing the old (bases keep one table)."""
        with self._lock:
            table = self._tables.get(points)
            if table is not None and table.c == c:
                return table
            self._tables.pop(points, None)
            table = self._tables[points] = build(points, c, stream)
            return table

    def drop(self, points: Any) -> None:
        with self._lock:
            self._tables.pop(points, None)


TABLES = TableCache()
"""The process's tables (msm.py's fixed path looks here)."""
