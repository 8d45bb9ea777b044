"""Laying grouped cuzk calls out in time, as spans on the workbench's own tracks.

See importers/cuzk_log.py for how calls are grouped and matched to the timeline. Here each
call is anchored (at its GPU_START/GPU_END pair, or chained after the previous call's
release), given its partition and worker (the timeline's, or the first lane free), and its
phases are laid out as columns (importers/cuzk_phases.py); the timeline's synthesis spans,
queue instants and calls without timing lines follow, then the run's start and end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.importers.cuzk_columns import NS, Figures, concat, rows_as_columns, trace_of
from workbench.importers.cuzk_lines import TimelineEvent, TimingLine
from workbench.importers.cuzk_phases import CallTimes, call_phases, call_times
from workbench.importers.report import ImportReport
from workbench.model import tracks as tr
from workbench.model.pipeline import CUZK, QUEUED
from workbench.trace.container import StringTable, Trace

REQUIRED = ("prep", "b_g2", "prelock", "ntt", "barrier", "batch", "tail", "held")


@dataclass
class Call:
    index: int
    lines: dict[str, TimingLine] = field(default_factory=dict)
    timeline_event: TimelineEvent | None = None  # its GPU_END (or GPU_START, if it never ended)
    anchor: str = "hold"  # what the matched GPU_START..GPU_END brackets: "hold" or "call"
    step: int = -1  # the latest of the chain of lines it has (cuzk_log.CHAIN), for filing
    partition: int | None = None  # the partition number it was given when placed

    def ms(self, kind: str, key: str) -> int | None:
        line = self.lines.get(kind)
        return line.fields.get(key) if line is not None else None

    def get(self, kind: str, key: str) -> int:
        line = self.lines.get(kind)
        return (line.fields.get(key) or 0) if line is not None else 0

    @property
    def complete(self) -> bool:
        return all(k in self.lines for k in REQUIRED)

    def attrs(self, prefixes: dict[str, str]) -> dict[str, Any]:
        """The figures of these attribute lines, keys prefixed unless they already say what they are."""
        out: dict[str, Any] = {}
        for kind, prefix in prefixes.items():
            if (line := self.lines.get(kind)) is not None:
                for key, value in {**line.fields, **line.words}.items():
                    out[key if key.startswith(prefix.rstrip("_")) else prefix + key] = value
        return out


@dataclass
class Placed:
    """The laid-out spans and instants, as columns, and how many GPU workers they use."""

    trace_parts: tuple[StringTable, tuple[np.ndarray, ...], tuple[np.ndarray, ...]]
    workers: int

    def trace(self, config: dict[str, Any], meta: dict[str, Any]) -> Trace:
        strings, spans, instants = self.trace_parts
        return trace_of(strings, spans, instants, config, meta)

    def rows(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The spans and instants as rows (track, name, times..., partition, worker, attrs), for
        code that edits them one by one."""
        strings, spans, instants = self.trace_parts
        names = strings.values

        def of(columns: tuple[np.ndarray, ...]) -> list[tuple[Any, ...]]:
            track, name, *numbers, attrs = columns
            return list(zip([names[t] for t in track.tolist()], [names[n] for n in name.tolist()],
                            *(c.tolist() for c in numbers), attrs.tolist(), strict=True))
        return of(spans), of(instants)


class _Layout:
    def __init__(self, timeline: list[TimelineEvent]) -> None:
        self.events: dict[tuple[str, int], dict[str, TimelineEvent]] = {}
        for e in timeline:
            # A monolithic job's events carry no partition: the job is one unit.
            self.events.setdefault((e.job, e.detail.get("partition", 0)), {}).setdefault(e.event, e)
        jobs = {job: n for n, job in enumerate(sorted({job for job, _ in self.events}))}
        self.ids: dict[tuple[str, int], int] = {}
        for key in sorted(self.events, key=lambda k: (jobs[k[0]], k[1])):
            self.ids[key] = key[1] if len(jobs) == 1 else len(self.ids)
        self.by_id = {self.ids[key]: events for key, events in self.events.items()}
        self.taken = set(self.ids.values())
        self.next_id = 0

    def free_id(self) -> int:
        while self.next_id in self.taken:
            self.next_id += 1
        self.taken.add(self.next_id)
        return self.next_id


def place_calls(calls: list[Call], timeline: list[TimelineEvent], report: ImportReport) -> Placed:
    layout = _Layout(timeline)
    figures = Figures(calls)
    times = call_times(figures)
    hold_start, partition, worker, chained, placed_keys = _anchor(calls, layout, times)
    if chained.any():
        report.reconstructed = (f"{int(chained.sum())} of {len(calls)} calls placed from durations alone: "
                                "each takes the mutex when the previous one releases it")
    times.set_hold(hold_start)
    lanes = _lanes(times.start_fn.tolist(), times.end_fn.tolist(), worker)
    strings = StringTable()
    spans, instants = call_phases(strings, figures, times, lanes, chained, _pickups(layout, partition, times))
    span_rows: list[tuple[Any, ...]] = []
    instant_rows: list[tuple[Any, ...]] = []
    only_workers = _timeline_only(layout, placed_keys, span_rows, instant_rows)
    span_cols = concat(spans.assemble(partition, lanes), rows_as_columns(strings, span_rows, 7))
    instant_cols = concat(instants.assemble(partition, lanes), rows_as_columns(strings, instant_rows, 6))
    times_seen = np.concatenate([span_cols[2], span_cols[3], instant_cols[2]])
    if len(times_seen):
        run = [(tr.RUN_TRACK, "run_start", int(times_seen.min()), -1, -1, None),
               (tr.RUN_TRACK, "run_end", int(times_seen.max()), -1, -1, None)]
        instant_cols = concat(instant_cols, rows_as_columns(strings, run, 6))
    return Placed((strings, span_cols, instant_cols), len(set(lanes.tolist()) | only_workers))


def _pickups(layout: _Layout, partition: np.ndarray, times: CallTimes) -> np.ndarray:
    """When each call's worker picked it up: its GPU_PICKUP, else the start of the call."""
    pickup = times.start_fn.copy()
    for i, p in enumerate(partition.tolist()):
        event = layout.by_id.get(p, {}).get("GPU_PICKUP")
        if event is not None:
            pickup[i] = event.offset_ms * NS
    return pickup


def _anchor(calls: list[Call], layout: _Layout, times: CallTimes) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray, set[tuple[str, int]]]:
    """Per call: where its hold starts, its partition and worker (-1: none named), whether it was
    chained, and the timeline keys the calls took. Sequential: a chained call waits for the previous."""
    n = len(calls)
    hold_start, partition, worker = [0] * n, [0] * n, [-1] * n
    chained = [False] * n
    placed_keys: set[tuple[str, int]] = set()
    previous_release = 0
    pre_locks, waits, helds = times.pre_lock.tolist(), times.wait.tolist(), times.held.tolist()
    for i, call in enumerate(calls):
        event = call.timeline_event
        pre_lock, wait, held = pre_locks[i], waits[i], helds[i]
        if event is not None:
            key = (event.job, event.detail.get("partition", 0))
            events = layout.events[key]
            if "GPU_START" in events:
                bracket_start = events["GPU_START"].offset_ms * NS
            else:
                bracket_start = events["GPU_END"].offset_ms * NS - (held if call.anchor == "hold" else 0)
            start = bracket_start if call.anchor == "hold" else bracket_start + pre_lock + wait
            partition[i] = layout.ids[key]
            named = event.detail.get("worker")
            worker[i] = named if named is not None else -1
            placed_keys.add(key)
        else:
            start = max(previous_release, pre_lock + wait)
            partition[i] = layout.free_id()
            chained[i] = True
        hold_start[i] = start
        call.partition = partition[i]
        previous_release = max(previous_release, start + held)
    return (np.array(hold_start, dtype=np.int64), np.array(partition, dtype=np.int64),
            np.array(worker, dtype=np.int64), np.array(chained, dtype=bool), placed_keys)


def _lanes(starts: list[int], ends: list[int], worker: np.ndarray) -> np.ndarray:
    """The worker of each call: the one its timeline names, else the first lane free at its start
    (so chained calls take the fewest lanes that fit them)."""
    lanes: list[int] = []  # end of each lane's last call
    out = worker.tolist()
    for i, named in enumerate(out):
        if named >= 0:
            continue
        start = starts[i]
        for w, busy_until in enumerate(lanes):
            if busy_until <= start:
                lanes[w] = ends[i]
                out[i] = w
                break
        else:
            lanes.append(ends[i])
            out[i] = len(lanes) - 1
    return np.array(out, dtype=np.int64)


def _timeline_only(layout: _Layout, placed: set[tuple[str, int]], spans: list[tuple[Any, ...]],
                   instants: list[tuple[Any, ...]]) -> set[int]:
    """Synthesis spans, queue instants, and calls with timeline events but no timing lines; the
    workers those calls ran on."""
    workers: set[int] = set()
    synth_lanes: list[int] = []
    synth_name, queued_track = CUZK.canonical("synth_ms"), tr.QUEUE_TRACK
    for key, events in sorted(layout.events.items(), key=lambda kv: layout.ids[kv[0]]):
        p = layout.ids[key]
        start, end = events.get("SYNTH_START"), events.get("SYNTH_END")
        if start is not None and end is not None and end.offset_ms >= start.offset_ms:
            s, e = start.offset_ms * NS, end.offset_ms * NS
            lane = next((i for i, busy in enumerate(synth_lanes) if busy <= s), len(synth_lanes))
            if lane == len(synth_lanes):
                synth_lanes.append(e)
            synth_lanes[lane] = e
            spans.append((tr.synth_track(lane), synth_name, s, e, p, -1, {"line": end.line}))
        queued = events.get("GPU_QUEUE") or events.get("CHAN_SEND") or end
        if queued is not None:
            instants.append((queued_track, QUEUED, queued.offset_ms * NS, p, -1, None))
        gpu_start, gpu_end = events.get("GPU_START"), events.get("GPU_END")
        if key not in placed and gpu_start is not None and gpu_end is not None:
            w = gpu_end.detail.get("worker", gpu_start.detail.get("worker", 0))
            s, e = gpu_start.offset_ms * NS, max(gpu_end.offset_ms, gpu_start.offset_ms) * NS
            note = {"no_timing_lines": True}
            spans.append((tr.worker_track(w), "gpu_call", s, e, p, w, note))
            spans.append((tr.worker_track(w), "finish", e, e, p, w, note))
            workers.add(w)
    return workers
