"""The GPU's trusted setup without a GPU: kernels/fixed_base.cu and fr_vector.cu compiled for
the host (a grid of one thread, as tests/test_msm_kernels_compile.py runs the MSM) under
gpu/groth16_setup.py's own code, against the CPU's setup and the curve library. On the H200,
tests/test_gpu_setup.py checks the device's build the same way."""

from __future__ import annotations

import ctypes
import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G2Point, Scalar
from test_msm_kernels_compile import CUDA_INCLUDE, CXX, KERNELS, EmulatedBackend, _compile_host

from workbench.gpu import groth16_setup, srs_gen
from workbench.gpu import msm as gpu_msm
from workbench.prover import field, trusted_setup
from workbench.prover.circuit import SyntheticCircuit
from workbench.prover.curve import R_MODULUS, G2Points

R = R_MODULUS


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> EmulatedBackend:
    if CXX is None or CUDA_INCLUDE is None:
        pytest.skip("host C++ compiler or CUDA headers (vector_types.h) not found")
    tmp = tmp_path_factory.mktemp("setup_kernels")
    libs = {name: ctypes.CDLL(str(_compile_host(tmp, f"{name}.so", KERNELS / f"{name}.cu", shared=True)))
            for name in ("msm", "fixed_base", "fr_vector")}
    return EmulatedBackend(libs)


def test_emulated_g2_fixed_base_matches_library(backend: EmulatedBackend):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    values = [0, 1, 255, 256, R - 1, *(rng.randrange(R) for _ in range(7))]
    scalars = np.array([[(v >> (64 * q)) & (2**64 - 1) for q in range(4)] for v in values], np.uint64)
    out = srs_gen.fixed_base_on_device(backend, scalars, gpu_msm.G2)
    got = G2Points(np.ascontiguousarray(out, "<u4").view(np.uint8))
    assert got == G2Points.from_objects([G2Point() * Scalar(v) for v in values]), f"seed {seed}"


def test_lagrange_basis_is_the_inverse_transform_of_taus_powers(backend: EmulatedBackend):
    tau = random.SystemRandom().randrange(R)
    got = groth16_setup.lagrange_at(backend, tau, 5)
    assert field.from_mont(got) == trusted_setup.lagrange_at(tau, 5), f"tau {tau}"


@pytest.mark.parametrize(("log2", "bool_fraction", "terms", "seed"), [(5, 0.5, 2, 3), (6, 0.9, 4, 8)])
def test_emulated_gpu_setup_is_the_cpu_setup(backend: EmulatedBackend, log2: int, bool_fraction: float,
                                            terms: int, seed: int):
    """Byte for byte: every query, IC, the single points and the trapdoor."""
    circuit = SyntheticCircuit(log2, bool_fraction, terms, seed)
    times: dict[str, float] = {}
    got = groth16_setup.setup(circuit, backend=backend, times=times)
    want = trusted_setup.setup(circuit)
    assert got == want
    assert set(times) == set(groth16_setup.PHASES)


def test_column_sums_reduce_every_limb_carry(backend: EmulatedBackend):
    """A column of many entries near r (sums far past 2^256) and an empty column, against ints."""
    from workbench.prover.circuit import Matrix

    rng = random.Random(random.SystemRandom().randrange(2**32))
    n, m = 8, 4
    rows = np.array([rng.randrange(n) for _ in range(300)] + [1, 2], np.int64)
    cols = np.array([0] * 300 + [3, 3], np.int64)
    coeffs = [R - 1 - rng.randrange(5) for _ in range(300)] + [5, R - 5]
    matrix = Matrix(rows, cols, field.to_mont(coeffs))
    tau = rng.randrange(R)
    lagrange = trusted_setup.lagrange_at(tau, 3)
    (got,) = groth16_setup.tau_columns(backend, (matrix,), m, tau, 3)
    want = [0] * m
    for i, j, k in zip(rows.tolist(), cols.tolist(), coeffs, strict=True):
        want[j] = (want[j] + k * lagrange[i]) % R
    assert field.from_mont(got) == want
