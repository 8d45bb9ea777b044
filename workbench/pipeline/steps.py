"""What runs each phase of a GPU worker: one callable per consumer phase of the model.

The pipeline model (model/pipeline.py) says which phases a unit passes, in which order and
which of them under the GPU mutex; the runner (pipeline/run.py) walks those lists and calls,
for each phase name, the step this table holds. A phase the model gains without a step here
stops the runner before it starts, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.model.pipeline import PROVER
from workbench.pipeline.memory import MemoryMode, PartitionBuffers
from workbench.prover.backend import B_G2, Backend, DeviceBuffers, settle
from workbench.prover.prep import PrepResult
from workbench.trace.barrier import InstrumentedBarrier
from workbench.trace.scope import Scope

GPU_PARTY, PREP_PARTY = PROVER.barrier.parties


@dataclass
class Unit:
    """A partition on its way through a GPU worker's phases."""

    worker: int
    partition: int
    buffers: PartitionBuffers
    device: DeviceBuffers
    memory: MemoryMode
    scope: Scope
    barrier: InstrumentedBarrier
    prep: PrepResult | None = None  # prep_msm's result, handed over at the barrier
    results: dict[str, Any] = field(default_factory=dict)  # each phase's, by its name
    parts: dict[str, Any] = field(default_factory=dict)  # the proof's settled parts
    h_vector: Any = None  # kept for checking results (keep_outputs)

    @property
    def prepared(self) -> PrepResult:
        assert self.prep is not None, "a phase after the barrier needs prep_msm's result"
        return self.prep


# Runs one phase of a unit; what it returns is kept in `unit.results` under the phase's name.
Step = Callable[[Unit], Any]


def consumer_steps(backend: Backend, lock_scope: str, keep_outputs: bool, preps: dict[int, PrepResult],
                   verify: Callable[[Any, dict[str, Any]], None] | None = None) -> dict[str, Step | None]:
    """Every consumer phase of the model and what runs it; None: the backend does that phase's
    work inside others (B's G2 sum on the GPU, inside batch_add and tail_msm), or the run
    did not ask for an optional phase (verify). `preps` is where each worker's prep thread
    leaves its result before arriving at the barrier."""

    def ntt_msm_h(u: Unit) -> Any:
        if lock_scope == "coarse":  # the copy opens PROVER.lock.copy_inside
            u.memory.upload(u.buffers, u.device, u.scope)
        h = backend.ntt_msm_h(u.device, u.scope)
        if keep_outputs:  # read before the worker's next partition overwrites it
            u.h_vector = backend.h_vector(u.device)
        return h

    def meet_prep(u: Unit) -> None:
        u.barrier.wait(GPU_PARTY, u.partition)
        u.prep = preps.pop(u.worker)

    def finish(u: Unit) -> Any:
        # The GPU phases' host-only last steps, now that the mutex is free for the other worker.
        r = u.results
        parts = {"h": r["ntt_msm_h"], "batch": r["batch_add"], "tail": r["tail_msm"]}
        if "b_g2_msm" in r:
            parts["b_g2"] = r["b_g2_msm"]
        parts = settle(parts)
        if "b_g2" not in parts:  # summed on the GPU inside the mutex: two halves to add
            parts["b_g2"] = parts["batch"].pop(B_G2) + parts["tail"].pop(B_G2)
        u.parts = parts
        return backend.finish(parts, u.partition, u.scope)

    steps: dict[str, Step | None] = {
        "ntt_msm_h": ntt_msm_h,
        PROVER.barrier.phase: meet_prep,
        "batch_add": lambda u: backend.batch_add(u.device, u.prepared, u.scope),
        "tail_msm": lambda u: backend.tail_msm(u.device, u.prepared, u.scope),
        "b_g2_msm": None if backend.b_g2_in_gpu_phases else (
            lambda u: backend.b_g2_msm(u.buffers.witness, u.prepared, u.scope)),
        "finish": finish,
        # After finish, outside the mutex: GPU timings stay as they are.
        "verify": None if verify is None else (lambda u: verify(u.results["finish"], u.parts)),
    }
    wanted = [p.name for p in PROVER.consumer]
    if sorted(steps) != sorted(wanted):
        raise RuntimeError(f"the runner has steps for {sorted(steps)}, the model's phases are {wanted}")
    return steps
