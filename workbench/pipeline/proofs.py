"""A run's proofs as the JSON document `workbench run --proofs` writes (verifying key, proofs
and public inputs, points compressed): one writer for a run and a sweep's cells alike."""

from __future__ import annotations

from typing import Any

from workbench.pipeline.run import Pipeline
from workbench.prover import proof_json
from workbench.prover.verify import VerifyingKey


def proofs_json(pipeline: Pipeline, proofs: dict[int, Any]) -> tuple[str, int]:
    """The document's text and how many proofs it holds; ValueError when the backend has no key."""
    try:
        vk = VerifyingKey.of(pipeline.backend.key)  # type: ignore[attr-defined]
    except (AttributeError, ValueError) as err:
        raise ValueError(str(err)) from None
    entries = [(proofs[p], pipeline.circuit.public_inputs(p)) for p in sorted(proofs)]
    return proof_json.dumps(proof_json.document(vk, entries)), len(entries)
