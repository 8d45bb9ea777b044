"""A synthetic circuit whose synthesis costs what real synthesis costs in kind.

The circuit has n = 2^k constraints over a witness of m = n scalars. Its structure is fixed
by the seed (the same circuit for every partition); each partition has its own witness, in
which a share `bool_fraction` of scalars is 0 or 1 (half each), the rest random field
elements below 2^254, as in bit-heavy circuits.

Constraint i reads `terms` witness entries at scattered positions (fixed odd-stride
permutations of the index, so the reads sweep all of memory) and sets

    a_i = w[p_1(i)] + ... + w[p_terms(i)]
    b_i = w[q(i)] + 1
    c_i = a_i · b_i

so a ⊙ b = c holds on the domain (the quotient h is a true polynomial). Cost per constraint
is `terms` random-access reads and field additions, one field multiplication and three
32-byte writes; `terms` is the knob (RunConfig.synth_terms).

Two codes compute the same bytes: the compiled loops of prover/native (used when a C
compiler is at hand) and numpy over chunks (the reference, and the fallback). Both release
the interpreter lock: synthesis threads really run in parallel and really compete for host
memory bandwidth. The compiled code costs what a real prover's synthesis costs in kind; with
numpy's many passes per multiplication 14 processes made about one 2^22 partition a second
on the H200 host, a third of what the GPU side could take, and every run waited for them.

The witness comes from a counter-mode generator (entry i from draws 5i .. 5i+4 of a stream
keyed by seed and partition), so any range of it can be made on its own and both codes
agree without sharing state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from workbench.prover import field, native

CHUNK = 1 << 17  # constraints per step: few numpy calls (each retakes the interpreter lock)

_U64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_DRAWS = 5  # generator draws per witness entry (synthesis.c: DRAWS)
_TOP_LIMB = np.uint64((1 << 62) - 1)  # random entries are below 2^254 < r


def _mix64_int(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _U64
    return z ^ (z >> 31)


def _mix64(z: np.ndarray) -> np.ndarray:
    """synthesis.c's mix64 over a uint64 array (array products wrap modulo 2^64 silently)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def witness_key(seed: int, partition: int) -> int:
    """The generator key of one partition's witness."""
    return _mix64_int((_mix64_int((seed * _GOLDEN + 0x517) & _U64) + partition * _GOLDEN) & _U64)


class SynthesisCancelled(Exception):
    """Synthesis noticed a stop request between chunks and gave up the partition."""


class SynthesisTarget(Protocol):
    witness: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray


class SyntheticCircuit:
    def __init__(self, log2_constraints: int, bool_fraction: float, terms: int, seed: int,
                 native_code: bool | None = None) -> None:
        """`native_code`: None uses the compiled code when it can be built, True insists on it
        (NativeUnavailable otherwise), False keeps to numpy."""
        self.log2 = log2_constraints
        self.n = 1 << log2_constraints
        self.m = self.n
        self.bool_fraction = float(bool_fraction)
        self.terms = terms
        self.seed = seed
        structure = np.random.default_rng([seed, 0xC1C])
        mask = self.m - 1
        # Odd multipliers make i -> (i*mul + off) mod m a permutation of the witness.
        self._mul = (structure.integers(0, self.m, size=terms + 1, dtype=np.int64) & mask) | 1
        self._off = structure.integers(0, self.m, size=terms + 1, dtype=np.int64)
        self._mul_u64 = self._mul.astype(np.uint64)
        self._off_u64 = self._off.astype(np.uint64)
        # Thresholds on a draw's top 53 bits: below `half` the entry is 0, below `cut` it is 1.
        self._cut = min(1 << 53, max(0, round(self.bool_fraction * (1 << 53))))
        self._half = self._cut // 2
        if native_code is False:
            self._lib = None
        else:
            self._lib = native.library()
            if self._lib is None and native_code:
                raise native.NativeUnavailable(native.status())

    @property
    def code(self) -> str:
        """Which code synthesises: "native" or "numpy"."""
        return "native" if self._lib is not None else "numpy"

    def witness(self, partition: int, out: np.ndarray) -> None:
        key = witness_key(self.seed, partition)
        if self._lib is not None and _native_rows(out, self.m):
            self._lib.wb_witness(key, self._half, self._cut, 0, self.m, out.ctypes.data)
            return
        step = np.uint64((_DRAWS * _GOLDEN) & _U64)
        for lo in range(0, self.m, CHUNK):
            hi = min(self.m, lo + CHUNK)
            base = np.arange(lo, hi, dtype=np.uint64) * step + np.uint64(key)
            v = _mix64(base) >> np.uint64(11)
            rows = out[lo:hi]
            rows[v < self._half] = 0
            rows[(v >= self._half) & (v < self._cut)] = field.MONT_ONE
            other = v >= self._cut
            drawn = base[other]
            fresh = np.empty((drawn.size, 4), np.uint64)
            for q in range(4):
                fresh[:, q] = _mix64(drawn + np.uint64((q + 1) * _GOLDEN & _U64))
            fresh[:, 3] &= _TOP_LIMB
            rows[other] = fresh

    def synthesize(
        self, partition: int, target: SynthesisTarget, cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        w = target.witness
        self.witness(partition, w)
        if self._lib is not None and all(_native_rows(x, self.n) for x in (target.a, target.b, target.c)) \
                and _native_rows(w, self.m):
            self._synthesize_native(partition, target, cancelled)
            return
        # The sums and the product run on the planes form (prover/field.py) and only a, b, c
        # are converted back: through the limbs API each addition converted both operands and
        # its result, and conversions were half of synthesis.
        one = field.to_planes(field.MONT_ONE.reshape(1, 4))
        width = min(CHUNK, self.n)
        rows = np.empty((width, 4), np.uint64)
        acc, term, bp, cp = (np.empty((field.PLANE_LIMBS, width), np.int64) for _ in range(4))
        for start in range(0, self.n, CHUNK):
            if cancelled():
                raise SynthesisCancelled(f"partition {partition} stopped at constraint {start}")
            stop = min(start + CHUNK, self.n)
            k = stop - start
            i = np.arange(start, stop, dtype=np.int64)
            a = self._gather(w, i, 0, rows[:k], acc[:, :k])
            for j in range(1, self.terms):
                field.padd(a, self._gather(w, i, j, rows[:k], term[:, :k]), out=a)
            b = field.padd(self._gather(w, i, -1, rows[:k], bp[:, :k]), one, out=bp[:, :k])
            field.from_planes(a, out=target.a[start:stop])
            field.from_planes(b, out=target.b[start:stop])
            field.from_planes(field.pmul(a, b, out=cp[:, :k]), out=target.c[start:stop])

    def _gather(self, w: np.ndarray, i: np.ndarray, j: int, rows: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The witness entries p_j(i) of constraints i, in planes form (through `rows`)."""
        np.take(w, (i * self._mul[j] + self._off[j]) & (self.m - 1), axis=0, out=rows)
        return field.to_planes(rows, out=out)

    def _synthesize_native(
        self, partition: int, target: SynthesisTarget, cancelled: Callable[[], bool],
    ) -> None:
        assert self._lib is not None
        args = (self._mul_u64.ctypes.data, self._off_u64.ctypes.data, self.terms)
        outs = (target.a.ctypes.data, target.b.ctypes.data, target.c.ctypes.data)
        w = target.witness.ctypes.data
        for start in range(0, self.n, CHUNK):
            if cancelled():
                raise SynthesisCancelled(f"partition {partition} stopped at constraint {start}")
            stop = min(start + CHUNK, self.n)
            if self._lib.wb_constraints(w, self.m - 1, *args, start, stop, *outs) != 0:
                raise ValueError(f"synthesis.c refused {self.terms} terms per constraint")


def _native_rows(arr: np.ndarray, rows: int) -> bool:
    """Whether the compiled code may write `arr` in place: C-contiguous uint64 of (rows, 4)."""
    return (isinstance(arr, np.ndarray) and arr.dtype == np.uint64 and arr.shape == (rows, 4)
            and arr.flags.c_contiguous and arr.flags.writeable)
