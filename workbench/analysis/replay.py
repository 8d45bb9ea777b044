"""The pipeline model as simulator processes: the what-if replay's run.

The processes are built from the pipeline model (model/pipeline.py: `PROVER`, or the model
given), not from a second description of it: producer threads run `PROVER.producer` behind the look-ahead
permits (`PROVER.lookahead_knob`); each GPU worker takes a unit from the FIFO queue, starts
its prep thread (`PROVER.prep`), copies before the lock (`lock.copy_before_lock`, scope
compute) or at the start of `lock.copy_inside` (scope coarse), holds its GPU's FIFO mutex
around `lock.phases`, meets the prep thread at `barrier.phase` before `barrier.before`, and
runs `after_lock` once the mutex is free (optional phases, verify, are not replayed). Each
phase lasts what the recording says it cost (analysis/costs.py); spans land on the same
tracks a real run writes.

Contract: `ReplayedPipeline(shape, costs, ...).run() -> Trace`.
"""

from __future__ import annotations

from typing import Any

from workbench.analysis.costs import PartitionCosts, RunShape
from workbench.analysis.simulation import (
    Acquire,
    Event,
    Get,
    Lock,
    Process,
    Queue,
    Semaphore,
    Simulator,
    WaitFor,
    Work,
)
from workbench.model import tracks as tr
from workbench.model.pipeline import COMPUTE, PICKUP, PROVER, QUEUED, Pipeline
from workbench.trace.container import Trace

# What each phase costs, from a partition's recorded costs (the copy and the compute of the
# phase the coarse copy opens are separate: the copy moves with the lock scope).
PHASE_COST = {
    PROVER.producer.name: "synthesis_ns", PROVER.prep.name: "prep_ns", PROVER.lock.copy_inside: "compute_ns",
    "batch_add": "batch_add_ns", "tail_msm": "tail_msm_ns", "b_g2_msm": "b_g2_msm_ns", "finish": "finish_ns",
}


class ReplayedPipeline:
    """One replay of `model`: `workers` per GPU, `synth_threads` producers, `lookahead` permits."""

    def __init__(self, shape: RunShape, costs: list[PartitionCosts], *, workers: int, synth_threads: int,
                 lookahead: int, lock_scope: str, memory_mode: str, description: str,
                 model: Pipeline = PROVER) -> None:
        self.model, self.lock, self.barrier = model, model.lock, model.barrier
        self.workers, self.gpus, self.synth_threads = workers, shape.gpus, synth_threads
        self.lock_scope = lock_scope
        self.costs = costs
        self.cpu_kernels = shape.emulated  # on the CPU backend the "GPU" phases use cores too
        self.sim = Simulator(shape.host_cores)
        self.mutexes = [Lock() for _ in range(self.gpus)]
        self.permits = Semaphore(lookahead)
        self.ready = Queue()
        self.next_partition = 0
        self.claimed = 0
        self.spans: list[tuple[str, str, int, int, int, int, dict[str, Any] | None]] = []
        self.instants: list[tuple[str, str, int, int, int, dict[str, Any] | None]] = []
        self.config = {
            "gpus": self.gpus, "gpu_workers": workers, "synth_threads": synth_threads,
            model.lookahead_knob: lookahead, "lock_scope": lock_scope, "memory_mode": memory_mode,
            "partitions": len(costs), "backend": "cpu" if shape.emulated else "replay",
        }
        self.description = description

    def run(self) -> Trace:
        sim = self.sim
        for t in range(self.synth_threads):
            sim.spawn(self._producer(t))
        for w in range(self.gpus * self.workers):
            sim.spawn(self._worker(w))
        end = sim.run()
        self.instants.append((tr.RUN_TRACK, "run_start", 0, -1, -1, None))
        self.instants.append((tr.RUN_TRACK, "run_end", int(end), -1, -1, {"outcome": "completed"}))
        meta: dict[str, Any] = {
            "outcome": "completed", "replay": self.description, "partitions_done": len(self.costs),
        }
        if self.gpus > 1:
            meta["worker_gpu"] = {str(w): w // self.workers for w in range(self.gpus * self.workers)}
        return Trace.from_rows(self.spans, self.instants, (), self.config, meta)

    def _span(self, track: str, name: str, start: float, p: int, w: int = -1,
              attrs: dict[str, Any] | None = None) -> None:
        self.spans.append((track, name, int(start), int(self.sim.now), p, w, attrs))

    def _work(self, track: str, name: str, ns: float, p: int, w: int = -1, cpu: bool = True,
              attrs: dict[str, Any] | None = None) -> Process:
        start = self.sim.now
        yield Work(ns, cpu)
        if ns > 0:
            self._span(track, name, start, p, w, attrs)

    def _producer(self, thread: int) -> Process:
        track = tr.synth_track(thread)
        while self.next_partition < len(self.costs):
            index = self.next_partition
            self.next_partition += 1
            c = self.costs[index]
            yield Acquire(self.permits)
            yield from self._work(track, "buffer_checkout", c.checkout_ns, c.partition)
            yield from self._work(track, self.model.producer.name, c.synthesis_ns, c.partition)
            self.instants.append((tr.QUEUE_TRACK, QUEUED, int(self.sim.now), c.partition, -1, None))
            self.sim.put(self.ready, index)

    def _worker(self, w: int) -> Process:
        sim, track = self.sim, tr.worker_track(w)
        gpu = w // self.workers  # workers are numbered GPU by GPU, as in a real run
        mutex, mutex_track = self.mutexes[gpu], tr.mutex_track(gpu)
        while self.claimed < len(self.costs):
            self.claimed += 1
            index: int = yield Get(self.ready)
            c = self.costs[index]
            p = c.partition
            sim.release(self.permits)
            self.instants.append((track, PICKUP, int(sim.now), p, w, None))
            prep_done = Event()
            prep_arrived: list[float] = []
            sim.spawn(self._prep(w, c, prep_done, prep_arrived))
            if self.lock_scope == "compute":
                start = sim.now
                yield from self._copy(track, c, w)
                self._span(track, self.lock.copy_before_lock, start, p, w)
            asked = sim.now
            yield Acquire(mutex)
            self._span(mutex_track, "wait", asked, p, w)
            held = sim.now
            for phase in self.lock.phases:
                if phase == self.barrier.phase:
                    yield from self._barrier(track, c, w, prep_done, prep_arrived)
                else:
                    yield from self._phase(track, phase, c, w)
            yield Work(c.lock_other_ns, self.cpu_kernels)
            self._span(mutex_track, "hold", held, p, w)
            sim.release(mutex)
            for phase in self.model.after_lock:
                if not self.model.phase(phase).optional:  # verify: no cost of it is replayed
                    yield from self._phase(track, phase, c, w)

    def _phase(self, track: str, phase: str, c: PartitionCosts, w: int) -> Process:
        start = self.sim.now
        cpu = self.cpu_kernels if self.model.phase(phase).does == COMPUTE else True
        if phase == self.lock.copy_inside:
            if self.lock_scope == "coarse":
                yield from self._copy(track, c, w)
            yield from self._work(track, "ntt", c.compute_ns, c.partition, w, cpu)
            self._span(track, phase, start, c.partition, w)
            return
        if phase not in PHASE_COST:
            raise ValueError(f"the replay knows no recorded cost for phase {phase!r} of {self.model.name}")
        ns = getattr(c, PHASE_COST[phase])
        yield from self._work(track, phase, ns, c.partition, w, cpu)
        if phase == self.model.done and ns <= 0:  # marks the unit done
            self._span(track, phase, start, c.partition, w)

    def _barrier(self, track: str, c: PartitionCosts, w: int, prep_done: Event,
                 prep_arrived: list[float]) -> Process:
        arrived, p = self.sim.now, c.partition
        yield WaitFor(prep_done)
        self._span(track, self.barrier.phase, arrived, p, w)
        meeting, (gpu_party, prep_party) = tr.barrier_track(w), self.barrier.parties
        self._span(meeting, "wait", arrived, p, w, {"party": gpu_party})
        self._span(meeting, "wait", prep_arrived[0] if prep_arrived else arrived, p, w, {"party": prep_party})

    def _copy(self, track: str, c: PartitionCosts, w: int) -> Process:
        yield from self._work(track, "staging_copy", c.staging_ns, c.partition, w)
        yield from self._work(track, "h2d_copy", c.copy_ns, c.partition, w, self.cpu_kernels,
                              {"bytes": c.copy_bytes} if c.copy_bytes else None)

    def _prep(self, w: int, c: PartitionCosts, done: Event, arrived: list[float]) -> Process:
        yield Work(c.prep_delay_ns, cpu=False)  # waiting to start, not work: it takes no core
        yield from self._work(tr.prep_track(w), self.model.prep.name, c.prep_ns, c.partition, w)
        arrived.append(self.sim.now)
        self.sim.set(done)
