"""Event records: the raw truth every view, table and verdict is derived from.

A span is (track, name, start_ns, end_ns, partition, worker, attributes); an instant is a
span of no length; a counter sample is a value on a counter track at one time. Tracks say
where a thing happened; model/tracks.py builds and parses their names.
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
