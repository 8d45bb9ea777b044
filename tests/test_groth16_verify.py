"""Proofs of the pipeline against the verifier's equation (two libraries), the trapdoor check
naming a wrong MSM, and the product's --verify and --proofs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pipeline_checks import every_partition_passes_every_phase_once_in_order

from workbench import cli
from workbench.analysis.summary import summarize
from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover import curve, prep, proof_json
from workbench.prover.circuit import SyntheticCircuit
from workbench.prover.cpu_backend import CpuBackend, compute_h_recorded
from workbench.prover.srs import Srs
from workbench.prover.verify import Verifier, VerifyingKey, describe, diagnose, verify, verify_py_ecc
from workbench.render.text import render_summary
from workbench.viz.tables import headline

SIZE = dict(backend="cpu", log2_constraints=10, synth_terms=3, gpu_workers=2, synth_threads=2)


def _flip(rows: np.ndarray, index: int) -> np.ndarray:
    out = np.array(rows)
    out[index, 0] ^= np.uint64(1 << 7)  # still below r: a low bit of the lowest limb
    return out


def _flip_tail(points: curve.Points, prepared: prep.PrepResult) -> np.ndarray:
    """The tail's scalars with one changed whose point is not the identity (a change to the
    scalar of an identity point, such as a public input's in L, would change no MSM)."""
    live = np.flatnonzero(points.xy[prepared.tail_indices].any(axis=1))
    return _flip(prepared.tail_scalars, int(live[len(live) // 2]))


class FlippedBackend(CpuBackend):
    """The CPU backend with one scalar of one MSM's input changed (the test hook)."""

    def __init__(self, msm: str) -> None:
        super().__init__()
        self.msm = msm

    def ntt_msm_h(self, buffers, scope):
        if self.msm != "h":
            return super().ntt_msm_h(buffers, scope)
        assert self.domain is not None and self.key is not None
        h = compute_h_recorded(buffers.a, buffers.b, buffers.c, self.domain, scope)
        buffers.extra["h"] = h
        return curve.msm(self.key.h, _flip(h, 3))

    def tail_msm(self, buffers, prepared, scope):
        out = super().tail_msm(buffers, prepared, scope)
        if self.msm in prep.QUERIES:
            points = prep.query_points(self._key(), self.msm)
            out[self.msm] = curve.msm(points, _flip_tail(points, prepared), prepared.tail_indices)
        return out

    def b_g2_msm(self, witness, prepared, scope):
        if self.msm != "b_g2":
            return super().b_g2_msm(witness, prepared, scope)
        key = self._key()
        tail = curve.msm(key.b_g2, _flip_tail(key.b_g2, prepared), prepared.tail_indices)
        return curve.batch_add(key.b_g2, prepared.ones_bitmap) + tail if prepared.split["b"] else tail


@pytest.mark.parametrize("memory_mode", ["pageable", "pinned", "zerocopy", "registered"])
@pytest.mark.parametrize("lock_scope", ["coarse", "compute"])
def test_every_proof_verifies_in_every_mode_and_scope(memory_mode, lock_scope):
    config = RunConfig(**SIZE, partitions=2, memory_mode=memory_mode, lock_scope=lock_scope, verify=True)
    pipeline = Pipeline(config, CpuBackend())
    result = pipeline.run()
    assert result.ok, result.error
    every_partition_passes_every_phase_once_in_order(result.trace, 2, verified=True)
    holds = {s.partition: s for s in result.trace.select(name="hold")}
    for span in result.trace.select(name="verify"):  # after the partition's hold, never in it
        assert span.start_ns >= holds[span.partition].end_ns
    summary = summarize(result.trace)
    assert summary.proofs_verified == 2
    assert "2 of 2 proofs verified" in render_summary(summary)
    assert "; 2 of 2 proofs verified</div>" in headline(summary)  # the HTML report's headline
    vk = VerifyingKey.of(pipeline.backend.key)
    for p, proof in result.proofs.items():
        assert verify(vk, pipeline.circuit.public_inputs(p), proof)
        assert not verify(vk, pipeline.circuit.public_inputs(p + 1), proof)  # another statement


def test_proofs_of_witnesses_made_by_synthesis_processes_verify():
    config = RunConfig(**SIZE, partitions=2, memory_mode="zerocopy", synthesis="processes", verify=True)
    result = Pipeline(config, CpuBackend()).run()
    assert result.ok, result.error
    assert summarize(result.trace).proofs_verified == 2


@pytest.mark.parametrize(("msm", "wrong"), [("h", ["h", "C"]), ("a", ["a", "A", "C"]),
                                            ("l", ["l", "C"]), ("b_g2", ["b_g2", "B"])])
def test_a_flipped_scalar_fails_verification_and_the_trapdoor_check_names_its_msm(msm, wrong):
    config = RunConfig(**SIZE, partitions=1, verify=True)
    result = Pipeline(config, FlippedBackend(msm)).run()
    assert result.outcome == "failed"
    assert "phase verify failed on partition" in result.error
    assert "does not verify; wrong: " + describe(wrong).removeprefix("wrong: ") in result.error
    # The same, from the kept outputs of an unverified run.
    pipeline = Pipeline(config.replace(verify=False), FlippedBackend(msm), keep_outputs=True)
    plain = pipeline.run()
    proof, parts = plain.proofs[0], plain.outputs[0]
    assert diagnose(pipeline.backend.key, pipeline.circuit, proof, parts) == wrong
    assert diagnose(pipeline.backend.key, pipeline.circuit, proof) == [w for w in wrong if w.isupper()]
    assert summarize(result.trace).proofs_verified < summarize(result.trace).partitions_done


def test_cli_writes_proofs_that_an_independent_library_verifies(tmp_path, capsys):
    """--proofs FILE: decoded by py_ecc (its own decompression and pairing) for one proof, and
    by the curve library for all; a changed public input or proof point fails."""
    out = tmp_path / "proofs.json"
    argv = ["run", "--backend", "cpu", "--log2-constraints", "10", "--partitions", "2", "--verify",
            "--no-progress", "--trace", str(tmp_path / "t.wbtrace"), "--proofs", str(out)]
    assert cli.main(argv) == cli.EXIT_OK
    assert "2 of 2 proofs verified" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["protocol"] == "groth16" and len(doc["proofs"]) == 2 and len(doc["verifying_key"]["ic"]) == 3
    first = doc["proofs"][0]
    inputs = [int(x, 16) for x in first["public_inputs"]]
    assert inputs == SyntheticCircuit(10, 0.9, 4, 1).public_inputs(first["partition"])
    assert verify_py_ecc(doc["verifying_key"], inputs, first)
    vk = proof_json.verifying_key_from_json(doc["verifying_key"])
    for entry in doc["proofs"]:
        proof, publics = proof_json.proof_from_json(entry)
        assert verify(vk, publics, proof)
        assert not verify(vk, [publics[0] + 1, *publics[1:]], proof)
    other, _ = proof_json.proof_from_json({**first, "c": doc["proofs"][1]["c"]})
    assert not verify(vk, inputs, other)


def test_cli_exits_1_naming_the_partition_whose_proof_fails(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("workbench.pipeline.backends.select_backend", lambda config: FlippedBackend("b"))
    argv = ["run", "--backend", "cpu", "--log2-constraints", "10", "--partitions", "1", "--verify",
            "--no-progress", "--trace", str(tmp_path / "t.wbtrace")]
    assert cli.main(argv) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert "the proof of partition 0 does not verify; wrong: B query in G1" in err


def test_a_synthetic_key_cannot_be_verified():
    key = Srs.generate(3, 8, seed=1)
    with pytest.raises(ValueError, match="synthetic key"):
        Verifier(key, SyntheticCircuit(3, 0.9, 2, 1))
    with pytest.raises(ValueError, match="has none"):
        Verifier(None, SyntheticCircuit(3, 0.9, 2, 1))
