"""The pipeline as data: who runs what, in which order, under which lock, meeting where.

This is the one place the pipeline's structure is written. Every reader takes it from here:
- the runner (pipeline/run.py) runs a unit's consumer phases in this order, one callable per
  phase name, taking the GPU mutex around `lock.phases` and meeting the prep thread at the
  barrier;
- the what-if simulator (analysis/replay.py, driven by analysis/whatif.py) builds its worker
  process from the same lists: the copy (`lock.copy_before_lock` or `lock.copy_inside`),
  the lock phases, the barrier before `barrier.before`, the phases after the lock, and the
  producers' look-ahead (`lookahead_knob`);
- the analysis (analysis/tracks.py and what reads it) takes which phases run under the lock,
  compute on the GPU or copy from the derived lists below;
- the cuzk importer places a daemon's log lines on it (`CUZK`, `canonical`);
- the golden tests (tests/golden.py) build their hand-made schedules from its phase order.
Change a phase here and the runner refuses to start until it has a callable for it
(pipeline/run.py), while the simulator, the analysis and the tests follow by themselves.

A pipeline is:
- producers: threads that make units of work (synthesis writes a partition's witness and
  a, b, c), limited by back-pressure (how many units may be made ahead of the consumers);
- a queue, first in first out, from producers to consumers;
- consumers: GPU workers, each taking a unit and running its phases in order; the phases
  from the first to the last under the lock run while the worker holds its GPU's mutex;
- a prep stage per consumer that meets the consumer at a barrier inside the lock;
- work after the lock (CPU work that overlaps the next holder's GPU work).

The workbench's own prover is `PROVER`; a cuzk daemon runs the same structure and prints
its phases under other names (`CUZK`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# What a phase does, as far as the analysis needs to know.
COMPUTE, COPY, WAIT, HOST = "compute", "copy", "wait", "host"


@dataclass(frozen=True)
class Phase:
    name: str
    does: str  # COMPUTE (GPU kernels), COPY (moves a, b, c to the device), WAIT, HOST
    # Spans inside the phase that are its GPU compute timed on the host, or its copies.
    parts: tuple[str, ...] = ()
    optional: bool = False  # runs only when the run asks for it (verify: RunConfig.verify)


@dataclass(frozen=True)
class Lock:
    """One mutex per GPU; the consumer holds it from `phases[0]` to `phases[-1]`."""

    per: str  # "gpu": one lock per device
    phases: tuple[str, ...]
    # Lock scopes: which of the consumer's copies run inside the lock.
    scopes: tuple[str, ...] = ("coarse", "compute")
    # With scope "compute" the copy runs as its own phase before the lock; with "coarse" it
    # opens the lock phase `copy_inside`.
    copy_before_lock: str = "upload"
    copy_inside: str = "ntt_msm_h"


@dataclass(frozen=True)
class Barrier:
    parties: tuple[str, str]  # the consumer's party, then the prep stage's
    phase: str  # the consumer phase that is its wait
    before: str  # the consumer phase that needs what the prep stage made


@dataclass(frozen=True)
class Pipeline:
    name: str
    unit: str  # what one unit of work is called
    producer: Phase
    prep: Phase
    consumer: tuple[Phase, ...]  # in the order a unit passes them
    lock: Lock
    barrier: Barrier
    lookahead_knob: str = "synth_lookahead"  # back-pressure: units made ahead of the consumers
    # Names another program prints for our phases (the cuzk daemon's log keys).
    aliases: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [p.name for p in self.consumer]
        first = names.index(self.lock.phases[0]) if self.lock.phases[0] in names else -1
        if first < 0 or tuple(names[first:first + len(self.lock.phases)]) != self.lock.phases:
            raise ValueError(f"{self.name}: the lock phases must be consecutive consumer phases")
        if self.lock.copy_inside not in self.lock.phases:
            raise ValueError(f"{self.name}: the coarse copy must open a lock phase")
        b = self.barrier
        if b.phase not in self.lock.phases or names.index(b.before) != names.index(b.phase) + 1:
            raise ValueError(f"{self.name}: the barrier is a lock phase just before {b.before!r}")

    # -- derived ---------------------------------------------------------------------------
    @property
    def phases(self) -> tuple[str, ...]:
        """Every phase in the order a unit passes them (the copy-before-lock phase excluded)."""
        return (self.producer.name, self.prep.name, *(p.name for p in self.consumer))

    @property
    def lock_phases(self) -> tuple[str, ...]:
        return self.lock.phases

    @property
    def gpu_phases(self) -> tuple[str, ...]:
        """The lock phases that run the GPU."""
        return tuple(p.name for p in self.consumer if p.name in self.lock.phases and p.does == COMPUTE)

    @property
    def after_lock(self) -> tuple[str, ...]:
        names = [p.name for p in self.consumer]
        last = names.index(self.lock.phases[-1])
        return tuple(names[last + 1:])

    @property
    def compute_spans(self) -> tuple[str, ...]:
        """Spans timed on the host that are GPU compute (phases and their parts)."""
        out: list[str] = []
        for p in self.consumer:
            if p.does == COMPUTE:
                out.extend(p.parts or (p.name,))
        return tuple(dict.fromkeys(out))

    @property
    def copy_spans(self) -> tuple[str, ...]:
        """Host-side spans that move a unit's inputs towards the device."""
        return tuple(dict.fromkeys(s for p in self.consumer if p.does == COPY for s in p.parts))

    @property
    def done(self) -> str:
        """The phase that completes a unit (its result is the unit's product, a proof): the
        last one that always runs; optional phases after it check what it made."""
        return next(p.name for p in reversed(self.consumer) if not p.optional)

    def phase(self, name: str) -> Phase:
        for p in (self.producer, self.prep, *self.consumer):
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no phase {name!r}")

    def under_lock(self, phase: str) -> bool:
        return phase in self.lock.phases

    def canonical(self, name: str) -> str:
        """Our name for a phase another program prints under its own."""
        return self.aliases.get(name, name)


PROVER = Pipeline(
    name="workbench prover",
    unit="partition",
    producer=Phase("synthesis", HOST),
    prep=Phase("prep_msm", HOST),
    consumer=(
        # ntt_msm_h copies a, b, c (lock scope coarse) and then computes: its copy parts are
        # what transfers.py and idle.py count as copying under the lock.
        Phase("ntt_msm_h", COMPUTE, parts=("ntt", "coset_intt", "msm_h")),
        Phase("barrier_wait", WAIT),
        Phase("batch_add", COMPUTE),
        Phase("tail_msm", COMPUTE),
        Phase("b_g2_msm", HOST),
        Phase("finish", HOST),
        Phase("verify", HOST, optional=True),  # checks the proof finish made
    ),
    lock=Lock(per="gpu", phases=("ntt_msm_h", "barrier_wait", "batch_add", "tail_msm")),
    barrier=Barrier(parties=("gpu", "prep"), phase="barrier_wait", before="batch_add"),
)

# The spans that copy a, b, c: inside ntt_msm_h (coarse) or the upload phase (compute).
# A partition's instants: `queued` on the queue track when it is ready, `pickup` on its worker's
# track when the worker takes it.
QUEUED, PICKUP = "queued", "pickup"
COPY_SPANS = ("h2d_copy", "staging_copy")

# The cuzk daemon: the same structure; its log keys name the phases (CUZK_TIMING lines), the
# parts of ntt_msm_h (CUZK_NTT_H), and the call's host work before it asks for the mutex
# (pre_lock_cpu, with split_vectors inside it), which our prover does not time apart.
CUZK = Pipeline(
    name="cuzk daemon",
    unit="partition",
    producer=PROVER.producer,
    prep=PROVER.prep,
    consumer=PROVER.consumer,
    lock=PROVER.lock,
    barrier=PROVER.barrier,
    aliases={"ntt_msm_h_ms": "ntt_msm_h", "barrier_wait_ms": "barrier_wait", "batch_add_ms": "batch_add",
             "tail_msm_ms": "tail_msm", "prep_msm_ms": "prep_msm", "b_g2_msm_ms": "b_g2_msm",
             "synth_ms": "synthesis", "pre_lock_cpu_ms": "pre_lock_cpu", "split_vectors_ms": "split_vectors",
             # CUZK_NTT_H, in the order the daemon runs them inside ntt_msm_h
             "d_b_alloc": "d_b_alloc", "ntt_kernels": "ntt", "coset_intt_sync": "coset_intt",
             "msm_init": "msm_init", "msm_invoke": "msm_h", "msm_dtor": "msm_dtor"},
)
# The CUZK_NTT_H fields that name parts of ntt_msm_h, in order ("total" is the whole).
CUZK_NTT_H_PARTS = ("d_b_alloc", "ntt_kernels", "coset_intt_sync", "msm_init", "msm_invoke", "msm_dtor")
