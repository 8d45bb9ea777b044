"""The GPU's trusted setup on the device: the CPU's key byte for byte at 2^12, proofs that verify
in every memory mode at 2^16 and 2^22, and a 2^16 run on
the GPU backend (its key made on the GPU) whose proofs verify, by the pairing equation and by
the trapdoor check. Run on a machine with a CUDA device: python -m pytest -m gpu tests/test_gpu_setup.py
"""

from __future__ import annotations

import pytest
from conftest import require_cuda_device

cupy = require_cuda_device()

from workbench.config import RunConfig
from workbench.gpu import groth16_setup
from workbench.pipeline.run import Pipeline
from workbench.prover import key_cache, srs, trusted_setup, verify
from workbench.prover.backend import settle
from workbench.prover.circuit import SyntheticCircuit

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fresh_memory_cache():
    key_cache.clear_memory_cache()
    yield
    key_cache.clear_memory_cache()


def _key_bytes(key: srs.Srs) -> dict[str, bytes]:
    arrays = srs.to_arrays(key)
    assert key.ic is not None and key.trapdoor is not None and key.gamma_g2 is not None
    arrays.update(ic=key.ic.xy, trapdoor=key.trapdoor.to_array())
    out = {name: arr.tobytes() for name, arr in arrays.items()}
    out["gamma_g2"] = bytes(key.gamma_g2.to_xy_bytes_le())
    return out


def test_the_gpu_setup_is_the_cpu_setup_at_2_12():
    circuit = SyntheticCircuit(12, 0.9, 4, seed=21)
    times: dict[str, float] = {}
    gpu = groth16_setup.setup(circuit, times=times)
    cpu = trusted_setup.setup(circuit)
    got, want = _key_bytes(gpu), _key_bytes(cpu)
    assert got.keys() == want.keys()
    assert [name for name in want if got[name] != want[name]] == []
    assert gpu.h.xy.any() and gpu.b_g2.xy.any()  # not two empty keys
    assert set(times) == set(groth16_setup.PHASES)


def test_a_2_16_gpu_run_verifies_with_its_gpu_made_key():
    from workbench.gpu.backend import GpuBackend

    config = RunConfig(backend="gpu", log2_constraints=16, partitions=3, gpu_workers=2, synth_threads=2,
                       seed=4, verify=True)
    backend = GpuBackend()
    result = Pipeline(config, backend, keep_outputs=True).run()
    assert result.ok, result.error
    spans = result.trace.select(name="verify")
    assert len(spans) == 3 and not [s for s in spans if "error" in (s.attrs or {})]
    key = backend.key
    assert key is not None and key.trapdoor == trusted_setup.trapdoor(4, 16)
    circuit = SyntheticCircuit(16, config.bool_fraction, config.synth_terms, config.seed)
    vk = verify.VerifyingKey.of(key)
    for p, proof in result.proofs.items():
        assert verify.verify(vk, circuit.public_inputs(p), proof)
    # The trapdoor check: every MSM and proof point equals its value from the witness and τ.
    assert verify.diagnose(key, circuit, result.proofs[0], settle(result.outputs[0])) == []
    # A proof of another partition's statement must fail, or the check proves nothing.
    assert not verify.verify(vk, circuit.public_inputs(1), result.proofs[0])


@pytest.mark.parametrize("log2", [16, 22])
@pytest.mark.parametrize("memory_mode", ["pageable", "pinned", "zerocopy", "registered"])
def test_gpu_proofs_verify_in_every_memory_mode(memory_mode, log2):
    from workbench.gpu.backend import GpuBackend

    config = RunConfig(backend="gpu", log2_constraints=log2, partitions=2, gpu_workers=2, synth_threads=2,
                       seed=6, verify=True, memory_mode=memory_mode)
    backend = GpuBackend()
    result = Pipeline(config, backend).run()
    assert result.ok, result.error
    spans = result.trace.select(name="verify")
    assert len(spans) == 2 and not [s for s in spans if "error" in (s.attrs or {})]
    # Checked again here with the pairing alone, outside the run's own verify step.
    circuit = SyntheticCircuit(log2, config.bool_fraction, config.synth_terms, config.seed)
    assert backend.key is not None
    vk = verify.VerifyingKey.of(backend.key)
    assert sorted(result.proofs) == [0, 1]
    for p, proof in result.proofs.items():
        assert verify.verify(vk, circuit.public_inputs(p), proof)
    assert not verify.verify(vk, circuit.public_inputs(1), result.proofs[0])
