"""The Groth16 trusted setup of the synthetic circuit, with its toxic waste known.

α, β, γ, δ and τ come from the seed (a workbench has no secret to keep: knowing them is what
lets `prover/verify.py` say which MSM of a failing proof is wrong). With the QAP's columns
evaluated at τ, u_j = A_j(τ), v_j = B_j(τ), w_j = C_j(τ) (A_j = Σ_i A[i, j]·L_i, the Lagrange
basis L_i of the domain of n = 2^k points), the proving key is

    A query   u_j·G1                      B queries   v_j·G1, v_j·G2          (every j < m)
    L query   (β u_j + α v_j + w_j)/δ·G1  for private j; the identity for j ≤ PUBLIC
    IC        (β u_j + α v_j + w_j)/γ·G1  for j ≤ PUBLIC (the constant and the public inputs)
    H query   τ^i Z(τ)/δ·G1               for i < n (h has degree ≤ n − 2; h_{n-1} = 0)

and α·G1, β·G1, β·G2, γ·G2, δ·G1, δ·G2. The L query keeps an entry per variable (identities
at the public ones) so that the three G1 queries share the witness's scalars, as prep.py and
the GPU's joined tables need.

Every point is a fixed-base product k·G, by a comb: a table of d·2^(8w)·G for the 32 bytes w
of a scalar and d < 256, so each product is 31 additions in the curve library. Measured on the
2-core development box: 62 µs per G1 point against 170 µs for the library's own k·G, 110 µs
per G2 point against 520 µs; from 2^14 points a query is shared among processes. That is the
CPU's setup, for the small sizes the CPU backend and the tests run (2^10: 0.6 s, 2^12: 1.4 s
on that box when quiet, 1.3 s and 5.3 s beside other work). The GPU's setup
(gpu/groth16_setup.py) makes the same key, byte for byte, for every size the GPU backend
runs: the same comb table (`comb_table_xy`, one table for both) in fixed-base kernels, and the
QAP columns on the device.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from workbench.prover.circuit import R1cs, SyntheticCircuit
from workbench.prover.curve import R_MODULUS, G1Points, G2Points
from workbench.prover.ntt import Domain
from workbench.prover.pool import parallel_map
from workbench.prover.srs import Srs, Trapdoor

__all__ = ["comb_table_xy", "fixed_base_g1", "fixed_base_g2", "key_points", "qap_at", "setup", "trapdoor"]

R = R_MODULUS
_Ps = TypeVar("_Ps", G1Points, G2Points)


def trapdoor(seed: int, log2: int) -> Trapdoor:
    """α, β, γ, δ, τ of a seed: uniform nonzero elements (τ off the domain, so Z(τ) ≠ 0)."""
    rng = np.random.default_rng([seed, 0x7A0D])
    n = 1 << log2
    while True:
        # 512 random bits reduced mod r are uniform up to a 2^-257 bias.
        alpha, beta, gamma, delta, tau = (int.from_bytes(rng.bytes(64), "little") % R for _ in range(5))
        if all((alpha, beta, gamma, delta)) and pow(tau, n, R) != 1:
            return Trapdoor(alpha, beta, gamma, delta, tau)


def lagrange_at(tau: int, log2: int) -> list[int]:
    """L_i(τ) = Z(τ)/n · ω^i/(τ − ω^i) for the domain of 2^log2 points (one inversion)."""
    domain = Domain(log2)
    n, omega = domain.size, domain.omega
    powers = [1] * n
    for i in range(1, n):
        powers[i] = powers[i - 1] * omega % R
    diffs = [(tau - p) % R for p in powers]
    prefix = [1] * (n + 1)
    for i, d in enumerate(diffs):
        prefix[i + 1] = prefix[i] * d % R
    inv = pow(prefix[n], -1, R)
    z_over_n = (pow(tau, n, R) - 1) * domain.n_inv % R
    out = [0] * n
    for i in range(n - 1, -1, -1):  # inv runs down the prefix products: 1/d_i, then 1/(d_0..d_{i-1})
        out[i] = z_over_n * powers[i] % R * (inv * prefix[i] % R) % R
        inv = inv * diffs[i] % R
    return out


def qap_at(system: R1cs, tau: int, log2: int) -> tuple[list[int], list[int], list[int]]:
    """u_j = A_j(τ), v_j = B_j(τ), w_j = C_j(τ) for every variable j."""
    lagrange = lagrange_at(tau, log2)

    def columns(matrix: Any) -> list[int]:
        out = [0] * system.m
        for i, j, k in zip(matrix.rows.tolist(), matrix.cols.tolist(), matrix.coeffs, strict=True):
            out[j] += k * lagrange[i]
        return [v % R for v in out]

    return columns(system.a), columns(system.b), columns(system.c)


def setup(circuit: SyntheticCircuit) -> Srs:
    """The proving key of `circuit` from the trapdoor of its seed."""
    t = trapdoor(circuit.seed, circuit.log2)
    u, v, w = qap_at(circuit.r1cs(), t.tau, circuit.log2)
    n, public = circuit.n, circuit.public
    gamma_inv, delta_inv = pow(t.gamma, -1, R), pow(t.delta, -1, R)
    combined = [(t.beta * uj + t.alpha * vj + wj) % R for uj, vj, wj in zip(u, v, w, strict=True)]
    l_scalars = [0] * (public + 1) + [c * delta_inv % R for c in combined[public + 1 :]]
    ic_scalars = [c * gamma_inv % R for c in combined[: public + 1]]
    z_tau = (pow(t.tau, n, R) - 1) % R
    h_scalars = [0] * n
    acc = z_tau * delta_inv % R
    for i in range(n):
        h_scalars[i] = acc
        acc = acc * t.tau % R
    return Srs(
        log2_size=circuit.log2, m=circuit.m, seed=circuit.seed,
        h=fixed_base_g1(h_scalars), l=fixed_base_g1(l_scalars), a=fixed_base_g1(u),
        b_g1=fixed_base_g1(v), b_g2=fixed_base_g2(v), ic=fixed_base_g1(ic_scalars), trapdoor=t,
        **key_points(t),
    )


def key_points(t: Trapdoor) -> dict[str, Any]:
    """The key's single points: α·G1, β·G1, β·G2, δ·G1, δ·G2, γ·G2 (Srs field names)."""
    g1, g2 = G1Point(), G2Point()
    return {"alpha_g1": g1 * Scalar(t.alpha), "beta_g1": g1 * Scalar(t.beta), "beta_g2": g2 * Scalar(t.beta),
            "delta_g1": g1 * Scalar(t.delta), "delta_g2": g2 * Scalar(t.delta),
            "gamma_g2": g2 * Scalar(t.gamma)}


def _limbs(scalars: Sequence[int]) -> np.ndarray:
    raw = b"".join(s.to_bytes(32, "little") for s in scalars)
    return np.frombuffer(raw, "<u8").reshape(len(scalars), 4).copy()


_tables: dict[str, list[list[Any]]] = {}
_tables_lock = threading.Lock()


def _table(group: str) -> list[list[Any]]:
    """Row w: d·2^(8w)·G for d < 256 (row entry 0 the identity), built once per process."""
    with _tables_lock:
        if group not in _tables:
            kind: Any = G1Point if group == "g1" else G2Point
            rows, base = [], kind()
            for _ in range(32):
                row = [kind.identity()]
                for _ in range(255):
                    row.append(row[-1] + base)
                rows.append(row)
                base = row[-1] + base  # 256·2^(8w)·G = 2^(8(w+1))·G
            _tables[group] = rows
        return _tables[group]


_tables_xy: dict[str, np.ndarray] = {}


def comb_table_xy(group: str) -> np.ndarray:
    """The comb's table encoded, as the GPU's fixed-base kernels read it: (32·256, 96 or 192)
    uint8, row 256·w + d the xy bytes of d·2^(8w)·G (rows 256·w all zeros, the identity).
    Read-only, built once per process (G1: 0.1 s, G2: 0.3 s)."""
    table = _table(group)
    with _tables_lock:
        if group not in _tables_xy:
            raw = b"".join(bytes(p.to_xy_bytes_le()) for row in table for p in row)
            xy = np.frombuffer(raw, np.uint8).reshape(32 * 256, -1)
            _tables_xy[group] = xy
        return _tables_xy[group]


# From this many points a query is made by a pool of processes, one a core (the comb holds
# the interpreter lock throughout).
PARALLEL_FROM = 1 << 14


def _fixed_base(cls: type[_Ps], scalars: Sequence[int]) -> _Ps:
    limbs = _limbs(scalars)
    workers = min(os.cpu_count() or 1, 32)
    if len(scalars) < PARALLEL_FROM or workers < 2:
        return cls(_comb_slice((cls.GROUP, limbs)).reshape(len(scalars), cls.POINT_BYTES))
    bounds = [len(scalars) * k // (4 * workers) for k in range(4 * workers + 1)]
    jobs = [(cls.GROUP, limbs[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    raw = np.concatenate(parallel_map(_comb_slice, jobs, workers))
    return cls(raw.reshape(len(scalars), cls.POINT_BYTES))


def _comb_slice(job: tuple[str, np.ndarray]) -> np.ndarray:
    """The encoded points k·G of canonical limbs, by the comb (uint8, flat)."""
    group, limbs = job
    table = _table(group)
    digits = np.ascontiguousarray(limbs, "<u8").view(np.uint8).reshape(len(limbs), 32)
    add = functools.partial(functools.reduce, _add)
    raw = b"".join(bytes(add(map(list.__getitem__, table, row)).to_xy_bytes_le()) for row in digits.tolist())
    return np.frombuffer(raw, np.uint8)


def _add(p: Any, q: Any) -> Any:
    return p + q


def fixed_base_g1(scalars: Sequence[int]) -> G1Points:
    """k·G1 for each canonical k, encoded (the identity for k = 0)."""
    return _fixed_base(G1Points, scalars)


def fixed_base_g2(scalars: Sequence[int]) -> G2Points:
    """k·G2 for each canonical k, encoded (the identity for k = 0)."""
    return _fixed_base(G2Points, scalars)
