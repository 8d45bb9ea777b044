"""A synthetic circuit whose synthesis costs what real synthesis costs in kind.

The circuit has n = 2^k constraints over a witness of m = n scalars. Its structure is fixed
by the seed (the same circuit for every partition); each partition has its own witness, in
which a share `bool_fraction` of scalars is 0 or 1 (half each), the rest random field
elements, as in bit-heavy circuits.

Constraint i reads `terms` witness entries at scattered positions (fixed odd-stride
permutations of the index, so the reads sweep all of memory) and sets

    a_i = w[p_1(i)] + ... + w[p_terms(i)]
    b_i = w[q(i)] + 1
    c_i = a_i · b_i

so a ⊙ b = c holds on the domain (the quotient h is a true polynomial). Cost per constraint
is `terms` random-access reads and field additions, one field multiplication and three
32-byte writes; `terms` is the knob (RunConfig.synth_terms). All of it is numpy over chunks,
which releases the interpreter lock: synthesis threads really run in parallel and really
compete for host memory bandwidth, which is what the production symptom depends on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from workbench.prover import field

CHUNK = 1 << 17  # constraints per step: few numpy calls (each retakes the interpreter lock)


class SynthesisCancelled(Exception):
    """Synthesis noticed a stop request between chunks and gave up the partition."""


class SynthesisTarget(Protocol):
    witness: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray


class SyntheticCircuit:
    def __init__(self, log2_constraints: int, bool_fraction: float, terms: int, seed: int) -> None:
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

    def witness(self, partition: int, out: np.ndarray) -> None:
        rng = np.random.default_rng([self.seed, partition, 0x517])
        u = rng.random(self.m)
        # Random elements are drawn only where they end up: drawing all m and overwriting
        # the 0/1 share cost ten times as much at bool_fraction 0.9 (a second a partition at
        # 2^22) and made the witness, not the constraints, the bulk of synthesis.
        ones = u < self.bool_fraction
        out[ones] = field.MONT_ONE
        out[u < self.bool_fraction / 2] = 0
        other = ~ones
        out[other] = field.random_elements(rng, int(np.count_nonzero(other)))

    def synthesize(
        self, partition: int, target: SynthesisTarget, cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        w = target.witness
        self.witness(partition, w)
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
