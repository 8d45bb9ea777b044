"""The pipeline: partition queue, synthesis pool, GPU workers with prep threads, the GPU
mutex and per-worker barriers, memory modes and back-pressure, and a clean stop.

The structure is the pipeline model's (model/pipeline.py, `PROVER`), read, not restated:
producers run `PROVER.producer`, each worker's prep thread `PROVER.prep`, and each GPU
worker a unit's `PROVER.consumer` phases in the model's order, each by its step
(pipeline/steps.py), holding its GPU's mutex around `PROVER.lock.phases` and meeting its
prep thread at `PROVER.barrier`. With the production prover's phases:

    synthesis (thread i) ->  queue  ->  worker w picks it up
    worker/w/prep:  prep_msm ............................ arrive at barrier
    worker/w:       [upload if lock_scope=compute] mutex wait | mutex hold:
                    ntt_msm_h (upload if coarse), barrier_wait, batch_add, tail_msm | release
                    b_g2_msm, finish[, verify]

Any phase that raises, a stop request or Ctrl-C stops every thread at its next step: the
mutex and barriers are aborted so nobody hangs, and the trace keeps all that was recorded.
"""

from __future__ import annotations

import functools
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.config import RunConfig
from workbench.model.pipeline import PICKUP, PROVER, QUEUED
from workbench.model.tracks import (
    QUEUE_TRACK,
    RUN_TRACK,
    barrier_track,
    mutex_track,
    prep_track,
    synth_track,
    worker_track,
)
from workbench.pipeline import switching
from workbench.pipeline.host_load import HostLoad, check_memory
from workbench.pipeline.memory import MemoryMode, PartitionBuffers, PoolClosed, make_memory_mode
from workbench.pipeline.steps import PREP_PARTY, Unit, consumer_steps
from workbench.pipeline.synth_processes import ProcessSynthesis
from workbench.prover import native
from workbench.prover.backend import Backend, DeviceBuffers
from workbench.prover.circuit import SynthesisCancelled, SyntheticCircuit
from workbench.prover.prep import PrepResult, prep_msm
from workbench.prover.verify import Verifier
from workbench.trace.barrier import BarrierBroken, InstrumentedBarrier
from workbench.trace.collector import Collector, CollectorUnavailable
from workbench.trace.container import Trace
from workbench.trace.mutex import InstrumentedMutex, MutexAborted
from workbench.trace.recorder import Recorder
from workbench.trace.scope import Scope

INTERRUPTED = "interrupted (Ctrl-C)"
# Every name `_phase` passes a fault hook: a fault named otherwise would never fire.
FAULT_POINTS = ("buffer_checkout", *PROVER.phases, PROVER.lock.copy_before_lock)
POLL_S = 0.05  # how often blocked threads look for a stop request

# A test hook: called before every phase with (phase, partition, worker); raising fails it.
FaultHook = Callable[[str, int, int], None]


class Stopped(Exception):
    """Raised inside pipeline threads once the run is stopping; never escapes the pipeline."""


class PhaseError(RuntimeError):
    """A phase that raised: on a partition (and worker), or in a `step` of work that serves no
    partition (setup's key generation, say, or a pipeline thread)."""

    def __init__(self, phase: str, partition: int, worker: int, cause: BaseException,
                 step: str | None = None) -> None:
        self.phase, self.partition, self.worker, self.cause, self.step = phase, partition, worker, cause, step
        where = [f"in {step}"] if step else []
        if partition >= 0:
            where.append(f"on partition {partition}" + (f", worker {worker}" if worker >= 0 else ""))
        elif worker >= 0:
            where.append(f"on worker {worker}")
        super().__init__(" ".join([f"phase {phase} failed", *where]) + f": {type(cause).__name__}: {cause}")


@dataclass
class Progress:
    total: int
    synthesised: int = 0
    done: int = 0
    started_ns: int = 0


@dataclass
class RunResult:
    trace: Trace
    outcome: str  # "completed" | "stopped" | "failed"
    error: str | None
    proofs: dict[int, Any] = field(default_factory=dict)
    outputs: dict[int, dict[str, Any]] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome == "completed"


@dataclass
class _Ready:
    partition: int
    buffers: PartitionBuffers


class Pipeline:
    def __init__(
        self, config: RunConfig, backend: Backend, recorder: Recorder | None = None,
        keep_outputs: bool = False, fault: FaultHook | None = None,
        collectors: Sequence[Collector] | None = None,
    ) -> None:
        backend.check(config)
        check_memory(config.host_load_threads)  # before any work: the run would not fit
        self.config = config
        self.backend = backend
        self.recorder = recorder or Recorder(enabled=config.trace)
        self.keep_outputs = keep_outputs
        self.fault = fault
        if collectors is None and config.gpu_trace:
            from workbench.collectors import for_config

            collectors = for_config(config)
        self.collectors = list(collectors or ())
        self._started_collectors: list[Collector] = []
        self._host_load: HostLoad | None = None
        self.notices: list[str] = []  # said once each: collectors that could not start, ...
        self.circuit = SyntheticCircuit(
            config.log2_constraints, config.bool_fraction, config.synth_terms, config.seed
        )
        self.progress = Progress(total=config.partitions)
        self.proofs: dict[int, Any] = {}
        self.outputs: dict[int, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._stop_reason: str | None = None
        self._error: PhaseError | None = None
        self._state = threading.Lock()
        self._next_partition = 0
        self._claimed = 0
        # Back-pressure: a permit per partition in synthesis or waiting for a worker.
        self._lookahead = threading.Semaphore(config.synth_lookahead)
        self._ready: queue.Queue[_Ready] = queue.Queue()
        # One mutex per GPU; workers of a GPU take turns on it, GPUs run side by side.
        self.mutexes = [
            InstrumentedMutex(f"GPU {g}", self.recorder, mutex_track(g)) for g in range(config.gpus)
        ]
        self.memory: MemoryMode | None = None
        self._barriers: list[InstrumentedBarrier] = []
        self._threads: list[threading.Thread] = []
        self._finished = threading.Event()
        # Set once every thread has ended and only the result is left to make: from then on a
        # Ctrl-C could only lose the trace (the command holds signals while this is true; a
        # plain attribute, read in a signal handler, where no lock may be taken).
        self.ended = False
        self._watcher: threading.Thread | None = None
        # prep_msm's result for the GPU thread of the same worker, handed over at the barrier.
        self._preps: dict[int, PrepResult] = {}
        self._switching = False  # holds the short switch interval (pipeline/switching.py)
        self._processes: ProcessSynthesis | None = None
        self._verifier: Verifier | None = None
        self._steps = consumer_steps(backend, config.lock_scope, keep_outputs, self._preps)

    # -- control ------------------------------------------------------------------------------
    def stop(self, reason: str = "stopped by request") -> None:
        """Ask every thread to stop at its next step; safe from any thread, idempotent."""
        with self._state:
            if self._stop_reason is None:
                self._stop_reason = reason
        self._stop.set()
        for mutex in self.mutexes:
            mutex.abort(reason)
        for barrier in self._barriers:
            barrier.abort(reason)
        if self.memory is not None:
            self.memory.close(reason)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _fail(self, error: PhaseError) -> None:
        with self._state:
            first = self._error is None
            if first:
                self._error = error
        if first:
            self.recorder.instant(
                RUN_TRACK, "error", error.partition, error.worker,
                {"phase": error.phase, "message": str(error), **({"step": error.step} if error.step else {})},
            )
        self.stop(str(error))

    # -- running ------------------------------------------------------------------------------
    def run(self, tick: Callable[[], None] | None = None) -> RunResult:
        """Run to the end, a stop or a failure; never raises for a phase error or Ctrl-C.
        `tick` is called about ten times a second from the calling thread (a progress bar)."""
        started = time.perf_counter()
        try:
            self.start()
            self.wait(tick=tick)
            self.ended = True
        except KeyboardInterrupt:
            self._stop_interrupted()
        return self.result(time.perf_counter() - started)

    def _stop_interrupted(self) -> None:
        # Ctrl-C may land anywhere in start(), even before the watcher that sets `_finished`
        # was launched, and again while stopping: make sure something joins the threads.
        while True:
            try:
                self.stop(INTERRUPTED)
                watcher = self._watcher
                if not self._finished.is_set() and (watcher is None or not watcher.is_alive()):
                    self._launch_watcher()
                self.wait_quietly()
                self.ended = True
                return
            except KeyboardInterrupt:
                continue

    def _launch_watcher(self) -> None:
        self._watcher = threading.Thread(target=self._watch, name="pipeline-watch", daemon=True)
        self._watcher.start()

    @property
    def mutex(self) -> InstrumentedMutex:
        """The first GPU's mutex (the only one on a one-GPU run)."""
        return self.mutexes[0]

    @property
    def interrupted(self) -> bool:
        return self._stop_reason == INTERRUPTED

    def start(self) -> None:
        config, recorder = self.config, self.recorder
        switching.enter()
        self._switching = True
        setup_scope = Scope(recorder, RUN_TRACK)
        cursor = recorder.drain((0, 0, 0))[3]
        step = f"the {self.backend.name} backend's setup"  # the step in flight, named if it fails
        try:
            with setup_scope.span("setup", backend=self.backend.name):
                self.backend.setup(config, setup_scope)
                for line in getattr(self.backend, "setup_notices", ()):
                    self._notice(line)
                step = "the verifier's setup"
                if config.verify:
                    self._verifier = Verifier(getattr(self.backend, "key", None), self.circuit)
                # Again, now that setup settled what the backend does inside which phase and
                # whether proofs are verified.
                self._steps = consumer_steps(self.backend, config.lock_scope, self.keep_outputs, self._preps,
                                             self._verifier.check if self._verifier is not None else None)
                n, m = self.circuit.n, self.circuit.m
                capacity = config.synth_lookahead + config.workers
                step = f"memory mode {config.memory_mode}"
                self.memory = make_memory_mode(config.memory_mode, self.backend, n, m, capacity,
                                               shared=config.synthesis == "processes")
                step = "the device buffers"
                devices = [
                    self.backend.new_device_buffers(w, self.memory.needs_staging, config.gpu_of(w))
                    for w in range(config.workers)
                ]
                step = "warm_up"
                with setup_scope.span("warm_up", workers=len(devices)):
                    for device in devices:
                        self.backend.warm_up(device)
                if config.synthesis == "processes":
                    step = "synthesis_processes"
                    with setup_scope.span("synthesis_processes", count=config.synth_threads):
                        self._processes = ProcessSynthesis(self.circuit, config.synth_threads)
        except Exception as err:
            self._fail(PhaseError("setup", -1, -1, err, _failed_step(recorder, cursor) or step))
            self._finished.set()
            return
        self._start_collectors()
        if config.host_load_threads:
            self._host_load = HostLoad(config.host_load_threads)
            self._host_load.start(recorder)
        # The run's clock starts after setup: the key and twiddles are a one-off per process.
        self.progress.started_ns = recorder.now_ns()
        recorder.instant(RUN_TRACK, "run_start", attrs={"config": config.to_json()})
        # A Ctrl-C may land while threads are still being spawned: the watcher starts whatever
        # happens, and a prep thread only after its worker, who hands it the end of its jobs.
        try:
            for t in range(config.synth_threads):
                self._spawn(f"synth-{t}", self._synthesis_loop, t, track=synth_track(t))
            for w in range(config.workers):
                jobs: queue.Queue[tuple[int, PartitionBuffers] | None] = queue.Queue()
                barrier = InstrumentedBarrier(PROVER.barrier.parties, recorder, barrier_track(w), worker=w)
                self._barriers.append(barrier)
                if self._stop.is_set():
                    barrier.abort(self._stop_reason or "stopped")
                self._spawn(
                    f"gpu-worker-{w}", self._worker_loop, w, devices[w], jobs, barrier,
                    track=worker_track(w),
                )
                self._spawn(f"prep-{w}", self._prep_loop, w, jobs, barrier, track=prep_track(w))
        finally:
            self._launch_watcher()

    def _start_collectors(self) -> None:
        for collector in self.collectors:
            try:
                collector.start(self.recorder)
            except CollectorUnavailable as err:
                self._notice(f"{collector.name} is off for this run: {err}")
            except Exception as err:  # a collector must never take the run down with it
                self._notice(f"{collector.name} failed to start and is off: {type(err).__name__}: {err}")
            else:
                self._started_collectors.append(collector)

    def _stop_collectors(self) -> None:
        while self._started_collectors:
            collector = self._started_collectors.pop()
            try:
                collector.stop()
            except Exception as err:
                self._notice(f"{collector.name} failed while stopping: {type(err).__name__}: {err}")

    def _notice(self, message: str) -> None:
        self.notices.append(message)
        self.recorder.instant(RUN_TRACK, "notice", attrs={"message": message})

    def _spawn(self, name: str, target: Callable[..., None], *args: Any, track: str) -> None:
        self.recorder.name_track(track, name)
        thread = threading.Thread(target=self._guard, args=(target, *args), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)  # once started: the watcher joins only started threads

    def _guard(self, target: Callable[..., None], *args: Any) -> None:
        try:
            target(*args)
        except (Stopped, MutexAborted, BarrierBroken, PoolClosed, SynthesisCancelled):
            pass
        except PhaseError as err:
            self._fail(err)
        except BaseException as err:  # a bug in the pipeline itself: stop, don't hang
            self._fail(PhaseError("pipeline", -1, -1, err, f"thread {threading.current_thread().name}"))

    def _watch(self) -> None:
        for thread in self._threads:
            thread.join()
        self._finished.set()

    def wait(self, timeout: float | None = None, tick: Callable[[], None] | None = None) -> bool:
        """Wait for the end; short waits keep the calling (main) thread open to Ctrl-C."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._finished.wait(0.1):
            if tick is not None:
                tick()
            if deadline is not None and time.monotonic() > deadline:
                return False
        return True

    def wait_quietly(self) -> None:
        while True:
            try:
                self.wait()
                return
            except KeyboardInterrupt:  # a second Ctrl-C while stopping: keep stopping
                continue

    def result(self, wall_s: float) -> RunResult:
        self._discard_unclaimed()
        if self._host_load is not None:
            self._host_load.stop()
            for message in self._host_load.errors:
                self._notice(message)
            self._host_load = None
        self._stop_collectors()
        if self._processes is not None:
            self._processes.close()
            self._processes = None
        if self._switching:
            self._switching = False
            switching.leave()
        if self._error is not None:
            outcome, error = "failed", str(self._error)
        elif self._stop_reason is not None:
            outcome, error = "stopped", self._stop_reason
        else:
            outcome, error = "completed", None
        self.recorder.instant(RUN_TRACK, "run_end", attrs={"outcome": outcome})
        meta = {"outcome": outcome, "error": error, **self.facts(), "partitions_done": self.progress.done,
                "wall_s": wall_s}
        if self.memory is not None and hasattr(self.memory, "pool"):
            meta["pool"] = vars(self.memory.pool.statistics())
        trace = Trace.from_recorder(self.recorder, config=self.config.to_dict(), meta=meta)
        return RunResult(trace, outcome, error, dict(self.proofs), dict(self.outputs), wall_s)

    def facts(self) -> dict[str, Any]:
        """What the trace says about the run besides its outcome (also journaled once setup is done)."""
        return {
            **self.backend.describe(), "memory_emulated": self.backend.host.emulated,
            "started_ns": self.progress.started_ns, "host_cpus": os.cpu_count(),
            "notices": list(self.notices), "gpus": self.config.gpus,
            "switch_interval_s": switching.SWITCH_INTERVAL_S, "synthesis_code": native.status(),
            "worker_gpu": {str(w): self.config.gpu_of(w) for w in range(self.config.workers)},
        }

    def _discard_unclaimed(self) -> None:
        # Partitions synthesised but never picked up (a stopped run) give their buffers back.
        while self.memory is not None:
            try:
                self.memory.discard(self._ready.get_nowait().buffers)
            except queue.Empty:
                return

    # -- threads ------------------------------------------------------------------------------
    def _phase(self, scope: Scope, phase: str, fn: Callable[..., Any], *args: Any) -> Any:
        if self._stop.is_set():
            raise Stopped
        try:
            if self.fault is not None:
                self.fault(phase, scope.partition, scope.worker)
            with scope.span(phase):
                return fn(*args)
        except (Stopped, MutexAborted, BarrierBroken, PoolClosed, SynthesisCancelled):
            raise
        except Exception as err:
            raise PhaseError(phase, scope.partition, scope.worker, err) from err

    def _take_partition(self) -> int | None:
        with self._state:
            if self._next_partition >= self.config.partitions:
                return None
            self._next_partition += 1
            return self._next_partition - 1

    def _acquire_permit(self) -> None:
        while not self._lookahead.acquire(timeout=POLL_S):
            if self._stop.is_set():
                raise Stopped

    def _synthesis_loop(self, thread: int) -> None:
        assert self.memory is not None
        track = synth_track(thread)
        while not self._stop.is_set():
            partition = self._take_partition()
            if partition is None:
                return
            self._acquire_permit()
            scope = Scope(self.recorder, track, partition)
            buffers = self._phase(scope, "buffer_checkout", self.memory.checkout, scope)
            try:
                if self._processes is None:
                    self._phase(scope, PROVER.producer.name, self.circuit.synthesize, partition, buffers,
                                self._stop.is_set)
                else:
                    collect = functools.partial(
                        scope.span, "synthesis_collect",
                        bytes=sum(a.nbytes for a in (buffers.witness, *buffers.vectors())))
                    self._phase(scope, PROVER.producer.name, self._processes.synthesize, thread, partition,
                                buffers, self._stop.is_set, collect)
            except BaseException:
                self.memory.discard(buffers)
                raise
            with self._state:
                self.progress.synthesised += 1
            self.recorder.instant(QUEUE_TRACK, QUEUED, partition)
            self._ready.put(_Ready(partition, buffers))

    def _next_ready(self) -> _Ready | None:
        with self._state:
            if self._claimed >= self.config.partitions:
                return None
            self._claimed += 1
        while True:
            try:
                return self._ready.get(timeout=POLL_S)
            except queue.Empty:
                if self._stop.is_set():
                    raise Stopped from None

    def _prep_loop(
        self, worker: int, jobs: queue.Queue[tuple[int, PartitionBuffers] | None],
        barrier: InstrumentedBarrier,
    ) -> None:
        track = prep_track(worker)
        while True:
            job = jobs.get()
            if job is None:
                return
            partition, buffers = job
            scope = Scope(self.recorder, track, partition, worker)
            self._preps[worker] = self._phase(scope, PROVER.prep.name, prep_msm, buffers.witness)
            barrier.wait(PREP_PARTY, partition)

    def _worker_loop(
        self, worker: int, device: DeviceBuffers,
        jobs: queue.Queue[tuple[int, PartitionBuffers] | None], barrier: InstrumentedBarrier,
    ) -> None:
        try:
            while not self._stop.is_set():
                ready = self._next_ready()
                if ready is None:
                    return
                self._prove(worker, device, jobs, barrier, ready)
        finally:
            jobs.put(None)

    def _prove(
        self, worker: int, device: DeviceBuffers,
        jobs: queue.Queue[tuple[int, PartitionBuffers] | None], barrier: InstrumentedBarrier,
        ready: _Ready,
    ) -> None:
        assert self.memory is not None
        memory, lock = self.memory, PROVER.lock
        unit = Unit(worker, ready.partition, ready.buffers, device, memory,
                    Scope(self.recorder, worker_track(worker), ready.partition, worker), barrier)
        scope = unit.scope
        # The pickup is recorded before its permit goes back: released first, another thread's
        # synthesis could start (and be recorded) before this pickup's time was taken, and the
        # trace would show one partition more ahead than the look-ahead allows.
        scope.instant(PICKUP)
        self._lookahead.release()
        try:
            jobs.put((unit.partition, unit.buffers))
            if self.config.lock_scope == "compute":
                self._phase(scope, lock.copy_before_lock, memory.upload, unit.buffers, device, scope)
            mutex = self.mutexes[self.config.gpu_of(worker)]
            mutex.acquire(worker, unit.partition)
            try:
                for name in lock.phases:
                    self._step(unit, name)
            finally:
                mutex.release()
        finally:
            memory.discard(unit.buffers, scope)
        for name in PROVER.after_lock:
            self._step(unit, name)
            if name == PROVER.done:  # the proof is made; what follows checks it
                self._proven(unit)

    def _proven(self, unit: Unit) -> None:
        with self._state:
            self.proofs[unit.partition] = unit.results[PROVER.done]
            if self.keep_outputs:
                self.outputs[unit.partition] = {**unit.parts, "prep": unit.prep, "h_vector": unit.h_vector}
            self.progress.done += 1

    def _step(self, unit: Unit, name: str) -> None:
        step = self._steps[name]
        if step is not None:
            unit.results[name] = self._phase(unit.scope, name, step, unit)


def _failed_step(recorder: Recorder, cursor: tuple[int, int, int]) -> str | None:
    """The innermost setup span that ended by an error (spans are kept as they end, innermost
    first), where the recorder kept it: a finer name than the step the pipeline knows."""
    spans = recorder.drain(cursor)[0]
    failed = [s[1] for s in spans if s[0] == RUN_TRACK and s[6] and "error" in s[6]]
    return failed[0] if failed and failed[0] != "setup" else None


def run_pipeline(config: RunConfig, backend: Backend | None = None, **kwargs: Any) -> RunResult:
    from workbench.pipeline.backends import select_backend

    return Pipeline(config, backend or select_backend(config), **kwargs).run()
