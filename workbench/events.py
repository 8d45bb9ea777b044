"""Event records: the raw truth every view, table and verdict is derived from.

A span is (track, name, start_ns, end_ns, partition, worker, attributes); an instant is a
span of no length; a counter sample is a value on a counter track at one time. Tracks say
where a thing happened (`synth/3`, `worker/0`, `worker/0/prep`, `mutex/gpu0`, ...).
Partition and worker are -1 when the event belongs to none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NO_ID = -1

Attributes = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Span:
    track: str
    name: str
    start_ns: int
    end_ns: int
    partition: int = NO_ID
    worker: int = NO_ID
    attrs: Attributes = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class Instant:
    track: str
    name: str
    ts_ns: int
    partition: int = NO_ID
    worker: int = NO_ID
    attrs: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CounterSample:
    track: str
    name: str
    ts_ns: int
    value: float


# Track names used by the pipeline, in one place so producers and views agree.
def synth_track(thread: int) -> str:
    return f"synth/{thread}"


def worker_track(worker: int) -> str:
    return f"worker/{worker}"


def prep_track(worker: int) -> str:
    return f"worker/{worker}/prep"


def mutex_track(gpu: int) -> str:
    return f"mutex/gpu{gpu}"


def barrier_track(worker: int) -> str:
    return f"barrier/worker{worker}"


def gpu_track(gpu: int, what: str) -> str:
    return f"gpu{gpu}/{what}"


HOST_LOAD_TRACK = "host/load"  # pipeline/host_load.py: its span and its GB/s counter


# The prover's phases in the order a partition passes them.
PHASES = (
    "synthesis",
    "prep_msm",
    "ntt_msm_h",
    "barrier_wait",
    "batch_add",
    "tail_msm",
    "b_g2_msm",
    "finish",
)
