"""Device records onto the host's clock and into the host spans that issued them.

Pure: device and API records in (plain tuples, as the activity collector extracts them, or
as a recorded fixture holds them), span rows out. Nothing here touches a GPU or a library.

Clock alignment. Device activity is stamped on the activity library's own clock, a different
base from the recorder's (`time.perf_counter_ns`). A `ClockSample` reads the host clock, the
device-activity clock, the host clock again, many times over, and keeps the tightest bracket:
the device reading was taken somewhere inside it, so its midpoint is the offset and half its
width the error bound. Samples taken through a run make a piecewise-linear map, which absorbs
any slow drift between the two clocks; the bound holds between samples as long as the drift
is linear there.

Attribution. A kernel, copy, memset or synchronisation carries a correlation id; the API call
that issued it carries the same id, the issuing thread and the call's time. The thread names
a track (the recorder knows which thread each track belongs to) and the innermost span on that
track containing the call's time is the work that issued it; the outermost is its phase. When
no API record matches, the record's own start is looked up on the track its stream was seen
issued from, else on every track, and kept only when exactly one track's phase could have
issued it.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from workbench.events import NO_ID
from workbench.model import tracks as tr
from workbench.model.pipeline import PROVER

# Activity-library enumerations, by value (checked against the library on the device).
COPY_KINDS = {1: "h2d", 2: "d2h", 3: "h2a", 4: "a2h", 5: "a2a", 6: "a2d", 7: "d2a", 8: "d2d",
              9: "h2h", 10: "p2p"}
MEMORY_KINDS = {0: "unknown", 1: "pageable", 2: "pinned", 3: "device", 4: "array", 5: "managed",
                6: "device_static", 7: "managed_static"}
SYNC_KINDS = {0: "synchronize", 1: "event_synchronize", 2: "stream_wait_event",
              3: "stream_synchronize", 4: "context_synchronize"}

# Spans a pipeline thread runs at top level: a record found inside one of these has its phase.
TOP_LEVEL = frozenset((*PROVER.phases, "upload"))
# Phases that never issue device work, so time containment must not pick them.
HOST_ONLY = frozenset(("synthesis", "buffer_checkout", "prep_msm", "b_g2_msm", "finish"))
# Host spans whose whole length is one copy: their length minus the device's is host overhead.
COPY_SPANS = frozenset(("h2d_copy", "d2h_copy"))

SpanRow = tuple[str, str, int, int, int, int, "dict[str, Any] | None"]


class DeviceRecord(NamedTuple):
    kind: str  # "kernel" | "memcpy" | "memset" | "sync"
    name: str  # kernel name, copy direction, "memset" or the kind of synchronisation
    start: int  # device-activity clock, ns
    end: int
    device: int
    stream: int
    correlation: int
    runtime_correlation: int  # the runtime call's own id for copies, 0 when unknown
    attrs: dict[str, Any] | None


class ApiRecord(NamedTuple):
    correlation: int
    thread: int
    start: int  # device-activity clock, ns
    end: int
    name: str


# -- clock ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClockSample:
    host_ns: int  # midpoint of the tightest bracket
    device_ns: int
    error_ns: int  # half the bracket's width: the device reading lies within ± this


def measure(read_device: Callable[[], int], read_host: Callable[[], int], reads: int = 64) -> ClockSample:
    best: tuple[int, int, int] | None = None
    for _ in range(reads):
        before = read_host()
        device = read_device()
        after = read_host()
        if best is None or after - before < best[2] - best[0]:
            best = (before, device, after)
    assert best is not None, "at least one read"
    before, device, after = best
    return ClockSample((before + after) // 2, device, (after - before + 1) // 2)


class ClockMap:
    """Device-activity clock to host clock, piecewise linear through bracketed samples."""

    def __init__(self, samples: Iterable[ClockSample]) -> None:
        self.samples = sorted(samples, key=lambda s: s.device_ns)
        if not self.samples:
            raise ValueError("a clock map needs at least one sample")
        self._device = [s.device_ns for s in self.samples]

    def add(self, sample: ClockSample) -> ClockMap:
        return ClockMap([*self.samples, sample])

    @property
    def error_ns(self) -> int:
        return max(s.error_ns for s in self.samples)

    @property
    def offset_ns(self) -> int:
        """Device clock minus host clock at the first sample."""
        first = self.samples[0]
        return first.device_ns - first.host_ns

    @property
    def drift_ppm(self) -> float:
        first, last = self.samples[0], self.samples[-1]
        if last.host_ns == first.host_ns:
            return 0.0
        return ((last.device_ns - first.device_ns) / (last.host_ns - first.host_ns) - 1.0) * 1e6

    def to_host(self, device_ns: int) -> int:
        samples = self.samples
        if len(samples) == 1:
            return device_ns - samples[0].device_ns + samples[0].host_ns
        i = bisect.bisect_right(self._device, device_ns)
        i = min(max(i, 1), len(samples) - 1)  # outside the samples: extend the nearest segment
        a, b = samples[i - 1], samples[i]
        span = b.device_ns - a.device_ns
        if span <= 0:
            return device_ns - a.device_ns + a.host_ns
        return a.host_ns + round((device_ns - a.device_ns) * (b.host_ns - a.host_ns) / span)

    def describe(self) -> dict[str, Any]:
        return {
            "offset_ns": self.offset_ns, "error_ns": self.error_ns, "drift_ppm": self.drift_ppm,
            "samples": len(self.samples),
            "method": "tightest of many host/device/host reads; midpoint is the offset, half "
                      "the bracket the error; piecewise linear between samples",
        }


# -- host spans ----------------------------------------------------------------------------
class HostIndex:
    """Which span on a track contains a time: the innermost (the issuing work) and the
    outermost (its phase). Spans on one thread's track nest, so both are well defined."""

    def __init__(self, spans: Iterable[SpanRow]) -> None:
        by_track: dict[str, list[SpanRow]] = {}
        for row in spans:
            by_track.setdefault(row[0], []).append(row)
        self._rows: dict[str, list[SpanRow]] = {}
        self._starts: dict[str, list[int]] = {}
        self._longest: dict[str, int] = {}
        for track, rows in by_track.items():
            rows.sort(key=lambda r: (r[2], -r[3]))
            self._rows[track] = rows
            self._starts[track] = [r[2] for r in rows]
            self._longest[track] = max(r[3] - r[2] for r in rows)

    def tracks(self) -> list[str]:
        return list(self._rows)

    def containing(self, track: str, t: int) -> tuple[SpanRow | None, SpanRow | None]:
        rows = self._rows.get(track)
        if rows is None:
            return None, None
        starts = self._starts[track]
        earliest = t - self._longest[track]
        inner = outer = None
        j = bisect.bisect_right(starts, t) - 1
        while j >= 0 and starts[j] >= earliest:
            row = rows[j]
            if row[3] >= t:
                # Scanning back in start order (longer first on equal starts): the first span
                # found is the innermost, the last the outermost.
                if inner is None:
                    inner = row
                outer = row
            j -= 1
        return inner, outer

    def around(self, track: str, t: int, slack: int) -> tuple[SpanRow | None, SpanRow | None]:
        """`containing(t)`, or else the one span within `slack` of t: a call mapped from the
        device clock is only known to within the clock's error bound, and a launch made as its
        phase begins can land just outside it. Two different spans within reach: neither."""
        inner, outer = self.containing(track, t)
        if inner is not None or slack <= 0:
            return inner, outer
        before, after = self.containing(track, t - slack), self.containing(track, t + slack)
        if before[0] is not None and after[0] is not None and before[0] is not after[0]:
            return None, None
        return before if before[0] is not None else after


# -- attribution ---------------------------------------------------------------------------
@dataclass
class Attribution:
    """Rows for the recorder, and how each record was placed."""

    rows: list[SpanRow]
    by_api: int = 0
    by_time: int = 0
    unplaced: int = 0


def device_track(record: DeviceRecord) -> str:
    if record.kind == "kernel":
        return tr.stream_track(record.device, record.stream)
    if record.kind == "memcpy":
        return tr.copy_track(record.device)
    if record.kind == "memset":
        return tr.memset_track(record.device)
    if record.kind == "sync":
        return tr.sync_track(record.device)
    return tr.gpu_track(record.device, record.kind)


def attribute(
    records: Iterable[DeviceRecord], apis: Mapping[int, ApiRecord], clock: ClockMap,
    index: HostIndex, thread_tracks: Mapping[int, str],
    stream_tracks: dict[tuple[int, int], Counter[str]] | None = None,
    candidates: Iterable[str] | None = None,
) -> Attribution:
    """Place each record on the host clock and in the host span that issued it.

    `thread_tracks` maps an API record's thread id to the track that thread records on;
    `stream_tracks` (updated in place) remembers which track each stream's work came from,
    for records that arrive without an API record; `candidates` are the tracks that time
    containment may choose from (threads' tracks; every indexed track when None).
    """
    streams = stream_tracks if stream_tracks is not None else {}
    tracks = list(candidates) if candidates is not None else index.tracks()
    out = Attribution([])
    for record in records:
        start, end = clock.to_host(record.start), clock.to_host(record.end)
        attrs = dict(record.attrs or {})
        attrs["correlation"] = record.correlation
        if record.kind != "kernel":
            attrs["stream"] = record.stream
        inner = outer = None
        api = apis.get(record.correlation) or apis.get(record.runtime_correlation)
        track = thread_tracks.get(api.thread) if api is not None else None
        if api is not None and track is not None:
            inner, outer = index.around(track, clock.to_host(api.start), clock.error_ns)
            if inner is not None:
                attrs["by"] = "api"
                attrs["api"] = api.name
                streams.setdefault((record.device, record.stream), Counter())[track] += 1
                out.by_api += 1
        if inner is None:
            inner, outer = _by_time(index, tracks, streams.get((record.device, record.stream)), start)
            if inner is not None:
                attrs["by"] = "time"
                out.by_time += 1
            else:
                out.unplaced += 1
        partition = worker = NO_ID
        if inner is not None and outer is not None:
            partition, worker = inner[4], inner[5]
            attrs["phase"] = outer[1]
            attrs["span"] = inner[1]
            if record.kind == "memcpy" and inner[1] in COPY_SPANS:
                host_ms = (inner[3] - inner[2]) / 1e6
                attrs["host_span_ms"] = host_ms
                attrs["host_overhead_ms"] = host_ms - (end - start) / 1e6
        out.rows.append((device_track(record), record.name, start, end, partition, worker, attrs))
    return out


def _by_time(
    index: HostIndex, tracks: list[str], seen: Counter[str] | None, t: int,
) -> tuple[SpanRow | None, SpanRow | None]:
    if seen:
        inner, outer = index.containing(seen.most_common(1)[0][0], t)
        if inner is not None:
            return inner, outer
    found = []
    for track in tracks:
        inner, outer = index.containing(track, t)
        if outer is not None and outer[1] not in HOST_ONLY:
            found.append((inner, outer))
    return found[0] if len(found) == 1 else (None, None)


def settled(
    record: DeviceRecord, apis: Mapping[int, ApiRecord], clock: ClockMap, index: HostIndex,
    thread_tracks: Mapping[int, str], horizon_ns: int,
) -> bool:
    """Whether a record can be placed now: its issuing call sits inside a closed top-level
    phase, or it is older than `horizon_ns` (host clock), past which nothing more will close."""
    if clock.to_host(record.start) < horizon_ns:
        return True
    api = apis.get(record.correlation) or apis.get(record.runtime_correlation)
    track = thread_tracks.get(api.thread) if api is not None else None
    if api is None or track is None:
        return False
    _, outer = index.around(track, clock.to_host(api.start), clock.error_ns)
    return outer is not None and outer[1] in TOP_LEVEL
