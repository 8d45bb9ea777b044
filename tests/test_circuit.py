import numpy as np
import pytest

from workbench.prover import field
from workbench.prover.circuit import SyntheticCircuit


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
