from types import SimpleNamespace

import numpy as np
import pytest

from workbench.prover import field
from workbench.prover.circuit import PUBLIC, SyntheticCircuit

R = field.MODULUS


def witness(circuit: SyntheticCircuit, partition: int) -> np.ndarray:
    out = np.full((circuit.m, 4), 0xDEAD, np.uint64)  # poisoned: every row must be written
    circuit.witness(partition, out)
    return out


@pytest.mark.parametrize("bool_fraction", [0.0, 0.3, 0.9, 1.0])
def test_witness_shares_of_zero_one_and_random(bool_fraction):
    circuit = SyntheticCircuit(14, bool_fraction, 2, seed=5)
    w = witness(circuit, 3)
    zero = ~w.any(axis=1)
    one = (w == field.MONT_ONE).all(axis=1)
    other = ~(zero | one)
    n = circuit.m
    tolerance = 4 * np.sqrt(n) / n
    assert abs(zero.mean() - bool_fraction / 2) < tolerance
    assert abs(one.mean() - bool_fraction / 2) < tolerance
    assert abs(other.mean() - (1 - bool_fraction)) < tolerance
    assert field.is_reduced(w).all()
    if other.any():  # the random share is spread over the whole field, not small values
        assert len(np.unique(w[other][:, 3])) > 0.99 * other.sum()


def test_witness_is_fixed_by_seed_and_partition():
    circuit = SyntheticCircuit(12, 0.9, 2, seed=5)
    np.testing.assert_array_equal(witness(circuit, 1), witness(circuit, 1))
    assert not np.array_equal(witness(circuit, 1), witness(circuit, 2))
    assert not np.array_equal(witness(circuit, 1), witness(SyntheticCircuit(12, 0.9, 2, seed=6), 1))


def _synthesised(circuit: SyntheticCircuit, partition: int) -> SimpleNamespace:
    poisoned = {k: np.full((circuit.n, 4), 0xDEAD, np.uint64) for k in ("witness", "a", "b", "c")}
    target = SimpleNamespace(**poisoned)
    circuit.synthesize(partition, target)
    return target


@pytest.mark.parametrize("native_code", [False, None])
@pytest.mark.parametrize(("log2", "bool_fraction", "terms"), [(2, 0.9, 1), (7, 0.5, 3), (10, 0.9, 4)])
def test_the_witness_satisfies_every_constraint(native_code, log2, bool_fraction, terms):
    """(A·z) ⊙ (B·z) = C·z row by row, in Python integers over the matrices of r1cs(); and the
    a, b, c that synthesis wrote are exactly A·z, B·z, C·z."""
    circuit = SyntheticCircuit(log2, bool_fraction, terms, seed=3, native_code=native_code)
    got = _synthesised(circuit, 7)
    z = field.from_mont(got.witness)
    system = circuit.r1cs()
    a, b, c = (m.times(z, circuit.n) for m in (system.a, system.b, system.c))
    bad = [i for i in range(circuit.n) if a[i] * b[i] % R != c[i]]
    assert bad == []
    assert (a, b, c) == tuple(field.from_mont(v) for v in (got.a, got.b, got.c))
    assert z[0] == 1 and z[1 : 1 + PUBLIC] == circuit.public_inputs(7)


def test_a_wrong_witness_breaks_a_constraint():
    circuit = SyntheticCircuit(8, 0.5, 2, seed=3)
    z = field.from_mont(_synthesised(circuit, 1).witness)
    system = circuit.r1cs()
    z[200] = (z[200] + 1) % R  # a boolean becomes 2 or an other variable its product plus 1
    a, b, c = (m.times(z, circuit.n) for m in (system.a, system.b, system.c))
    assert a[200] * b[200] % R != c[200]


def test_every_variable_is_defined_by_earlier_ones_and_the_pattern_is_the_seeds():
    circuit = SyntheticCircuit(9, 0.6, 3, seed=4)
    system = circuit.r1cs()
    boolean = np.zeros(circuit.n, bool)
    boolean[PUBLIC + 1 :] = circuit.is_boolean(np.arange(PUBLIC + 1, circuit.n))
    for m in (system.a, system.b):
        own = boolean[m.rows] & ((m.cols == m.rows) | (m.cols == 0))  # a boolean's w·(w−1)
        inputs = (m.rows <= PUBLIC) & (m.cols == m.rows)  # an input row: z_j · 0 = 0
        carriers = m.rows <= 1  # rows 0 and 1 name every variable (the other side is empty)
        assert ((m.cols < m.rows) | own | inputs | carriers).all()
        # so no private variable has an empty column: no identity point in the A or B queries
        assert set(range(PUBLIC + 1, circuit.n)) <= set(m.cols.tolist())
    assert (system.c.rows == system.c.cols).all() and not boolean[system.c.rows].any()
    small = []
    for p in (0, 1):
        w = _synthesised(circuit, p).witness
        small.append(~w.any(axis=1) | (w == field.MONT_ONE).all(axis=1))
        np.testing.assert_array_equal(small[-1][PUBLIC + 1 :], boolean[PUBLIC + 1 :])
    zeros = [~_synthesised(circuit, p).witness.any(axis=1) for p in (0, 1)]
    assert not np.array_equal(zeros[0], zeros[1])  # the bits are the partition's
