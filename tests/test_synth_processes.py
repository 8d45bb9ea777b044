"""Synthesis in worker processes: the same partitions as in threads, failures named, stops
clean, nothing left behind in shared memory."""

import glob
import os
import re
import signal
import threading

import numpy as np
import pytest

from workbench.config import RunConfig
from workbench.pipeline import synth_processes
from workbench.pipeline.backends import select_backend
from workbench.pipeline.run import Pipeline
from workbench.pipeline.synth_processes import ProcessSynthesis
from workbench.prover.circuit import SynthesisCancelled, SyntheticCircuit
from workbench.prover.shared_arrays import shared_empty


def leftovers() -> list[str]:
    return glob.glob(os.path.join(synth_processes._shm_dir(), f"workbench-synth-{os.getpid()}-*"))


def run(**changes):
    config = RunConfig(backend="cpu", log2_constraints=9, partitions=4, synth_threads=2, **changes)
    return Pipeline(config, select_backend(config), keep_outputs=True).run()


def test_processes_give_the_same_proofs_and_h_as_threads():
    threads, processes = run(synthesis="threads"), run(synthesis="processes")
    assert threads.ok and processes.ok, (threads.error, processes.error)
    for p in range(4):
        assert processes.proofs[p].to_bytes() == threads.proofs[p].to_bytes()
        assert (processes.outputs[p]["h_vector"] == threads.outputs[p]["h_vector"]).all()
    trace = processes.trace
    # The memory mode's buffers are shared: the processes wrote them in place, no copy.
    assert trace.span_mask(name="synthesis_collect").sum() == 0
    assert trace.span_mask(name="synthesis_processes").sum() == 1
    assert not leftovers()


class Target:
    def __init__(self, circuit):
        self.witness, self.a, self.b, self.c = (np.zeros((circuit.n, 4), np.uint64) for _ in range(4))


def test_each_process_writes_what_the_circuit_computes():
    circuit = SyntheticCircuit(8, 0.9, 3, seed=11)
    procs = ProcessSynthesis(circuit, 2)
    try:
        for index, partition in ((0, 5), (1, 6), (0, 7)):
            got, want = Target(circuit), Target(circuit)
            procs.synthesize(index, partition, got, lambda: False, lambda: _null())
            circuit.synthesize(partition, want)
            for name in ("witness", "a", "b", "c"):
                np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    finally:
        procs.close()
    assert not leftovers()


@pytest.mark.parametrize("memory_mode", ["pageable", "pinned", "zerocopy", "registered"])
def test_processes_write_the_memory_modes_buffers_in_place(memory_mode):
    threads = run(synthesis="threads", memory_mode=memory_mode)
    processes = run(synthesis="processes", memory_mode=memory_mode)
    assert processes.ok, processes.error
    assert processes.trace.span_mask(name="synthesis_collect").sum() == 0
    for p in range(4):
        assert processes.proofs[p].to_bytes() == threads.proofs[p].to_bytes()


class SharedTarget:
    def __init__(self, circuit):
        self.witness, self.a, self.b, self.c = (shared_empty((circuit.n, 4)) for _ in range(4))


def test_shared_buffers_are_written_in_place_without_the_collect_copy():
    circuit = SyntheticCircuit(8, 0.9, 3, seed=11)
    procs = ProcessSynthesis(circuit, 1)
    collected = []
    try:
        got, want = SharedTarget(circuit), Target(circuit)
        procs.synthesize(0, 9, got, lambda: False, lambda: collected.append(1) or _null())
        circuit.synthesize(9, want)
        for name in ("witness", "a", "b", "c"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
        assert not collected
    finally:
        procs.close()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_process_that_dies_is_named_with_the_signal_that_ended_it():
    circuit = SyntheticCircuit(8, 0.9, 3, seed=11)
    procs = ProcessSynthesis(circuit, 1)
    try:
        pid = procs.workers[0].process.pid
        os.kill(pid, signal.SIGKILL)
        procs.workers[0].process.wait()
        with pytest.raises(RuntimeError, match=rf"synthesis process 0 \(pid {pid}\) was killed by SIGKILL"):
            procs.synthesize(0, 1, Target(circuit), lambda: False, lambda: _null())
    finally:
        procs.close()
    assert not leftovers()


def test_a_stop_abandons_the_partition_in_flight():
    # Seconds of synthesis, asked for with the stop already requested: the first look at the
    # answer (after one poll interval) finds no answer and the stop.
    circuit = SyntheticCircuit(18, 0.9, 64, seed=11)
    procs = ProcessSynthesis(circuit, 1)
    stop = threading.Event()
    stop.set()
    try:
        with pytest.raises(SynthesisCancelled):
            procs.synthesize(0, 1, Target(circuit), stop.is_set, lambda: _null())
        with pytest.raises(RuntimeError, match="still busy"):
            procs.synthesize(0, 2, Target(circuit), lambda: False, lambda: _null())
    finally:
        procs.close()
    assert all(w.process.poll() is not None for w in procs.workers) or not procs.workers
    assert not leftovers()


def test_a_stopped_pipeline_with_processes_ends_cleanly():
    config = RunConfig(backend="cpu", log2_constraints=12, partitions=200, synth_threads=2,
                       synthesis="processes", synth_terms=64)
    pipeline = Pipeline(config, select_backend(config))
    pipeline.start()
    pipeline.wait(timeout=1.5)
    pipeline.stop("stopped by the test")
    assert pipeline.wait(timeout=30)
    result = pipeline.result(0.0)
    assert result.outcome == "stopped"
    assert not leftovers()


def test_a_bad_process_start_is_reported(monkeypatch):
    monkeypatch.setenv(synth_processes.CHUNKS_VARIABLE, "not,numbers")  # the process fails to set up
    circuit = SyntheticCircuit(8, 0.9, 3, seed=11)
    with pytest.raises(RuntimeError, match="synthesis process 0"):
        ProcessSynthesis(circuit, 1)
    assert not leftovers()


def test_a_block_the_process_cannot_open_is_reported(monkeypatch):
    real = synth_processes._map

    def fake(path, size, create):
        # The parent creates the block, then removes it: the process cannot open it.
        block = real(path, size, create)
        os.unlink(path)
        return block

    monkeypatch.setattr(synth_processes, "_map", fake)
    circuit = SyntheticCircuit(8, 0.9, 3, seed=11)
    procs = ProcessSynthesis(circuit, 1)
    try:
        with pytest.raises(RuntimeError, match=r"in synthesis process 0 \(pid \d+\): FileNotFoundError"):
            procs.synthesize(0, 1, Target(circuit), lambda: False, lambda: _null())
    finally:
        procs.close()
    assert not leftovers()


def test_a_stopped_process_fails_the_run_in_bounded_time_naming_it(monkeypatch):
    """SIGSTOP on a synthesis process: no `beat` comes, and within the stall bound (here a
    floor of 1 s, five times the slowest step) the run fails naming the process and its state,
    instead of waiting for it; the close kills it (SIGKILL works on a stopped process)."""
    import time

    from conftest import wait_until

    monkeypatch.setattr(synth_processes, "STALL_FLOOR_S", 1.0)
    monkeypatch.setattr(synth_processes, "STALL_FACTOR", 5.0)
    config = RunConfig(backend="cpu", log2_constraints=9, partitions=4000, synth_threads=2,
                       synthesis="processes")
    pipeline = Pipeline(config, select_backend(config))
    pipeline.start()
    wait_until(lambda: pipeline.progress.synthesised >= 2, timeout=30)
    process = pipeline._processes.workers[0].process
    os.kill(process.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        assert pipeline.wait(timeout=60), "the run waited on a stopped process"
        took = time.monotonic() - stopped
    except BaseException:
        os.kill(process.pid, signal.SIGCONT)  # should the assertion fail, leave nothing stopped
        raise
    # Left stopped until the close: continued here, it could finish its partition and leave on
    # its own before the close came to kill it (seen once in CI, its return code 0).
    result = pipeline.result(0.0)
    assert result.outcome == "failed"
    assert re.search(rf"phase synthesis failed on partition \d+: RuntimeError: synthesis process 0 "
                     rf"\(pid {process.pid}\) made no progress for [\d.]+ s .*\(its state: stopped",
                     result.error), result.error
    assert took < 30, f"{took:.1f} s to notice"
    assert process.returncode == -signal.SIGKILL
    (error,) = [i for i in result.trace.iter_instants() if i.name == "error"]
    assert f"pid {process.pid}" in error.attrs["message"]
    assert not leftovers()
