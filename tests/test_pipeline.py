import _thread
import threading

import numpy as np
import pytest
from pipeline_checks import (
    barrier_release_never_precedes_prep_end,
    every_partition_passes_every_phase_once_in_order,
    lookahead_is_respected,
    mutex_holds_never_overlap,
)

from workbench.config import ConfigError, RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend

SMALL = dict(backend="cpu", log2_constraints=5, partitions=6, synth_terms=3)


def run(fault=None, **overrides):
    config = RunConfig(**{**SMALL, **overrides})
    pipeline = Pipeline(config, CpuBackend(), keep_outputs=True, fault=fault)
    return pipeline, pipeline.run()


@pytest.mark.parametrize("memory_mode", ["pageable", "pinned", "zerocopy", "registered"])
@pytest.mark.parametrize("lock_scope", ["coarse", "compute"])
def test_trace_invariants_hold_for_every_mode_and_scope(memory_mode, lock_scope):
    config = dict(memory_mode=memory_mode, lock_scope=lock_scope, gpu_workers=2, synth_threads=3,
                  synth_lookahead=2, partitions=7)
    pipeline, result = run(**config)
    assert result.outcome == "completed", result.error
    trace = result.trace
    mutex_holds_never_overlap(trace)
    every_partition_passes_every_phase_once_in_order(trace, 7)
    barrier_release_never_precedes_prep_end(trace)
    lookahead_is_respected(trace, 2)
    copies = trace.select(name="h2d_copy")
    assert len(copies) == 3 * 7
    assert all(c.attrs["emulated"] and c.attrs["bytes"] == 32 * 32 for c in copies)
    holds = {s.partition: s for s in trace.select(name="hold")}
    for copy in copies:
        inside = holds[copy.partition].start_ns <= copy.start_ns <= holds[copy.partition].end_ns
        assert inside == (lock_scope == "coarse")
    if memory_mode == "pinned":
        assert len(trace.select(name="staging_copy")) == 3 * 7
    if memory_mode == "registered":
        assert len(trace.select(name="host_register")) == len(trace.select(name="host_unregister")) == 21
        for span in trace.select(name="host_unregister"):  # never while holding the GPU mutex
            assert span.start_ns >= holds[span.partition].end_ns
    if memory_mode == "zerocopy":
        pool = pipeline.memory.pool.statistics()
        assert pool.max_in_use <= pool.capacity == 2 + 2
        assert pool.in_use == 0 and pool.checkouts == pool.returns == 7
        assert len(trace.select(name="pool_checkout")) == 7


def test_single_worker_single_thread_runs():
    _, result = run(gpu_workers=1, synth_threads=1, synth_lookahead=1, partitions=3)
    assert result.ok and len(result.proofs) == 3
    lookahead_is_respected(result.trace, 1)


def test_outputs_equal_independent_computation():
    from workbench.prover import field, ntt
    from workbench.prover.circuit import SyntheticCircuit
    from workbench.prover.curve import point_to_ints
    from workbench.prover.key_cache import load_or_setup

    _, result = run(partitions=2, bool_fraction=0.6, seed=7)
    assert result.ok
    circuit = SyntheticCircuit(5, 0.6, 3, 7)
    key = load_or_setup(circuit)
    for p in range(2):
        w, a, b, c = (np.zeros((32, 4), np.uint64) for _ in range(4))
        target = type("T", (), {"witness": w, "a": a, "b": b, "c": c})()
        circuit.synthesize(p, target)
        ai, bi, ci = (field.from_mont(v) for v in (a, b, c))
        assert all(x * y % field.MODULUS == z for x, y, z in zip(ai, bi, ci, strict=True))
        expected_h = ntt.h_reference(ai, bi, ci, 5)
        out = result.outputs[p]
        assert field.from_mont(out["h_vector"]) == expected_h
        # curve sums equal an independent pure-Python implementation's
        assert point_to_ints(out["h"]) == reference_msm(key.h, expected_h)
        wi = field.from_mont(w)
        for q, pts in (("l", key.l), ("a", key.a), ("b", key.b_g1)):
            assert point_to_ints(out["batch"][q] + out["tail"][q]) == reference_msm(pts, wi)


def reference_msm(points, scalars):
    from py_ecc.fields import optimized_bls12_381_FQ as FQ
    from py_ecc.optimized_bls12_381 import Z1, add, multiply, normalize

    acc = Z1
    for xy, scalar in zip(points.xy, scalars, strict=True):
        if not xy.any():  # the identity (the L query's points of the public inputs)
            continue
        x, y = int.from_bytes(bytes(xy[:48]), "little"), int.from_bytes(bytes(xy[48:]), "little")
        acc = add(acc, multiply((FQ(x), FQ(y), FQ.one()), scalar))
    x, y = normalize(acc)
    return int(x.n), int(y.n)


def test_bad_config_is_refused_before_anything_runs():
    with pytest.raises(ConfigError, match="log2_constraints=19"):
        Pipeline(RunConfig(backend="cpu", log2_constraints=19), CpuBackend())


@pytest.mark.parametrize("phase", ["synthesis", "prep_msm", "ntt_msm_h", "batch_add", "finish"])
def test_a_raising_phase_stops_the_run_and_is_recorded(phase):
    def fault(name, partition, worker):
        if name == phase and partition == 2:
            raise ValueError("injected")

    _, result = run(fault=fault, partitions=6)
    assert result.outcome == "failed"
    assert f"phase {phase} failed on partition 2" in result.error and "injected" in result.error
    errors = [i for i in result.trace.iter_instants() if i.name == "error"]
    assert len(errors) == 1 and errors[0].attrs["phase"] == phase and errors[0].partition == 2
    # nothing recorded before the failure is lost, and nobody holds the mutex at the end
    assert result.trace.select(name="synthesis")
    assert result.trace.meta["outcome"] == "failed"


def test_interrupt_stops_within_the_phase_in_flight_and_keeps_the_trace():
    def fault(name, partition, worker):
        if name == "batch_add" and partition == 1:
            _thread.interrupt_main()

    pipeline, result = run(fault=fault, partitions=40)
    assert result.outcome == "stopped" and "interrupted" in result.error
    assert 0 < len(result.trace.select(name="batch_add")) < 40
    assert pipeline.mutex.statistics().owner is None
    mutex_holds_never_overlap(result.trace)


def test_deferred_results_are_settled_after_the_mutex_is_released():
    """A backend may leave host-only last steps (an MSM's window combination) to after the
    hold: the pipeline resolves them in finish, outside the mutex, and the proof is the same."""
    import time

    from workbench.prover.backend import Deferred

    resolved: list[tuple[int, int]] = []  # (partition, when)

    class DeferringBackend(CpuBackend):
        def tail_msm(self, buffers, prepared, scope):
            out = super().tail_msm(buffers, prepared, scope)
            partition = scope.partition

            def later(value):
                resolved.append((partition, time.perf_counter_ns()))
                return value

            return {q: Deferred(lambda v=v: later(v)) for q, v in out.items()}

    config = RunConfig(**{**SMALL, "partitions": 4, "gpu_workers": 2})
    deferred = Pipeline(config, DeferringBackend(), keep_outputs=True).run()
    plain = Pipeline(config, CpuBackend()).run()
    assert deferred.ok and plain.ok
    assert deferred.proofs == plain.proofs
    holds = {s.partition: s for s in deferred.trace.select(name="hold")}
    finishes = {s.partition: s for s in deferred.trace.select(name="finish")}
    assert {p for p, _ in resolved} == set(range(4))
    for partition, when in resolved:
        # The recorder's clock is perf_counter_ns: resolved inside finish, after the hold ended.
        assert holds[partition].end_ns <= when <= finishes[partition].end_ns, partition
    assert all(not isinstance(v, Deferred) for out in deferred.outputs.values() for v in out["tail"].values())


@pytest.mark.parametrize("spawned", [1, 2, 3])
def test_ctrl_c_while_the_threads_start_stops_the_run_without_hanging(spawned, monkeypatch):
    # A Ctrl-C can land while start() is still spawning threads (a loaded host starves the
    # main thread while the first threads already work): the run must stop, not wait forever
    # for a watcher that never started or a prep thread whose worker never came.
    pipeline = Pipeline(RunConfig(**{**SMALL, "partitions": 4}), CpuBackend())
    spawn, calls = pipeline._spawn, []

    def interrupted_spawn(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == spawned + 1:
            raise KeyboardInterrupt
        spawn(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_spawn", interrupted_spawn)
    done = []
    runner = threading.Thread(target=lambda: done.append(pipeline.run()), daemon=True)
    runner.start()
    runner.join(timeout=30)
    assert done, f"the run hung after a Ctrl-C during its start ({calls})"
    assert done[0].outcome == "stopped" and "interrupted" in done[0].error


def test_ctrl_c_during_setup_stops_the_run_and_keeps_what_was_recorded():
    """Ctrl-C before any thread or the watcher exists (here: inside the backend's setup) ends
    the run as interrupted instead of waiting forever for a watcher that never started."""
    import faulthandler

    class InterruptedSetup(CpuBackend):
        def setup(self, config, scope):
            super().setup(config, scope)
            _thread.interrupt_main()
            sum(range(10**6))  # the interrupt lands in the main thread while Python code runs

    faulthandler.dump_traceback_later(60, exit=True)  # a hang fails the run, loudly
    try:
        result = Pipeline(RunConfig(**SMALL), InterruptedSetup()).run()
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert result.outcome == "stopped" and "interrupted" in result.error
    assert result.trace.select(name="setup")  # the setup span was recorded and kept
    assert not result.trace.select(name="synthesis")


@pytest.mark.parametrize("trace", [True, False])
def test_a_setup_failure_names_the_step_not_a_partition(trace, monkeypatch):
    """Setup serves no partition: its failure says which step failed (the innermost span that
    ended by the error where spans are recorded, the pipeline's own step where they are not)."""
    from workbench.prover import cpu_backend

    def no_twiddles(log2):
        raise ValueError("no twiddles today")

    monkeypatch.setattr(cpu_backend.ntt, "Domain", no_twiddles)
    result = Pipeline(RunConfig(**{**SMALL, "trace": trace}), CpuBackend()).run()
    assert result.outcome == "failed"
    step = "twiddles" if trace else "the cpu backend's setup"
    assert result.error == f"phase setup failed in {step}: ValueError: no twiddles today"
    assert "partition" not in result.error


def test_a_failure_after_the_backend_setup_names_the_pipeline_step(monkeypatch):
    class ColdBackend(CpuBackend):
        def warm_up(self, buffers):
            raise RuntimeError("the device is gone")

    result = Pipeline(RunConfig(**SMALL), ColdBackend()).run()
    assert result.error == "phase setup failed in warm_up: RuntimeError: the device is gone"
