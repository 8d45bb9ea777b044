"""The compiled synthesis and prep code against the numpy reference and plain integers."""

from types import SimpleNamespace

import numpy as np
import pytest

from workbench.prover import field, native
from workbench.prover.circuit import SyntheticCircuit
from workbench.prover.prep import prep_msm

R = field.MODULUS
MONT = pow(2, 256, R)

needs_native = pytest.mark.skipif(native.library() is None, reason=f"synthesis code: {native.status()}")


def _target(n: int) -> SimpleNamespace:
    # Poisoned: every row must be written.
    return SimpleNamespace(**{k: np.full((n, 4), 0xDEAD, np.uint64) for k in ("witness", "a", "b", "c")})


def _ints(rows: np.ndarray) -> list[int]:
    return [sum(int(v) << (64 * q) for q, v in enumerate(row)) for row in rows]


@needs_native
@pytest.mark.parametrize(("log2", "bool_fraction", "terms"),
                         [(4, 0.9, 1), (9, 0.0, 3), (10, 1.0, 2), (11, 0.5, 7), (13, 0.9, 4)])
def test_native_synthesis_writes_the_bytes_numpy_writes(log2, bool_fraction, terms):
    want, got = _target(1 << log2), _target(1 << log2)
    SyntheticCircuit(log2, bool_fraction, terms, seed=3, native_code=False).synthesize(5, want)
    circuit = SyntheticCircuit(log2, bool_fraction, terms, seed=3, native_code=True)
    assert circuit.code == "native"
    circuit.synthesize(5, got)
    for k in ("witness", "a", "b", "c"):
        np.testing.assert_array_equal(getattr(got, k), getattr(want, k), err_msg=k)


@needs_native
@pytest.mark.parametrize("k_b", [0, 1, R - 1, R - 2, 2**254 - 1])
def test_native_synthesis_matches_integer_arithmetic_at_the_edges(k_b):
    """wb_synthesize with B's constant at an edge of the field (0, 1, r-1, r-2, 2^254-1): the
    rows it writes checked in Python integers from the matrices (values, not Montgomery forms:
    a Montgomery product of Montgomery forms is the form of the product), and the same bytes
    as numpy's."""
    circuits = [SyntheticCircuit(6, 0.3, 5, seed=2, native_code=code) for code in (True, False)]
    for c in circuits:
        c.k_b, c._kb = k_b, field.to_mont([k_b])[0]
    got, want = _target(64), _target(64)
    circuits[0].synthesize(3, got)
    circuits[1].synthesize(3, want)
    inv = pow(MONT, -1, R)
    z = [v * inv % R for v in _ints(got.witness)]
    system = circuits[0].r1cs()
    for name, matrix in (("a", system.a), ("b", system.b), ("c", system.c)):
        forms = _ints(getattr(got, name))
        assert all(f < R for f in forms)
        assert [f * inv % R for f in forms] == matrix.times(z, 64), name
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


@needs_native
def test_native_synthesis_refuses_a_bad_term_count():
    lib = native.library()
    z = np.zeros((4, 4), np.uint64)
    one = np.ones(1, np.uint64)
    args = (z.ctypes.data,) * 5
    assert lib.wb_synthesize(0, 0, 0, 0, 2, one.ctypes.data, one.ctypes.data, 0, one.ctypes.data, 0, 4,
                             *args) == -1


@needs_native
def test_native_synthesis_stops_between_chunks():
    from workbench.prover import circuit as circuit_module

    c = SyntheticCircuit(circuit_module.CHUNK.bit_length(), 0.9, 2, seed=1, native_code=True)
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 1

    with pytest.raises(circuit_module.SynthesisCancelled, match="stopped at constraint"):
        c.synthesize(0, _target(c.n), cancelled)


@needs_native
def test_native_code_falls_back_for_arrays_it_cannot_write_in_place():
    """A strided target (a view of wider rows) goes through numpy, with the same result."""
    log2 = 8
    want = _target(1 << log2)
    SyntheticCircuit(log2, 0.9, 3, seed=2, native_code=False).synthesize(1, want)
    wide = np.zeros((1 << log2, 8), np.uint64)
    got = _target(1 << log2)
    got.a = wide[:, :4]
    SyntheticCircuit(log2, 0.9, 3, seed=2, native_code=True).synthesize(1, got)
    np.testing.assert_array_equal(got.a, want.a)
    np.testing.assert_array_equal(got.c, want.c)


@needs_native
@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.0])
def test_native_prep_matches_numpy(threshold):
    c = SyntheticCircuit(12, 0.9, 2, seed=4)
    w = np.zeros((c.m, 4), np.uint64)
    c.witness(0, w)
    w[7] = [R & (2**64 - 1), 0, 0, 0]  # not reduced, not 0 or 1: a tail scalar like any other
    want = prep_msm(w, threshold, native_code=False)
    got = prep_msm(w, threshold, native_code=True)
    assert (got.n_zero, got.n_one, got.n_other) == (want.n_zero, want.n_one, want.n_other)
    assert dict(got.split) == dict(want.split)
    for k in ("ones_mask", "ones_bitmap", "tail_indices", "tail_scalars"):
        np.testing.assert_array_equal(getattr(got, k), getattr(want, k), err_msg=k)
        assert not getattr(got, k).flags.writeable


def test_numpy_code_can_be_forced(monkeypatch):
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    assert native.library() is None
    assert native.status() == "numpy (WORKBENCH_NATIVE=0)"
    assert SyntheticCircuit(4, 0.9, 1, seed=0).code == "numpy"
    with pytest.raises(native.NativeUnavailable, match="WORKBENCH_NATIVE=0"):
        SyntheticCircuit(4, 0.9, 1, seed=0, native_code=True)


def test_a_missing_prebuilt_library_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_loaded", None)
    monkeypatch.setattr(native, "_why_not", None)
    monkeypatch.setenv("WORKBENCH_NATIVE_LIB", str(tmp_path / "nowhere.so"))
    assert native.library() is None
    assert "nowhere.so is not a file" in native.status()


def test_a_failing_compiler_is_reported_not_raised(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_loaded", None)
    monkeypatch.setattr(native, "_why_not", None)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "false")
    assert native.library() is None
    assert native.status().startswith("numpy (compiled code unavailable: false failed")
    assert list(tmp_path.rglob("*.so")) == []  # nothing half-built left behind
