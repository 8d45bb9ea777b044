"""The trace: raw records of one run in columns, plus the run's configuration and facts.

Columns are numpy arrays (track and name as indices into string tables) so that traces of
millions of spans stay small and every query is a vectorised mask. Views, tables and
verdicts are derived from this on demand; nothing derived is stored here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.events import CounterSample, Instant, Span
from workbench.trace.recorder import CounterRow, InstantRow, Recorder, SpanRow


@dataclass
class StringTable:
    values: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def intern(self, value: str) -> int:
        found = self.index.get(value)
        if found is None:
            found = len(self.values)
            self.values.append(value)
            self.index[value] = found
        return found

    @classmethod
    def of(cls, values: Sequence[str]) -> StringTable:
        values = list(values)
        return cls(values, {v: i for i, v in enumerate(values)})


@dataclass
class SpanTable:
    track: np.ndarray  # int32 index into Trace.strings
    name: np.ndarray  # int32 index into Trace.strings
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    partition: np.ndarray  # int32
    worker: np.ndarray  # int32
    attrs: list[dict[str, Any] | None]

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass
class InstantTable:
    track: np.ndarray
    name: np.ndarray
    ts_ns: np.ndarray
    partition: np.ndarray
    worker: np.ndarray
    attrs: list[dict[str, Any] | None]

    def __len__(self) -> int:
        return len(self.ts_ns)


@dataclass
class CounterTable:
    track: np.ndarray
    name: np.ndarray
    ts_ns: np.ndarray
    value: np.ndarray  # float64

    def __len__(self) -> int:
        return len(self.ts_ns)


@dataclass
class Trace:
    strings: StringTable
    spans: SpanTable
    instants: InstantTable
    counters: CounterTable
    # The run configuration (as a JSON-able dict) and facts about the run: backend, device,
    # start time, outcome, error, whether memory modes were emulated, ...
    config: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    thread_names: dict[str, str] = field(default_factory=dict)

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def from_rows(
        cls, spans: Sequence[SpanRow], instants: Sequence[InstantRow] = (),
        counters: Sequence[CounterRow] = (), config: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None, thread_names: dict[str, str] | None = None,
    ) -> Trace:
        strings = StringTable()
        intern = strings.intern
        span_table = SpanTable(
            track=np.array([intern(r[0]) for r in spans], dtype=np.int32),
            name=np.array([intern(r[1]) for r in spans], dtype=np.int32),
            start_ns=np.array([r[2] for r in spans], dtype=np.int64),
            end_ns=np.array([r[3] for r in spans], dtype=np.int64),
            partition=np.array([r[4] for r in spans], dtype=np.int32),
            worker=np.array([r[5] for r in spans], dtype=np.int32),
            attrs=[r[6] for r in spans],
        )
        instant_table = InstantTable(
            track=np.array([intern(r[0]) for r in instants], dtype=np.int32),
            name=np.array([intern(r[1]) for r in instants], dtype=np.int32),
            ts_ns=np.array([r[2] for r in instants], dtype=np.int64),
            partition=np.array([r[3] for r in instants], dtype=np.int32),
            worker=np.array([r[4] for r in instants], dtype=np.int32),
            attrs=[r[5] for r in instants],
        )
        counter_table = CounterTable(
            track=np.array([intern(r[0]) for r in counters], dtype=np.int32),
            name=np.array([intern(r[1]) for r in counters], dtype=np.int32),
            ts_ns=np.array([r[2] for r in counters], dtype=np.int64),
            value=np.array([r[3] for r in counters], dtype=np.float64),
        )
        return cls(
            strings, span_table, instant_table, counter_table, dict(config or {}),
            dict(meta or {}), dict(thread_names or {}),
        )

    @classmethod
    def from_recorder(
        cls, recorder: Recorder, config: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Trace:
        spans, instants, counters, _ = recorder.drain((0, 0, 0))
        meta = {"origin_ns": recorder.origin_ns, **(meta or {})}
        return cls.from_rows(spans, instants, counters, config, meta, recorder.thread_names)

    # -- querying ---------------------------------------------------------------------------
    def string_id(self, value: str) -> int:
        return self.strings.index.get(value, -1)

    def span_mask(
        self, track: str | None = None, name: str | None = None, partition: int | None = None,
        worker: int | None = None, track_prefix: str | None = None,
    ) -> np.ndarray:
        spans = self.spans
        mask = np.ones(len(spans), dtype=bool)
        if track is not None:
            mask &= spans.track == self.string_id(track)
        if name is not None:
            mask &= spans.name == self.string_id(name)
        if partition is not None:
            mask &= spans.partition == partition
        if worker is not None:
            mask &= spans.worker == worker
        if track_prefix is not None:
            ids = [i for i, s in enumerate(self.strings.values) if s.startswith(track_prefix)]
            mask &= np.isin(spans.track, ids)
        return mask

    def select(self, **criteria: Any) -> list[Span]:
        return [self.span(int(i)) for i in np.flatnonzero(self.span_mask(**criteria))]

    def span(self, i: int) -> Span:
        s, text = self.spans, self.strings.values
        return Span(
            text[s.track[i]], text[s.name[i]], int(s.start_ns[i]), int(s.end_ns[i]),
            int(s.partition[i]), int(s.worker[i]), dict(s.attrs[i] or {}),
        )

    def iter_spans(self) -> Iterator[Span]:
        for i in range(len(self.spans)):
            yield self.span(i)

    def iter_instants(self) -> Iterator[Instant]:
        t, text = self.instants, self.strings.values
        for i in range(len(t)):
            yield Instant(
                text[t.track[i]], text[t.name[i]], int(t.ts_ns[i]), int(t.partition[i]),
                int(t.worker[i]), dict(t.attrs[i] or {}),
            )

    def iter_counters(self) -> Iterator[CounterSample]:
        c, text = self.counters, self.strings.values
        for i in range(len(c)):
            yield CounterSample(
                text[c.track[i]], text[c.name[i]], int(c.ts_ns[i]), float(c.value[i])
            )

    def tracks(self) -> list[str]:
        used = np.unique(np.concatenate([self.spans.track, self.instants.track, self.counters.track]))
        return sorted(self.strings.values[i] for i in used)

    def time_range(self) -> tuple[int, int]:
        starts = [a.min() for a in (self.spans.start_ns, self.instants.ts_ns, self.counters.ts_ns) if len(a)]
        ends = [a.max() for a in (self.spans.end_ns, self.instants.ts_ns, self.counters.ts_ns) if len(a)]
        if not starts:
            origin = int(self.meta.get("origin_ns", 0))
            return origin, origin
        return int(min(starts)), int(max(ends))

    def durations_ns(self, mask: np.ndarray) -> np.ndarray:
        return self.spans.end_ns[mask] - self.spans.start_ns[mask]
