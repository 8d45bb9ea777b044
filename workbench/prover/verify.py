"""Groth16 verification, by two libraries that share nothing, and the stronger trapdoor check.

The verifier's equation, for public inputs x (x_0 = 1):

    e(A, B) = e(α, β) · e(Σ x_i·IC_i, γ) · e(C, δ)

`verify` checks it with the curve library the prover uses (one pairing product check);
`verify_py_ecc` with py_ecc, a second implementation in pure Python (seconds a proof; a dev
dependency, imported only when called). Both take the verifying key and proof as compressed
points (`proof_json.py`'s encoding), so what they check is what anyone would be handed.

Because the workbench's setup knows its toxic waste, `diagnose` goes further: from the
partition's witness and the trapdoor it computes what every MSM of the prover must give
(a, b, l over the witness in G1, b_g2 in G2, h) and what A, B and C must be, and names what
differs. A proof can only fail the pairing check when one of them is wrong, so this says which
phase to look at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from workbench.prover import field
from workbench.prover.circuit import SyntheticCircuit
from workbench.prover.curve import R_MODULUS
from workbench.prover.proof import Proof, blinding
from workbench.prover.srs import Srs
from workbench.prover.trusted_setup import qap_at

__all__ = ["MSMS", "ProofRejected", "Verifier", "VerifyingKey", "diagnose", "verify", "verify_py_ecc"]

R = R_MODULUS
MSMS = {"a": "A query (batch_add + tail_msm of a)", "b": "B query in G1 (batch_add + tail_msm of b)",
        "l": "L query (batch_add + tail_msm of l)", "b_g2": "B query in G2 (b_g2_msm)",
        "h": "H query (msm_h)"}
"""The prover's MSMs, by the name their results carry in a partition's parts."""


@dataclass(frozen=True)
class VerifyingKey:
    alpha_g1: G1Point
    beta_g2: G2Point
    gamma_g2: G2Point
    delta_g2: G2Point
    ic: tuple[G1Point, ...]

    @classmethod
    def of(cls, key: Srs) -> VerifyingKey:
        if key.ic is None or key.gamma_g2 is None:
            raise ValueError("a synthetic key (random points) has no verifying key: its proofs cannot verify")
        ic = tuple(key.ic.objects())
        return cls(key.alpha_g1, key.beta_g2, key.gamma_g2, key.delta_g2, ic)  # type: ignore[arg-type]

    @property
    def public(self) -> int:
        return len(self.ic) - 1


def _statement(vk: VerifyingKey, public_inputs: Sequence[int]) -> G1Point:
    if len(public_inputs) != vk.public:
        raise ValueError(f"{len(public_inputs)} public inputs for a key made for {vk.public}")
    acc = vk.ic[0]
    for x, point in zip(public_inputs, vk.ic[1:], strict=True):
        acc = acc + point * Scalar(x % R)
    return acc


def verify(vk: VerifyingKey, public_inputs: Sequence[int], proof: Proof) -> bool:
    """The Groth16 equation with the curve library's pairings."""
    g1s = [-proof.a, vk.alpha_g1, _statement(vk, public_inputs), proof.c]
    g2s = [proof.b, vk.beta_g2, vk.gamma_g2, vk.delta_g2]
    return bool(GT.pairing_check(g1s, g2s))


def verify_py_ecc(vk: dict[str, Any], public_inputs: Sequence[int], proof: dict[str, str]) -> bool:
    """The Groth16 equation with py_ecc, from compressed points as hex (proof_json's
    "verifying_key" and one "proofs" entry): decompression, curve checks and pairings all py_ecc's."""
    from py_ecc.bls.point_compression import decompress_G1, decompress_G2
    from py_ecc.optimized_bls12_381 import (
        FQ12,
        add,
        b,
        b2,
        curve_order,
        final_exponentiate,
        is_on_curve,
        multiply,
        neg,
    )
    from py_ecc.optimized_bls12_381.optimized_pairing import miller_loop

    def g1(text: str) -> Any:
        point = decompress_G1(int(text, 16))  # type: ignore[arg-type]  # G1Compressed is an int
        if not is_on_curve(point, b):
            raise ValueError(f"{text[:16]}... is not on G1")
        return point

    def g2(text: str) -> Any:
        raw = bytes.fromhex(text)
        halves = (int.from_bytes(raw[:48], "big"), int.from_bytes(raw[48:], "big"))
        point = decompress_G2(halves)  # type: ignore[arg-type]  # G2Compressed is a pair of ints
        if not is_on_curve(point, b2):
            raise ValueError(f"{text[:16]}... is not on G2")
        return point

    ic = [g1(p) for p in vk["ic"]]
    if len(public_inputs) != len(ic) - 1:
        raise ValueError(f"{len(public_inputs)} public inputs for a key made for {len(ic) - 1}")
    statement = ic[0]
    for x, point in zip(public_inputs, ic[1:], strict=True):
        statement = add(statement, multiply(point, x % curve_order))
    pairs = [(g2(proof["b"]), neg(g1(proof["a"]))), (g2(vk["beta_g2"]), g1(vk["alpha_g1"])),
             (g2(vk["gamma_g2"]), statement), (g2(vk["delta_g2"]), g1(proof["c"]))]
    product = FQ12.one()
    for q, p in pairs:
        product = product * miller_loop(q, p, final_exponentiate=False)
    return bool(final_exponentiate(product) == FQ12.one())


@dataclass(frozen=True)
class Expected:
    """What a partition's MSMs and proof must be, from its witness and the trapdoor."""

    msms: dict[str, G1Point | G2Point]
    proof: dict[str, G1Point | G2Point]


def expected(key: Srs, circuit: SyntheticCircuit, partition: int) -> Expected:
    """Every MSM's and proof point's true value, as scalars times the generators (O(nnz) in
    Python integers: for the sizes the CPU setup makes)."""
    t = key.trapdoor
    if t is None:
        raise ValueError("the key has no trapdoor (a synthetic key): nothing to compare with")
    witness = np.empty((circuit.m, 4), np.uint64)
    circuit.witness(partition, witness)
    z = field.from_mont(witness)
    u, v, w = qap_at(circuit.r1cs(), t.tau, circuit.log2)
    a_tau = sum(zj * uj for zj, uj in zip(z, u, strict=True)) % R
    b_tau = sum(zj * vj for zj, vj in zip(z, v, strict=True)) % R
    c_tau = sum(zj * wj for zj, wj in zip(z, w, strict=True)) % R
    delta_inv = pow(t.delta, -1, R)
    private = range(circuit.public + 1, circuit.m)
    l_sum = sum(z[j] * (t.beta * u[j] + t.alpha * v[j] + w[j]) for j in private) * delta_inv % R
    h_sum = (a_tau * b_tau - c_tau) * delta_inv % R  # h(τ)Z(τ)/δ, since Z divides A·B − C
    r, s = blinding(key.seed, partition)
    proof_a = (t.alpha + a_tau + r * t.delta) % R
    proof_b = (t.beta + b_tau + s * t.delta) % R
    proof_c = (l_sum + h_sum + s * proof_a + r * proof_b - r * s * t.delta) % R
    g1, g2 = G1Point(), G2Point()
    return Expected(
        msms={"a": g1 * Scalar(a_tau), "b": g1 * Scalar(b_tau), "l": g1 * Scalar(l_sum),
              "b_g2": g2 * Scalar(b_tau), "h": g1 * Scalar(h_sum)},
        proof={"A": g1 * Scalar(proof_a), "B": g2 * Scalar(proof_b), "C": g1 * Scalar(proof_c)},
    )


def msm_results(parts: dict[str, Any]) -> dict[str, G1Point | G2Point]:
    """A partition's MSM results by MSMS name, from the pipeline's parts (kept outputs)."""
    batch, tail = parts["batch"], parts["tail"]
    out: dict[str, G1Point | G2Point] = {q: batch[q] + tail[q] for q in ("a", "b", "l")}
    out["b_g2"], out["h"] = parts["b_g2"], parts["h"]
    return out


def diagnose(key: Srs, circuit: SyntheticCircuit, proof: Proof, parts: dict[str, Any] | None = None
             ) -> list[str]:
    """What is wrong with a proof: the MSMs (by MSMS name) whose results differ from their
    true values when the parts are given, then the proof points ("A", "B", "C") that differ.
    Empty for a correct proof."""
    want = expected(key, circuit, proof.partition)
    wrong = []
    if parts is not None:
        got = msm_results(parts)
        wrong += [name for name in MSMS if got[name] != want.msms[name]]
    points = {"A": proof.a, "B": proof.b, "C": proof.c}
    wrong += [name for name, point in points.items() if point != want.proof[name]]
    return wrong


def describe(wrong: Sequence[str]) -> str:
    """diagnose's list in words."""
    names = [MSMS.get(w, f"proof point {w}") for w in wrong]
    return "wrong: " + "; ".join(names) if names else "every MSM and proof point is right"


DIAGNOSE_MAX_LOG2 = 16  # the trapdoor check runs over Python integers: seconds at 2^16


class ProofRejected(Exception):
    """A proof failed the verifier's equation; the message names the partition and, where the
    trapdoor check could run, what is wrong."""


class Verifier:
    """A run's checker: the pairing equation for every proof, the trapdoor check on a failure."""

    def __init__(self, key: Srs | None, circuit: SyntheticCircuit) -> None:
        if key is None:
            raise ValueError("verify needs the backend's proving key, and this backend has none")
        self.vk = VerifyingKey.of(key)
        self.key = key
        self.circuit = circuit

    def check(self, proof: Proof, parts: dict[str, Any] | None = None) -> None:
        if verify(self.vk, self.circuit.public_inputs(proof.partition), proof):
            return
        detail = ""
        if self.key.trapdoor is not None and self.circuit.log2 <= DIAGNOSE_MAX_LOG2:
            detail = "; " + describe(diagnose(self.key, self.circuit, proof, parts))
        raise ProofRejected(f"the proof of partition {proof.partition} does not verify{detail}")
