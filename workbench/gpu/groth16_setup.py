"""The Groth16 trusted setup on the GPU: the key of prover/trusted_setup.py, byte for byte, for
every size the GPU backend runs (the CPU's takes minutes from 2^16, G2 above all).

On the device, in order (the phases `times` reports):

1. tau_columns. τ's powers τ^i for i < n, and the Lagrange basis at τ as their inverse NTT:
   L_i(X) = (1/n)·Σ_k ω^(−ik)·X^k, so (L_i(τ))_i = INTT(τ^0, …, τ^(n−1)), one transform where
   the CPU divides n times. Then u, v, w, the QAP's columns at τ, for each matrix: the products
   coefficient·L_row of its entries (fr_mul), sorted by column (a radix sort of the column
   indices), and each column's sum as 16 exact sums of its 16-bit limbs (int64 prefix sums:
   exact up to 2^47 entries a column), carried and reduced mod r. Then the queries' scalars:
   H τ^i·Z(τ)/δ, L (β·u + α·v + w)/δ at private variables (0 at public ones), A u, B v, IC
   (β·u + α·v + w)/γ at public ones, all made canonical.
2. g1_queries. One fixed-base launch for every G1 point, H, L, A, B and IC together
   (gpu/srs_gen.py, kernels/fixed_base.cu: the CPU's comb table).
3. g2_query. One launch for B in G2.
4. download. The points to the host, as the key's G1Points and G2Points.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from workbench.gpu import msm as gpu_msm
from workbench.gpu import srs_gen
from workbench.prover import field
from workbench.prover.circuit import Matrix, SyntheticCircuit
from workbench.prover.curve import G1Points, G2Points
from workbench.prover.srs import Srs
from workbench.prover.trusted_setup import key_points, trapdoor

__all__ = ["PHASES", "lagrange_at", "setup", "tau_columns"]

R = field.MODULUS
PHASES = ("tau_columns", "g1_queries", "g2_query", "download")
_POWERS_RUN = 64  # FR_POWERS_RUN in kernels/fr_vector.cu
_LIMB_MASK = 0xFFFF


def setup(circuit: SyntheticCircuit, backend: Any = None,
          times: MutableMapping[str, float] | None = None) -> Srs:
    """The circuit's proving key, made on the device (the current one, on its current stream).
    `times` gets each phase's seconds (PHASES), the device synchronised at every boundary."""
    be = backend if backend is not None else gpu_msm.default_backend()
    t = trapdoor(circuit.seed, circuit.log2)
    n, m, public = circuit.n, circuit.m, circuit.public
    clock = _Clock(be, times)
    with clock("tau_columns"):
        system = circuit.r1cs()
        u, v, w = tau_columns(be, (system.a, system.b, system.c), m, t.tau, circuit.log2)
        # The G1 scalars in the order of the one launch: H, L, A, B, IC.
        spans = {"h": (0, n), "l": (n, n + m), "a": (n + m, n + 2 * m), "b_g1": (n + 2 * m, n + 3 * m),
                 "ic": (n + 3 * m, n + 3 * m + public + 1)}
        scalars = be.xp.empty((spans["ic"][1], 4), dtype=be.xp.uint64)
        part = {name: scalars[lo:hi] for name, (lo, hi) in spans.items()}
        z_tau = (pow(t.tau, n, R) - 1) % R
        _powers(be, part["h"], t.tau, z_tau * pow(t.delta, -1, R) % R)
        combined = _vector_op(be, "fr_add_kernel", _scaled(be, u, t.beta), _scaled(be, v, t.alpha))
        combined = _vector_op(be, "fr_add_kernel", combined, w)
        _scaled(be, combined, pow(t.delta, -1, R), out=part["l"])
        part["l"][: public + 1] = 0
        _scaled(be, combined[: public + 1], pow(t.gamma, -1, R), out=part["ic"])
        part["a"][...] = u
        part["b_g1"][...] = v
        _vector_op(be, "fr_from_mont_kernel", scalars, out=scalars)
    with clock("g1_queries"):
        g1 = srs_gen.fixed_base_on_device(be, scalars, gpu_msm.G1)
    with clock("g2_query"):
        g2 = srs_gen.fixed_base_on_device(be, part["b_g1"], gpu_msm.G2)
    with clock("download"):
        g1_xy = np.ascontiguousarray(be.download(g1), "<u4").view(np.uint8)
        g2_xy = np.ascontiguousarray(be.download(g2), "<u4").view(np.uint8)
        q = {name: G1Points(g1_xy[lo:hi]) for name, (lo, hi) in spans.items()}
        b_g2 = G2Points(g2_xy)
    return Srs(log2_size=circuit.log2, m=m, seed=circuit.seed, h=q["h"], l=q["l"], a=q["a"], b_g1=q["b_g1"],
               b_g2=b_g2, ic=q["ic"], trapdoor=t, **key_points(t))


def tau_columns(be: Any, matrices: tuple[Matrix, ...], m: int, tau: int, log2: int) -> list[Any]:
    """Σ_i M[i, j]·L_i(τ) for every column j < m of each matrix: (m, 4) Montgomery device arrays."""
    lagrange = lagrange_at(be, tau, log2)
    return [_column_sums(be, matrix, lagrange, m) for matrix in matrices]


def lagrange_at(be: Any, tau: int, log2: int) -> Any:
    """L_i(τ) for the 2^log2 points of the domain: the inverse NTT of τ's powers (Montgomery)."""
    powers = be.xp.empty((1 << log2, 4), dtype=be.xp.uint64)
    _powers(be, powers, tau, 1)
    if be.xp is np:  # kernels compiled for the host (the CPU tests): the host's transform
        from workbench.prover import ntt as host_ntt

        return host_ntt.intt(powers, host_ntt.Domain(log2))
    from workbench.gpu.ntt import GpuDomain

    return GpuDomain(log2).intt(powers)


def _column_sums(be: Any, matrix: Matrix, lagrange: Any, m: int) -> Any:
    xp = be.xp
    nnz = matrix.rows.shape[0]
    out = xp.zeros((m, 4), dtype=xp.uint64)
    if nnz == 0:
        return out
    cols = xp.asarray(matrix.cols)
    order = xp.argsort(cols)
    cols = cols[order]
    products = xp.empty((nnz, 4), dtype=xp.uint64)
    _vector_op(be, "fr_mul_kernel", xp.asarray(matrix.forms)[order],
               lagrange[xp.asarray(matrix.rows)[order]], out=products)
    # Prefix sums of the 16-bit limbs; a column's limb sums are the differences at its ends.
    limbs = xp.cumsum(products.view(xp.uint16).reshape(nnz, 16).astype(xp.int64), axis=0)
    ends = xp.concatenate([xp.flatnonzero(cols[1:] != cols[:-1]), xp.asarray([nnz - 1])])
    sums = limbs[ends]
    sums[1:] -= limbs[ends[:-1]]
    wide = xp.zeros((m, 16), dtype=xp.int64)
    wide[cols[ends]] = sums
    for k in range(15):
        wide[:, k + 1] += wide[:, k] >> 16
        wide[:, k] &= _LIMB_MASK
    high = wide[:, 15] >> 16  # the sum is below 2^(256+41): high < 2^41
    wide[:, 15] &= _LIMB_MASK
    packed = wide.astype(xp.uint64)
    low = (packed[:, 0::4] | (packed[:, 1::4] << 16) | (packed[:, 2::4] << 32) | (packed[:, 3::4] << 48))
    top = xp.zeros((m, 4), dtype=xp.uint64)
    top[:, 0] = high.astype(xp.uint64)
    # low mod r = from_mont(to_mont(low)); high·2^256 mod r = to_mont(high): the sum's residue,
    # which is the Montgomery form of the column (a sum of Montgomery forms).
    low = xp.ascontiguousarray(low)
    _vector_op(be, "fr_to_mont_kernel", low, out=low)
    _vector_op(be, "fr_from_mont_kernel", low, out=low)
    _vector_op(be, "fr_to_mont_kernel", top, out=top)
    return _vector_op(be, "fr_add_kernel", low, top, out=out)


def _vector_op(be: Any, kernel: str, *inputs: Any, out: Any = None) -> Any:
    """One of fr_vector.cu's element-wise kernels; out defaults to a new array."""
    n = inputs[0].shape[0]
    if out is None:
        out = be.xp.empty((n, 4), dtype=be.xp.uint64)
    if n:
        be.launch("fr_vector", kernel, n, (out, *inputs, np.uint64(n)), threads=256)
    return out


def _scaled(be: Any, x: Any, k: int, out: Any = None) -> Any:
    """k·x (fr_scale_kernel, the constant on the device)."""
    n = x.shape[0]
    if out is None:
        out = be.xp.empty((n, 4), dtype=be.xp.uint64)
    if n:
        constant = be.xp.asarray(field.to_mont([k % R]))
        be.launch("fr_vector", "fr_scale_kernel", n, (out, x, constant, np.uint64(n)), threads=256)
    return out


def _powers(be: Any, out: Any, base: int, first: int) -> None:
    """out[i] = first·base^i (Montgomery), by fr_powers_kernel: runs of 64 from a power each."""
    count = out.shape[0]
    if count == 0:
        return
    nbits = max(1, (count - 1).bit_length())
    squares = [base % R]
    for _ in range(nbits - 1):
        squares.append(squares[-1] * squares[-1] % R)
    xp = be.xp
    args = (out, xp.asarray(field.to_mont(squares)), np.uint32(nbits), xp.asarray(field.to_mont([first])),
            np.uint64(count))
    be.launch("fr_vector", "fr_powers_kernel", -(-count // _POWERS_RUN), args)


class _Clock:
    def __init__(self, be: Any, times: MutableMapping[str, float] | None) -> None:
        self.be, self.times = be, times

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        cuda = getattr(self.be.xp, "cuda", None)
        if cuda is not None:
            cuda.get_current_stream().synchronize()
        if self.times is not None:
            self.times[phase] = time.perf_counter() - start
