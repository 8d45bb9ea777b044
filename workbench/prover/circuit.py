"""A synthetic circuit: a real R1CS whose synthesis costs what real synthesis costs in kind.

The circuit has n = 2^k constraints over m = n variables z. Its structure is fixed by the
seed (the same circuit for every partition); each partition has its own witness.

    z_0 = 1                                            row 0:  (z_0 + Σ_other z_i) · 0 = 0
    z_1 .. z_PUBLIC the public inputs                  row 1:  0 · (z_1 + Σ_other z_i) = 0
                                                       row j ≤ PUBLIC:  z_j · 0 = 0
    boolean z_j (a share `bool_fraction` of the rest)  row j:  z_j · (z_j − 1) = 0
    every other z_j, defined from earlier variables    row j:  (k_j + Σ_t z_p_t(j)) · (z_q(j) + k_b) = z_j

The input rows give each public input a row of its own (which keeps their columns
independent, as Groth16 wants). Rows 0 and 1 also name every other variable, in A and in B:
with B or A empty they hold whatever the values, and without them a variable that no later
constraint reads (all of the top half) would have empty A and B columns, so identity points
in the A and B queries: 77 % and 91 % of the tail's at 2^12 and bool_fraction 0.9, where an
MSM does next to nothing (real provers drop such points by density; ours keep every point).

Every row j > PUBLIC computes x = k_j + Σ_t z_p_t(j) and y = z_q(j) + k_b and their
product: an other variable is that product (a uniform-looking field element thanks to the
structure's random constants; with one constant for all rows instead of k_j, a sum of
booleans takes few values and so would the products, a witness of many equal scalars); a
boolean is the low bit of the product's Montgomery form, a bit decomposition's advice derived
from earlier values as real circuits derive bits. So every constraint costs the same reads,
additions and product, whatever bool_fraction is. The reads p_t(j), q(j) =
(j·mul + off) & (2^⌊log2 j⌋ − 1) are odd-stride permutations of the rows below the largest
power of two ≤ j, so each variable is defined by earlier ones and the reads sweep all of
memory; `terms` (RunConfig.synth_terms) sets the cost per constraint. Synthesis writes z
and a = A·z, b = B·z, c = C·z on the domain, so a ⊙ b = c holds on it and the quotient h is
a true polynomial; `r1cs()` gives the matrices themselves (for the trusted setup and for
checking the witness).

Two codes compute the same bytes: the compiled loops of prover/native (used when a C
compiler is at hand) and numpy over blocks (the reference, and the fallback). Both release
the interpreter lock: synthesis threads really run in parallel and really compete for host
memory bandwidth. The compiled code costs what a real prover's synthesis costs in kind; with
numpy's many passes per multiplication 14 processes made about one 2^22 partition a second
on the H200 host (measured before the circuit became an R1CS), a third of what the GPU side
could take, and every run waited for them.

Random draws come from a counter-mode generator (the public inputs from draws 5j+1 .. 5j+4 of
a stream keyed by seed and partition; the boolean pattern and the constants k_j from streams
keyed by the seed alone), so both codes agree without sharing state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Protocol

import numpy as np

from workbench.prover import field, native

CHUNK = 1 << 17  # constraints per step: few numpy calls (each retakes the interpreter lock)
PUBLIC = 2  # public inputs besides the constant 1: z_1, z_2
MIN_LOG2 = 2  # rows 0..PUBLIC and at least one constraint

_U64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_DRAWS = 5  # generator draws per witness entry (synthesis.c: DRAWS)
_TOP_LIMB = np.uint64((1 << 62) - 1)  # public inputs are below 2^254 < r
_MINUS_ONE = field.to_mont([field.MODULUS - 1])[0]


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


def structure_key(seed: int) -> int:
    """The generator key of the circuit's boolean pattern."""
    return _mix64_int(_mix64_int((seed * _GOLDEN + 0xC1C) & _U64))


def _floor_pow2(j: np.ndarray) -> np.ndarray:
    """The largest power of two <= j, for j >= 1 (uint64)."""
    p = j.copy()
    for s in (1, 2, 4, 8, 16, 32):
        p |= p >> np.uint64(s)
    return (p >> np.uint64(1)) + np.uint64(1)


class SynthesisCancelled(Exception):
    """Synthesis noticed a stop request between chunks and gave up the partition."""


class SynthesisTarget(Protocol):
    witness: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray


@dataclass(frozen=True)
class Matrix:
    """A sparse matrix as coordinate lists: entry e is M[rows[e], cols[e]], its coefficient's
    Montgomery form at forms[e] ((nnz, 4) uint64, the shared format: the device multiplies
    them as they are, and hashing them costs one pass); duplicates add up."""

    rows: np.ndarray
    cols: np.ndarray
    forms: np.ndarray

    @functools.cached_property
    def coeffs(self) -> list[int]:
        """The coefficients as canonical ints (for the host's integer code, small sizes)."""
        return field.from_mont(self.forms)

    def times(self, z: list[int], n: int) -> list[int]:
        """M·z over Python integers (canonical values)."""
        out = [0] * n
        for i, j, k in zip(self.rows.tolist(), self.cols.tolist(), self.coeffs, strict=True):
            out[i] += k * z[j]
        return [v % field.MODULUS for v in out]


@dataclass(frozen=True)
class R1cs:
    n: int
    m: int
    public: int  # public inputs besides the constant: variables 1..public
    a: Matrix
    b: Matrix
    c: Matrix


class SyntheticCircuit:
    def __init__(self, log2_constraints: int, bool_fraction: float, terms: int, seed: int,
                 native_code: bool | None = None) -> None:
        """`native_code`: None uses the compiled code when it can be built, True insists on it
        (NativeUnavailable otherwise), False keeps to numpy."""
        if log2_constraints < MIN_LOG2:
            raise ValueError(f"the circuit needs at least 2^{MIN_LOG2} constraints, got 2^{log2_constraints}")
        self.log2 = log2_constraints
        self.n = 1 << log2_constraints
        self.m = self.n
        self.public = PUBLIC
        self.bool_fraction = float(bool_fraction)
        self.terms = terms
        self.seed = seed
        structure = np.random.default_rng([seed, 0xC1C])
        # Odd multipliers make j -> (j*mul + off) mod 2^k a permutation of the rows below 2^k.
        self._mul = structure.integers(0, 1 << 62, size=terms + 1, dtype=np.int64).astype(np.uint64) | 1
        self._off = structure.integers(0, 1 << 62, size=terms + 1, dtype=np.int64).astype(np.uint64)
        self.k_b = int.from_bytes(structure.bytes(32), "little") % field.MODULUS
        self._kb = field.to_mont([self.k_b])[0]
        self._skey = structure_key(seed)
        self._ckey = _mix64_int(self._skey ^ 0xC0EF)
        # A threshold on a draw's top 53 bits: below `cut` the variable is boolean.
        self._cut = min(1 << 53, max(0, round(self.bool_fraction * (1 << 53))))
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

    def public_inputs(self, partition: int) -> list[int]:
        """z_1 .. z_PUBLIC of a partition's witness, canonical: the statement a proof is for."""
        forms = self._public_forms(witness_key(self.seed, partition))
        return field.from_mont(forms)

    def _public_forms(self, key: int) -> np.ndarray:
        """The public inputs' Montgomery forms: the draws themselves, as synthesis.c writes them."""
        out = []
        for j in range(1, self.public + 1):
            base = key + _DRAWS * j * _GOLDEN
            limbs = [_mix64_int((base + (q + 1) * _GOLDEN) & _U64) for q in range(4)]
            limbs[3] &= int(_TOP_LIMB)
            out.append(limbs)
        return np.array(out, np.uint64).reshape(-1, 4)

    def is_boolean(self, rows: np.ndarray) -> np.ndarray:
        """Whether variables `rows` (all > PUBLIC) are booleans: the structure's pattern."""
        draw = _mix64(np.asarray(rows, np.uint64) * np.uint64(_GOLDEN) + np.uint64(self._skey))
        return (draw >> np.uint64(11)) < np.uint64(self._cut)

    def _reads(self, rows: np.ndarray, t: int) -> np.ndarray:
        mask = _floor_pow2(rows) - np.uint64(1)
        return ((rows * self._mul[t] + self._off[t]) & mask).astype(np.intp)

    def row_constant_forms(self, rows: np.ndarray) -> np.ndarray:
        """The Montgomery forms of the constants k_j of rows `rows` (other variables' rows)."""
        base = np.asarray(rows, np.uint64) * np.uint64(4 * _GOLDEN & _U64) + np.uint64(self._ckey)
        out = np.empty((base.size, 4), np.uint64)
        for q in range(4):
            out[:, q] = _mix64(base + np.uint64(q * _GOLDEN & _U64))
        out[:, 3] &= _TOP_LIMB
        return out

    def witness(self, partition: int, out: np.ndarray) -> None:
        """The partition's witness z into `out` (m, 4), Montgomery form: synthesis itself,
        with a, b, c thrown away."""
        vectors = {k: np.empty((self.n, 4), np.uint64) for k in ("a", "b", "c")}
        self.synthesize(partition, SimpleNamespace(witness=out, **vectors))

    def synthesize(
        self, partition: int, target: SynthesisTarget, cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        key = witness_key(self.seed, partition)
        outs = (target.witness, target.a, target.b, target.c)
        if self._lib is not None and all(_native_rows(x, self.n) for x in outs):
            total = self._synthesize_native(key, partition, outs, cancelled)
        else:
            self._inputs(key, *outs)
            sums = field.to_planes(np.zeros((1, 4), np.uint64))
            for start, stop in _blocks(self.public + 1, self.n):
                if start % CHUNK == 0 and cancelled():
                    raise SynthesisCancelled(f"partition {partition} stopped at constraint {start}")
                field.padd(sums, self._block(key, start, stop, *outs), out=sums)
            total = field.from_planes(sums)
        # Rows 0 and 1 hold every other variable, in A and in B (see the module docstring).
        target.a[0] = field.add(field.MONT_ONE.reshape(1, 4), total)[0]
        target.b[1] = field.add(target.witness[1:2], total)[0]

    def _inputs(self, key: int, w: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        rows = slice(0, self.public + 1)
        w[0] = field.MONT_ONE
        w[1 : self.public + 1] = self._public_forms(key)
        a[rows] = w[rows]
        b[rows] = 0
        c[rows] = 0
        a[1], b[1] = 0, w[1]

    def _block(self, key: int, start: int, stop: int, w: np.ndarray, a: np.ndarray, b: np.ndarray,
               c: np.ndarray) -> np.ndarray:
        """Rows [start, stop), which all read below `start` (see _blocks); returns the sum of
        the block's other variables (planes, one column)."""
        j = np.arange(start, stop, dtype=np.uint64)
        # The sums and the product run on the planes form (prover/field.py): through the
        # limbs API each addition converted both operands and its result.
        x = field.to_planes(self.row_constant_forms(j))
        for t in range(self.terms):
            field.padd(x, field.to_planes(np.take(w, self._reads(j, t), axis=0)), out=x)
        y = field.to_planes(np.take(w, self._reads(j, self.terms), axis=0))
        y = field.padd(y, field.to_planes(self._kb.reshape(1, 4)), out=y)
        xy = field.pmul(x, y)
        product = field.from_planes(xy)
        boolean = self.is_boolean(j)
        rows, bools = j[~boolean].astype(np.intp), j[boolean].astype(np.intp)
        bit = (product[boolean, 0] & np.uint64(1)) == 1
        w[bools] = np.where(bit[:, None], field.MONT_ONE, np.uint64(0))
        a[bools] = w[bools]
        b[bools] = np.where(bit[:, None], np.uint64(0), _MINUS_ONE)
        c[bools] = 0
        a[rows] = field.from_planes(x)[~boolean]
        b[rows] = field.from_planes(y)[~boolean]
        c[rows] = w[rows] = product[~boolean]
        return _planes_sum(xy[:, ~boolean]) if rows.size else field.to_planes(np.zeros((1, 4), np.uint64))

    def _synthesize_native(self, key: int, partition: int, outs: tuple[np.ndarray, ...],
                           cancelled: Callable[[], bool]) -> np.ndarray:
        assert self._lib is not None
        total = np.zeros((1, 4), np.uint64)
        args = (key, self._skey, self._ckey, self._cut, self.public, self._mul.ctypes.data,
                self._off.ctypes.data, self.terms, self._kb.ctypes.data)
        pointers = tuple(x.ctypes.data for x in outs)
        for start in range(0, self.n, CHUNK):
            if cancelled():
                raise SynthesisCancelled(f"partition {partition} stopped at constraint {start}")
            stop = min(start + CHUNK, self.n)
            if self._lib.wb_synthesize(*args, start, stop, *pointers, total.ctypes.data) != 0:
                raise ValueError(f"synthesis.c refused {self.terms} terms per constraint")
        return total

    def r1cs(self) -> R1cs:
        """The constraint matrices, built from the structure alone (no witness); built once per
        circuit, since the key cache's fingerprint, the setup and a failed proof's diagnosis all
        read them."""
        built = self.__dict__.get("_r1cs")
        if built is None:
            built = self.__dict__["_r1cs"] = self._build_r1cs()
        return built

    def _build_r1cs(self) -> R1cs:
        inputs = np.array([0, *range(2, self.public + 1)], dtype=np.uint64)  # z_1 is in B
        j = np.arange(self.public + 1, self.n, dtype=np.uint64)
        boolean = self.is_boolean(j)
        bools, others = j[boolean], j[~boolean]
        zeros, row1 = np.zeros(others.size, np.uint64), np.ones(others.size + 1, np.uint64)
        one, minus_one, k_b = field.MONT_ONE, _MINUS_ONE, self._kb
        a = _coo([inputs, zeros, bools, *([others] * self.terms), others],
                 [inputs, others, bools, *(self._reads(others, t) for t in range(self.terms)), zeros],
                 [(one, inputs.size + bools.size + (self.terms + 1) * others.size),
                  self.row_constant_forms(others)])
        b = _coo([row1, bools, bools, others, others],
                 [np.array([1, *others], np.uint64), bools, np.zeros(bools.size, np.uint64),
                  self._reads(others, self.terms), zeros],
                 [(one, others.size + 1 + bools.size), (minus_one, bools.size), (one, others.size),
                  (k_b, others.size)])
        c = _coo([others], [others], [(one, others.size)])
        return R1cs(n=self.n, m=self.m, public=self.public, a=a, b=b, c=c)


def _coo(rows: list[np.ndarray], cols: list[np.ndarray],
         forms: list[tuple[np.ndarray, int] | np.ndarray]) -> Matrix:
    """A Matrix from its pieces; a coefficient piece is a (form, count) run or an array of forms."""
    total = sum(f[1] if isinstance(f, tuple) else f.shape[0] for f in forms)
    out, at = np.empty((total, 4), np.uint64), 0
    for f in forms:
        count = f[1] if isinstance(f, tuple) else f.shape[0]
        out[at : at + count] = f[0] if isinstance(f, tuple) else f
        at += count
    return Matrix(np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64), out)


def _planes_sum(p: np.ndarray) -> np.ndarray:
    """The sum of a planes array's columns, as one column (halves folded onto each other)."""
    while p.shape[1] > 1:
        half = p.shape[1] // 2
        folded = field.padd(p[:, :half], p[:, half : 2 * half])
        p = np.concatenate([folded, p[:, 2 * half :]], axis=1) if p.shape[1] % 2 else folded
    return p


def _blocks(lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """[lo, hi) cut at powers of two and at multiples of CHUNK: within a block every row's
    reads lie below the block's first row."""
    start = lo
    while start < hi:
        pow2 = 1 << (start.bit_length() - 1)
        stop = min(hi, 2 * pow2, (start // CHUNK + 1) * CHUNK)
        yield start, stop
        start = stop


def _native_rows(arr: np.ndarray, rows: int) -> bool:
    """Whether the compiled code may write `arr` in place: C-contiguous uint64 of (rows, 4)."""
    return (isinstance(arr, np.ndarray) and arr.dtype == np.uint64 and arr.shape == (rows, 4)
            and arr.flags.c_contiguous and arr.flags.writeable)
