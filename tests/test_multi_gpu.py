"""Several GPUs, emulated on the CPU backend: a mutex per GPU, workers per GPU, one queue."""

import itertools

import pytest
from pipeline_checks import (
    barrier_release_never_precedes_prep_end,
    every_partition_passes_every_phase_once_in_order,
    lookahead_is_respected,
)

from workbench.analysis.utilisation import utilisation
from workbench.config import ConfigError, RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend


def test_two_emulated_gpus_each_with_their_own_mutex_and_workers():
    config = RunConfig(backend="cpu", gpus=2, gpu_workers=2, log2_constraints=6, partitions=12,
                       synth_threads=2, synth_lookahead=3, memory_mode="zerocopy")
    pipeline = Pipeline(config, CpuBackend())
    result = pipeline.run()
    assert result.ok, result.error
    trace = result.trace
    assert trace.meta["gpus"] == 2
    assert trace.meta["worker_gpu"] == {"0": 0, "1": 0, "2": 1, "3": 1}
    for gpu in (0, 1):
        holds = trace.select(track=f"mutex/gpu{gpu}", name="hold")
        assert holds, f"GPU {gpu} never used"
        assert {h.worker for h in holds} <= {2 * gpu, 2 * gpu + 1}
        ordered = sorted(holds, key=lambda h: h.start_ns)
        assert all(a.end_ns <= b.start_ns for a, b in itertools.pairwise(ordered))
    assert len(trace.select(name="hold")) == 12
    every_partition_passes_every_phase_once_in_order(trace, 12)
    barrier_release_never_precedes_prep_end(trace)
    lookahead_is_respected(trace, 3)
    pool = pipeline.memory.pool.statistics()
    assert pool.capacity == 3 + 4 and pool.in_use == 0 and pool.returns == 12
    assert [u.gpu for u in utilisation(trace)] == [0, 1]


def test_gpus_is_validated():
    with pytest.raises(ConfigError, match="gpus=0"):
        RunConfig(gpus=0)
