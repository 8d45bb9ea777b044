"""Proofs, their public inputs and the verifying key as JSON, for anyone's own verifier.

Points are hex of their compressed encodings (48 bytes in G1, 96 in G2: big-endian x with the
three flag bits of the zcash serialization, which BLS12-381 libraries share); public inputs
are hex of their canonical values. The verifier's equation is in prover/verify.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from py_arkworks_bls12381 import G1Point, G2Point

from workbench.prover.proof import Proof
from workbench.prover.verify import VerifyingKey

__all__ = ["document", "proof_from_json", "verifying_key_from_json"]

FORMAT = "workbench groth16 proofs v1"


def _hex(point: G1Point | G2Point) -> str:
    return bytes(point.to_compressed_bytes()).hex()


def document(vk: VerifyingKey, proofs: Iterable[tuple[Proof, Sequence[int]]]) -> dict[str, Any]:
    """The JSON object: the verifying key once, then each proof with its public inputs."""
    return {
        "format": FORMAT,
        "protocol": "groth16",
        "curve": "bls12-381",
        "check": "e(a, b) = e(alpha_g1, beta_g2) · e(ic[0] + Σ x_i·ic[i], gamma_g2) · e(c, delta_g2)",
        "verifying_key": {
            "alpha_g1": _hex(vk.alpha_g1), "beta_g2": _hex(vk.beta_g2), "gamma_g2": _hex(vk.gamma_g2),
            "delta_g2": _hex(vk.delta_g2), "ic": [_hex(p) for p in vk.ic],
        },
        "proofs": [
            {"partition": proof.partition, "public_inputs": [hex(x) for x in inputs],
             "a": _hex(proof.a), "b": _hex(proof.b), "c": _hex(proof.c)}
            for proof, inputs in proofs
        ],
    }


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1) + "\n"


def verifying_key_from_json(vk: dict[str, Any]) -> VerifyingKey:
    """The curve library's points from a document's "verifying_key" (checked decoding)."""
    return VerifyingKey(
        G1Point.from_compressed_bytes(bytes.fromhex(vk["alpha_g1"])),
        G2Point.from_compressed_bytes(bytes.fromhex(vk["beta_g2"])),
        G2Point.from_compressed_bytes(bytes.fromhex(vk["gamma_g2"])),
        G2Point.from_compressed_bytes(bytes.fromhex(vk["delta_g2"])),
        tuple(G1Point.from_compressed_bytes(bytes.fromhex(p)) for p in vk["ic"]),
    )


def proof_from_json(entry: dict[str, Any]) -> tuple[Proof, list[int]]:
    """One "proofs" entry: the proof and its public inputs."""
    proof = Proof(int(entry["partition"]), G1Point.from_compressed_bytes(bytes.fromhex(entry["a"])),
                  G2Point.from_compressed_bytes(bytes.fromhex(entry["b"])),
                  G1Point.from_compressed_bytes(bytes.fromhex(entry["c"])))
    return proof, [int(x, 16) for x in entry["public_inputs"]]
