"""The pipeline model (model/pipeline.py) is the one description of the pipeline: a real run,
the what-if replay and the golden schedules all follow it, and a change to it shows in the
replay and the golden schedule at once, while the runner refuses a phase it cannot run."""

from __future__ import annotations

from dataclasses import replace

import pytest
from golden import Spec, build
from py_arkworks_bls12381 import G2Point

from workbench.analysis.costs import run_shape
from workbench.analysis.replay import ReplayedPipeline
from workbench.analysis.whatif import replay
from workbench.config import RunConfig
from workbench.model import tracks as tr
from workbench.model.pipeline import HOST, PROVER, Phase
from workbench.model.pipeline import Pipeline as Model
from workbench.pipeline import steps
from workbench.pipeline.run import Pipeline, run_pipeline
from workbench.prover.backend import B_G2
from workbench.prover.cpu_backend import CpuBackend
from workbench.trace.container import Trace


def test_the_prover_model_is_the_production_pipeline():
    # Written out by hand from the production prover (DESIGN.md), not from the model.
    assert PROVER.phases == ("synthesis", "prep_msm", "ntt_msm_h", "barrier_wait", "batch_add", "tail_msm",
                             "b_g2_msm", "finish", "verify")
    assert PROVER.done == "finish" and [p.name for p in PROVER.consumer if p.optional] == ["verify"]
    assert PROVER.lock.phases == ("ntt_msm_h", "barrier_wait", "batch_add", "tail_msm")
    assert PROVER.after_lock == ("b_g2_msm", "finish", "verify")
    assert PROVER.gpu_phases == ("ntt_msm_h", "batch_add", "tail_msm")
    assert (PROVER.barrier.phase, PROVER.barrier.before) == ("barrier_wait", "batch_add")


def test_a_model_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="consecutive"):
        replace(PROVER, lock=replace(PROVER.lock, phases=("ntt_msm_h", "batch_add")))
    with pytest.raises(ValueError, match="barrier"):
        replace(PROVER, barrier=replace(PROVER.barrier, before="tail_msm"))


def test_the_runner_has_a_step_for_each_phase_and_refuses_a_phase_it_lacks(monkeypatch):
    table = steps.consumer_steps(CpuBackend(), "coarse", False, {})
    assert list(table) != [] and set(table) == {p.name for p in PROVER.consumer}
    grown = replace(PROVER, consumer=(*PROVER.consumer, Phase("seal", HOST)))
    monkeypatch.setattr(steps, "PROVER", grown)
    with pytest.raises(RuntimeError, match="seal"):
        steps.consumer_steps(CpuBackend(), "coarse", False, {})


def follows(trace: Trace, model: Model) -> int:
    """Checks that every finished unit passed the model's consumer phases in order, its
    mutex hold covering the lock phases and ending before the phases after the lock;
    returns how many units were checked."""
    names = {p.name for p in model.consumer}
    units: dict[int, list] = {}
    for s in trace.iter_spans():
        if tr.parse(s.track).kind == tr.WORKER and s.name in names:
            units.setdefault(s.partition, []).append(s)
    holds = {s.partition: s for s in trace.iter_spans() if tr.parse(s.track).kind == tr.MUTEX
             and s.name == "hold"}
    for p, spans in units.items():
        spans.sort(key=lambda s: (s.start_ns, s.end_ns))
        seen = [s.name for s in spans]
        assert seen == [n for n in (q.name for q in model.consumer) if n in seen], (p, seen)
        assert model.done in seen
        hold, by_name = holds[p], {s.name: s for s in spans}
        for name in model.lock.phases:
            assert hold.start_ns <= by_name[name].start_ns <= by_name[name].end_ns <= hold.end_ns, (p, name)
        for name in model.after_lock:
            if name in by_name:
                assert by_name[name].start_ns >= hold.end_ns, (p, name)
    return len(units)


def test_a_run_a_replay_and_a_golden_schedule_follow_the_model():
    real = run_pipeline(RunConfig(backend="cpu", partitions=3, log2_constraints=5, synth_terms=3)).trace
    golden = build(Spec(partitions=6))
    assert follows(real, PROVER) == 3
    assert follows(golden, PROVER) == 6
    assert follows(replay(golden), PROVER) == 6
    assert follows(replay(real), PROVER) == 3


def test_moving_a_phase_out_of_the_lock_moves_it_in_the_replay_and_the_golden_schedule():
    model = replace(PROVER, lock=replace(PROVER.lock, phases=PROVER.lock.phases[:-1]))
    assert model.after_lock == ("tail_msm", "b_g2_msm", "finish", "verify")
    golden = build(Spec(partitions=6), model=model)
    shape = run_shape(golden)
    replayed = ReplayedPipeline(
        shape, list(shape.costs), workers=shape.workers, synth_threads=shape.synth_threads,
        lookahead=shape.lookahead, lock_scope=shape.lock_scope, memory_mode=shape.memory_mode,
        description="tail_msm after the lock", model=model,
    ).run()
    for trace in (golden, replayed):
        assert follows(trace, model) == 6
        with pytest.raises(AssertionError):  # no longer the prover's: tail_msm is outside the hold
            follows(trace, PROVER)



class G2InsideBackend(CpuBackend):
    """B's G2 sum inside batch_add and tail_msm, as the GPU backend's MSM kernels do it."""

    b_g2_in_gpu_phases = True

    def batch_add(self, buffers, prepared, scope):
        return {**super().batch_add(buffers, prepared, scope), B_G2: self.b_g2_msm(None, prepared, scope)}

    def tail_msm(self, buffers, prepared, scope):
        return {**super().tail_msm(buffers, prepared, scope), B_G2: G2Point.identity()}


def test_a_phase_the_backend_does_inside_others_has_no_step_and_the_proof_is_the_same():
    config = RunConfig(backend="cpu", partitions=3, log2_constraints=5, synth_terms=3)
    inside = Pipeline(config, G2InsideBackend()).run()
    plain = Pipeline(config, CpuBackend()).run()
    assert inside.ok and plain.ok and inside.proofs == plain.proofs
    assert not inside.trace.select(name="b_g2_msm") and len(plain.trace.select(name="b_g2_msm")) == 3
    assert follows(inside.trace, PROVER) == 3
