"""The pipeline on the GPU backend: same traces' invariants, same proofs as the CPU backend,
and those proofs verify."""

import pytest

pytest.importorskip("cupy")

from pipeline_checks import (
    barrier_release_never_precedes_prep_end,
    every_partition_passes_every_phase_once_in_order,
    lookahead_is_respected,
    mutex_holds_never_overlap,
)

from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("memory_mode", "lock_scope", "gpu_msm", "synthesis"), [
    *((mode, scope, True, "threads") for mode in ("pageable", "pinned", "zerocopy", "registered")
      for scope in ("coarse", "compute")),
    ("pageable", "coarse", False, "threads"),
    ("zerocopy", "coarse", True, "processes"),
])
def test_gpu_run_matches_cpu_run_exactly(memory_mode, lock_scope, gpu_msm, synthesis):
    from workbench.gpu.backend import GpuBackend

    config = RunConfig(backend="gpu", log2_constraints=10, partitions=4, memory_mode=memory_mode,
                       lock_scope=lock_scope, gpu_workers=2, synth_threads=2, seed=11,
                       bool_fraction=0.7, synthesis=synthesis, verify=True)
    gpu = Pipeline(config, GpuBackend(gpu_msm=gpu_msm), keep_outputs=True).run()
    assert gpu.ok, gpu.error
    cpu = Pipeline(config.replace(backend="cpu"), CpuBackend(), keep_outputs=True).run()
    assert cpu.ok, cpu.error
    for p in range(4):
        assert (gpu.outputs[p]["h_vector"] == cpu.outputs[p]["h_vector"]).all()
        assert gpu.proofs[p].to_bytes() == cpu.proofs[p].to_bytes()
    trace = gpu.trace
    mutex_holds_never_overlap(trace)
    every_partition_passes_every_phase_once_in_order(trace, 4, b_g2_on_gpu=gpu_msm, verified=True)
    assert len([s for s in trace.select(name="verify") if "error" not in (s.attrs or {})]) == 4
    barrier_release_never_precedes_prep_end(trace)
    lookahead_is_respected(trace, config.synth_lookahead)
    copies = trace.select(name="h2d_copy")
    assert len(copies) == 12
    assert all(not c.attrs["emulated"] and c.attrs["device_ms"] > 0 for c in copies)
    assert trace.meta["memory_emulated"] is False and trace.meta["backend"] == "gpu"
    assert {s.attrs["on"] for s in trace.select(name="msm_h")} == {"gpu" if gpu_msm else "cpu"}
    ntt = trace.select(name="ntt")
    assert all(s.attrs["device_forward_ms"] > 0 for s in ntt)


def test_two_gpus_give_the_cpu_runs_proofs():
    """One mutex, buffers and workers per GPU on a machine with two (skipped with fewer)."""
    import cupy

    from workbench.gpu.backend import GpuBackend

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    config = RunConfig(backend="gpu", gpus=2, log2_constraints=10, partitions=6, memory_mode="zerocopy",
                       gpu_workers=2, synth_threads=2, seed=5, bool_fraction=0.7)
    gpu = Pipeline(config, GpuBackend()).run()
    assert gpu.ok, gpu.error
    cpu = Pipeline(config.replace(backend="cpu"), CpuBackend()).run()
    assert cpu.ok, cpu.error
    assert {p: proof.to_bytes() for p, proof in gpu.proofs.items()} == \
           {p: proof.to_bytes() for p, proof in cpu.proofs.items()}
    mutex_holds_never_overlap(gpu.trace)
    assert {s.track for s in gpu.trace.select(name="hold")} == {"mutex/gpu0", "mutex/gpu1"}


def test_precomputed_h_msm_gives_the_cpu_runs_proofs(monkeypatch: pytest.MonkeyPatch):
    """msm.PRECOMPUTED "prepared": the setup builds the H query's window table, the H MSMs run
    over it and the proofs stay the CPU run's; its cost is on the upload_key span and in the
    run's metadata."""
    from workbench.gpu import msm, msm_tables
    from workbench.gpu.backend import GpuBackend

    monkeypatch.setattr(msm, "PRECOMPUTED", "prepared")
    monkeypatch.setattr(msm, "PRECOMPUTED_MIN_POINTS", 1 << 10)  # a table at this test's size
    config = RunConfig(backend="gpu", log2_constraints=10, partitions=2, gpu_workers=1, synth_threads=2,
                       seed=5, bool_fraction=0.7, verify=True)
    gpu = Pipeline(config, GpuBackend(), keep_outputs=True).run()
    assert gpu.ok, gpu.error
    cpu = Pipeline(config.replace(backend="cpu"), CpuBackend(), keep_outputs=True).run()
    assert cpu.ok, cpu.error
    assert [gpu.proofs[p].to_bytes() for p in range(2)] == [cpu.proofs[p].to_bytes() for p in range(2)]
    meta = gpu.trace.meta["msm_precomputed"]
    table = meta["tables"]["0"]["h"]
    assert meta["mode"] == "prepared" and table["window_bits"] == msm_tables.fixed_window_bits(table["bases"])
    assert table["bytes"] == table["windows"] * table["bases"] * 96 and table["setup_ms"] > 0
    (upload,) = gpu.trace.select(name="upload_key")
    assert upload.attrs["precomputed_bytes"] == table["bytes"]
