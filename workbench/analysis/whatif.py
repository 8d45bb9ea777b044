"""What-if replay: re-run a recorded pipeline in simulation, as recorded or with a change.

Each partition keeps the costs it had in the recording (analysis/costs.py); the pipeline's
structure is rebuilt around them from the pipeline model (model/pipeline.py), as simulator
processes (analysis/replay.py): synthesis threads with look-ahead permits, a FIFO queue, GPU
workers each with a prep thread, the FIFO GPU mutex and the prep barrier, the two lock
scopes. A change alters costs (copies at link speed, synthesis k times faster, a phase at
its fastest) or structure (workers, synthesis threads, lock scope). The prediction is the
change's replay against the unchanged replay, applied to the measured throughput, so the
model's own bias largely cancels; the unchanged replay's distance from the measurement is
reported as `replay_error`.

Contract: `replay(trace, change, options) -> Trace` (the simulated run, same tracks as a
real one) and `predict(trace, change, options) -> Prediction`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from workbench.analysis.costs import PartitionCosts, RunShape, run_shape
from workbench.analysis.replay import ReplayedPipeline
from workbench.analysis.summary import summarize
from workbench.trace.container import Trace


class WhatIfError(ValueError):
    """A change the recording cannot support (say, link speed unknown, or no partitions)."""


# Beyond these factors a replay's times overflow or vanish below a nanosecond.
SPEEDUP_RANGE = (1e-3, 1e3)


@dataclass(frozen=True)
class Change:
    gpu_workers: int | None = None
    synth_threads: int | None = None
    synth_lookahead: int | None = None
    lock_scope: str | None = None
    copies_at_link: bool = False  # host-to-device copies at link speed, no staging: zerocopy
    synthesis_speedup: float = 1.0
    prep_speedup: float = 1.0
    compute_speedup: float = 1.0  # NTTs, MSMs, batch addition: faster kernels
    phase_at_fastest: str | None = None  # every instance of this phase as fast as the fastest

    def __post_init__(self) -> None:
        low, high = SPEEDUP_RANGE
        for name in ("synthesis_speedup", "prep_speedup", "compute_speedup"):
            value = getattr(self, name)
            if not low <= value <= high:
                raise WhatIfError(f"{name}={value!r} is not allowed: a factor from {low:g} to {high:g}")

    def describe(self) -> str:
        words = []
        if self.gpu_workers is not None:
            words.append(f"{self.gpu_workers} GPU workers")
        if self.synth_threads is not None:
            words.append(f"{self.synth_threads} synthesis threads")
        if self.synth_lookahead is not None:
            words.append(f"look-ahead {self.synth_lookahead}")
        if self.lock_scope is not None:
            words.append(f"lock scope {self.lock_scope}")
        if self.copies_at_link:
            words.append("copies at link speed (zerocopy)")
        for name, value in (("synthesis", self.synthesis_speedup), ("prep_msm", self.prep_speedup),
                            ("GPU compute", self.compute_speedup)):
            if value != 1.0:
                words.append(f"{name} {value:g}x faster")
        if self.phase_at_fastest:
            words.append(f"every {self.phase_at_fastest} as fast as the fastest")
        return ", ".join(words) or "as recorded"


ZEROCOPY = Change(copies_at_link=True)


@dataclass(frozen=True)
class WhatIfOptions:
    link_gbps: float | None = None
    copy_bytes: float | None = None  # per partition, for copies that do not record bytes
    host_cores: float | None = None  # cores the host phases share; None: never short of cores


@dataclass(frozen=True)
class Prediction:
    change: str
    measured_per_min: float
    baseline_per_min: float  # the unchanged replay
    replayed_per_min: float  # the changed replay
    replay_error: float  # baseline / measured - 1: how well the model reproduces the run
    mutex_held: float  # in the changed replay
    trace: Trace = field(repr=False, compare=False)

    @property
    def gain(self) -> float:
        """Predicted relative change in throughput."""
        return self.replayed_per_min / self.baseline_per_min - 1 if self.baseline_per_min else 0.0

    @property
    def predicted_per_min(self) -> float:
        return self.measured_per_min * (1 + self.gain)


class WhatIf:
    """Replays of one recording: the unchanged replay is computed once and shared."""

    def __init__(self, trace: Trace, options: WhatIfOptions | None = None) -> None:
        self.options = options or WhatIfOptions()
        self.shape = run_shape(trace, _cores(trace, self.options))
        self._baseline: float | None = None

    @property
    def baseline_per_min(self) -> float:
        if self._baseline is None:
            replayed = simulate(self.shape, Change(), self.options, sample=True)
            self._baseline = summarize(replayed).throughput_per_min
        return self._baseline

    def replay(self, change: Change | None = None) -> Trace:
        return simulate(self.shape, change or Change(), self.options)

    def predict(self, change: Change) -> Prediction:
        """The change's replay against the unchanged one; on a long recording both replay the
        same sample of its partitions (see `sample_costs`), and so does the returned trace."""
        changed = simulate(self.shape, change, self.options, sample=True)
        after = summarize(changed)
        measured = self.shape.measured_per_min
        base = self.baseline_per_min
        return Prediction(
            change=change.describe(), measured_per_min=measured, baseline_per_min=base,
            replayed_per_min=after.throughput_per_min,
            replay_error=base / measured - 1 if measured else 0.0,
            mutex_held=after.mutex_held_fraction, trace=changed,
        )


def predict(trace: Trace, change: Change, options: WhatIfOptions | None = None) -> Prediction:
    return WhatIf(trace, options).predict(change)


def replay(trace: Trace, change: Change | None = None, options: WhatIfOptions | None = None) -> Trace:
    return WhatIf(trace, options).replay(change)


def _cores(trace: Trace, options: WhatIfOptions) -> float | None:
    if options.host_cores is not None:
        return options.host_cores
    emulated = bool(trace.meta.get("memory_emulated")) or trace.config.get("backend") == "cpu"
    return CPU_BACKEND_CORES if emulated else None


# The CPU backend's NTTs and MSMs hold the interpreter lock nearly throughout (two threads of
# either run at 0.94-1.06x the speed of one) while its copies and synthesis partly release
# it, so its phases share less than the machine's cores. 1.5 is what replays best against
# real runs (benchmarks/whatif_validation.py: mean error 8% against 14-16% for 1 core on
# the two-core development machine); per-span CPU time in the trace would measure it instead.
CPU_BACKEND_CORES = 1.5


# A prediction is a ratio of two replays' throughputs, and a replay costs some microseconds a
# partition in the interpreter, several seconds for each change on a recording of 10^6 spans.
# Past REPLAY_SAMPLE partitions, predictions replay SAMPLE_BLOCKS runs of consecutive
# partitions spread evenly over the recording: consecutive, so partitions that ran together
# still meet in the replay; spread, so a slow start or a drift in costs is still seen. On
# 10^6-span recordings (benchmarks/verdict_speed.py) the sampled throughputs stay within
# 0.5% of the full replay's and the gains within 0.5 percentage points (tested in
# tests/test_analysis_speed.py at 1% and 1 point).
REPLAY_SAMPLE = 4096
SAMPLE_BLOCKS = 8


def sample_costs(costs: tuple[PartitionCosts, ...]) -> tuple[PartitionCosts, ...]:
    if len(costs) <= REPLAY_SAMPLE:
        return costs
    size = REPLAY_SAMPLE // SAMPLE_BLOCKS
    firsts = np.linspace(0, len(costs) - size, SAMPLE_BLOCKS).round().astype(int).tolist()
    return tuple(c for first in firsts for c in costs[first:first + size])


def simulate(shape: RunShape, change: Change, options: WhatIfOptions, sample: bool = False) -> Trace:
    if not shape.costs:
        raise WhatIfError("the trace has no partition that reached the GPU mutex: nothing to replay")
    # The fastest instance is over the recorded costs, the same for every partition: found once,
    # not once a partition, which made a change quadratic in the partitions.
    fastest = (min(_phase_ns(c, change.phase_at_fastest) for c in shape.costs)
               if change.phase_at_fastest else None)
    chosen = sample_costs(shape.costs) if sample else shape.costs
    costs = [_changed(c, change, options, fastest) for c in chosen]
    replayed = replay_costs(shape, change, costs)
    if len(chosen) < len(shape.costs):
        replayed.meta["sampled"] = f"{len(chosen)} of {len(shape.costs)} partitions"
    return replayed


def _changed(
    c: PartitionCosts, change: Change, options: WhatIfOptions, fastest: float | None,
) -> PartitionCosts:
    copy_ns, staging_ns, prep_delay_ns = c.copy_ns, c.staging_ns, c.prep_delay_ns
    if change.copies_at_link:
        link = options.link_gbps
        if not link:
            raise WhatIfError("copies at link speed need the link's speed (link_gbps)")
        nbytes = c.copy_bytes or (options.copy_bytes or 0.0)
        if not nbytes:
            raise WhatIfError(
                f"partition {c.partition} records no copy sizes: give the bytes a partition moves"
            )
        copy_ns, staging_ns = nbytes / link, 0.0
        # Recorded, prep's start waited through the copies (pageable runs: about the copies'
        # time longer than zerocopy runs): the time the copies save comes off that wait too.
        prep_delay_ns = max(prep_delay_ns - (c.copy_ns + c.staging_ns - copy_ns), 0.0)
    result = dataclasses.replace(
        c, synthesis_ns=c.synthesis_ns / change.synthesis_speedup,
        prep_ns=c.prep_ns / change.prep_speedup, compute_ns=c.compute_ns / change.compute_speedup,
        batch_add_ns=c.batch_add_ns / change.compute_speedup,
        tail_msm_ns=c.tail_msm_ns / change.compute_speedup, copy_ns=copy_ns, staging_ns=staging_ns,
        prep_delay_ns=prep_delay_ns,
    )
    if change.phase_at_fastest and fastest is not None:
        result = _with_phase(result, change.phase_at_fastest, fastest)
    return result


_PHASE_FIELDS = {
    "synthesis": ("synthesis_ns",), "prep_msm": ("prep_ns",), "h2d_copy": ("copy_ns",),
    "ntt_msm_h": ("copy_ns", "staging_ns", "compute_ns"), "batch_add": ("batch_add_ns",),
    "tail_msm": ("tail_msm_ns",), "b_g2_msm": ("b_g2_msm_ns",), "finish": ("finish_ns",),
}


def _phase_ns(c: PartitionCosts, phase: str) -> float:
    if phase not in _PHASE_FIELDS:
        raise WhatIfError(f"no what-if for phase {phase!r}; phases: {', '.join(_PHASE_FIELDS)}")
    return sum(getattr(c, f) for f in _PHASE_FIELDS[phase])


def _with_phase(c: PartitionCosts, phase: str, target: float) -> PartitionCosts:
    now = _phase_ns(c, phase)
    scale = target / now if now > 0 else 1.0
    return dataclasses.replace(c, **{f: getattr(c, f) * scale for f in _PHASE_FIELDS[phase]})


def replay_costs(shape: RunShape, change: Change, costs: list[PartitionCosts]) -> Trace:
    """The pipeline model (analysis/replay.py) run over these costs, with the change's structure."""
    return ReplayedPipeline(
        shape, costs, workers=change.gpu_workers or shape.workers,
        synth_threads=change.synth_threads or shape.synth_threads,
        lookahead=change.synth_lookahead or shape.lookahead, lock_scope=change.lock_scope or shape.lock_scope,
        memory_mode="zerocopy" if change.copies_at_link else shape.memory_mode, description=change.describe(),
    ).run()
