"""Proof assembly (the `finish` phase): the Groth16 combination of the MSM results.

    A   = alpha + (batch_a + tail_a) + r·delta                       (G1)
    B   = beta  + b_g2_msm           + s·delta                       (G2)
    B1  = beta  + (batch_b + tail_b) + s·delta                       (G1)
    C   = (batch_l + tail_l) + h_msm + s·A + r·B1 − r·s·delta        (G1)

r and s are the blinding scalars, drawn per partition from the run's seed so a run repeats.
With the circuit's Groth16 key (prover/trusted_setup.py, made on the GPU by gpu/groth16_setup.py
for the GPU backend: every key either backend uses) the proofs verify (prover/verify.py, under
two independent libraries); with a synthetic key of random points (prover/srs.py, for tests of
the MSMs alone) the arithmetic is the same but the proofs cannot verify.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from workbench.prover.curve import R_MODULUS, point_to_bytes
from workbench.prover.srs import Srs


@dataclass(frozen=True)
class Proof:
    partition: int
    a: G1Point
    b: G2Point
    c: G1Point

    def to_bytes(self) -> bytes:
        return point_to_bytes(self.a) + point_to_bytes(self.b) + point_to_bytes(self.c)


def blinding(seed: int, partition: int) -> tuple[int, int]:
    rng = np.random.default_rng([seed, partition, 0xB11D])
    r, s = (int.from_bytes(rng.bytes(32), "little") % R_MODULUS for _ in range(2))
    return r, s


def assemble_proof(key: Srs, parts: dict[str, Any], partition: int) -> Proof:
    r, s = blinding(key.seed, partition)
    batch, tail = parts["batch"], parts["tail"]
    sum_a = batch["a"] + tail["a"]
    sum_b = batch["b"] + tail["b"]
    sum_l = batch["l"] + tail["l"]
    a = key.alpha_g1 + sum_a + key.delta_g1 * Scalar(r)
    b = key.beta_g2 + parts["b_g2"] + key.delta_g2 * Scalar(s)
    b1 = key.beta_g1 + sum_b + key.delta_g1 * Scalar(s)
    c = sum_l + parts["h"] + a * Scalar(s) + b1 * Scalar(r) - key.delta_g1 * Scalar(r * s % R_MODULUS)
    return Proof(partition, a, b, c)
