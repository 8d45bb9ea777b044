"""cuzk daemon logs in: timing lines grouped into proving calls and laid out in time.

Grouping. The timing lines carry no partition number, so lines are filed into calls by the
order the daemon prints them: the GPU thread's lines of one call come in sequence
(split_vectors, host registration, mutex_wait, then under the mutex the pool threshold, the
d_a cache and pre-staging, ntt_msm_h, barrier_wait, batch_add, tail_msm, and mutex_held at
the end) and the mutex keeps calls from overlapping there, so each such line goes to the
oldest call still waiting for it and not already past it. prep_msm is printed before the
GPU thread can pass the barrier (so before that call's batch_add line) and b_g2_msm after
tail_msm; the CUZK_NTT_H line goes to the oldest call without one; async_dealloc, printed
after the call is finalised, to the oldest call with b_g2_msm and no dealloc yet. Calls missing lines (a
truncated log) keep what they have. Each kind keeps a queue of the calls it may still go to,
and a call leaves a queue for good once it is past that kind, so filing is linear.

Placement. With TIMELINE lines, each call is matched to a GPU_START/GPU_END pair (the
closest gpu_ms among the next few, in order), which anchors it in time and names its
partition and worker; whether that pair brackets the mutex hold or the whole call is
decided by which of mutex_held_ms and total_start_fn_ms gpu_ms matches better. Without
TIMELINE the calls are chained: each takes the mutex when the previous one releases it, and
workers are the fewest lanes that fit the calls; every span so placed says
`reconstructed=True`. Inside a call the phases follow one another as the daemon runs them
(importers/cuzk_placement.py).

The engine's GPU_TIMING and FIN_TIMING lines time its worker loop around the prover call;
their only clock is the log's wall-clock prefix, which no other line shares, so they are
kept as figures of the run (`meta["import"]["figures"]`: count, median and maximum of each
field), not as spans.

Contract: `load_cuzk_log(path) -> Trace`, `parse_cuzk_log(text, source) -> Trace`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from workbench.importers.cuzk_lines import LogLines, TimelineEvent, TimingLine, read_lines, skip_line
from workbench.importers.cuzk_placement import Call, place_calls
from workbench.importers.cuzk_segments import join_segments
from workbench.importers.report import ImportFailed, ImportReport
from workbench.model.tracks import worker_track
from workbench.trace.container import Trace

# The lines of one call in the order the daemon prints them (each daemon version prints some).
CHAIN = ("split", "host_register", "prelock", "pool", "d_a_cache", "prestage_vram", "prestage_setup", "ntt",
         "barrier", "batch", "tail", "held")
STEP = {kind: n for n, kind in enumerate(CHAIN)}
LOOKAHEAD = 4  # GPU_END events considered for each call


def load_cuzk_log(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise ImportFailed(f"{path}: cannot read the cuzk log ({err.strerror or err})") from None
    return parse_cuzk_log(text, str(path))


def parse_cuzk_log(text: str, source: str = "<text>") -> Trace:
    with no_collection():
        return _parse(text, source)


@contextlib.contextmanager
def no_collection() -> Iterator[None]:
    """The import makes millions of small objects (lines, calls, span rows) and no reference
    cycles, so the cycle collector's passes over them are wasted: 30% of the time on a dense log."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse(text: str, source: str) -> Trace:
    report = ImportReport("cuzk daemon log", source)
    return assemble(read_lines(text, report), report)


def assemble(segments: list[LogLines], report: ImportReport) -> Trace:
    """The trace of the lines read so far (`LineReader.segments`), the report completed; the
    batch import and `follow` both make their traces here. Each segment (one daemon process) is
    grouped and placed on its own, then set after the one before in time, its partitions
    numbered on from the ones before and a `restart` instant where it begins."""
    trace, _ = assemble_settled(segments, report)
    return trace


def assemble_settled(segments: list[LogLines], report: ImportReport) -> tuple[Trace, set[int]]:
    """`assemble`, and the partitions of the calls that later lines can no longer change (every
    line of the call read, and `LOOKAHEAD` calls after it complete), for a live reader."""
    timings = sum(len(s.timings) for s in segments)
    timeline = sum(len(s.timeline) for s in segments)
    figure_lines = [line for s in segments for line in s.figures]
    if not timings and not timeline:
        reasons = ", ".join(f"{n} {r} (first at {report.first_at[r]})" for r, n in report.skipped.items())
        raise ImportFailed(
            f"{report.source}: no CUZK_TIMING, CUZK_NTT_H or TIMELINE lines found in {report.read} lines"
            + (f" ({reasons})" if reasons else "")
        )
    segments = [s for s in segments if s.timings or s.timeline]
    grouped = [group_calls(s.timings) for s in segments]
    for _, unattached in grouped:
        for line in unattached:
            skip_line(report, "async_dealloc line before any finished call", line.line)
    incomplete = sum(1 for calls, _ in grouped for c in calls if not c.complete)
    if incomplete:
        report.extra["incomplete_calls"] = incomplete
    if figure_lines:
        report.extra["figures"] = figures(figure_lines)
    placed = []
    for segment, (calls, _) in zip(segments, grouped, strict=True):
        _match_timeline(calls, segment.timeline, report)
        placed.append((calls, *place_calls(calls, segment.timeline, report)))
    report.kept = timings + timeline + len(figure_lines) - sum(len(u) for _, u in grouped)
    if len(placed) == 1:
        _, spans, instants = placed[0]
    else:
        spans, instants = join_segments(segments, placed, report)
    # An earlier segment's process is gone: nothing later changes its calls.
    settled = {c.partition for calls, _, _ in placed[:-1] for c in calls if c.partition is not None}
    settled |= _settled(placed[-1][0]) if placed else set()
    meta = {"outcome": "completed", "import": report.as_meta()}
    workers = len({s[5] for s in spans if s[0] == worker_track(s[5])})
    config = {"gpu_workers": workers} if workers else {}
    return Trace.from_rows(spans, instants, (), config, meta), settled


def _settled(calls: list[Call]) -> set[int]:
    complete = [c for c in calls if c.complete and c.partition is not None]
    return {c.partition for c in complete[:max(len(complete) - LOOKAHEAD, 0)] if c.partition is not None}


class _Filing:
    """The calls so far, and per kind the queue of calls that kind may still go to."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        kinds = (*CHAIN, "prep", "b_g2", "ntt_h")
        self.open: dict[str, deque[Call]] = {k: deque() for k in kinds}
        self.tail_done: deque[Call] = deque()  # calls with tail_msm, for b_g2_msm
        self.b_g2_done: deque[Call] = deque()  # calls with b_g2_msm, for async_dealloc

    def new(self) -> Call:
        call = Call(len(self.calls))
        self.calls.append(call)
        for queue in self.open.values():
            queue.append(call)
        return call

    @staticmethod
    def oldest(queue: deque[Call], fits: Callable[[Call], bool]) -> Call | None:
        # A call that no longer fits never fits again: drop it for good.
        while queue and not fits(queue[0]):
            queue.popleft()
        return queue[0] if queue else None

    def target(self, kind: str) -> Call | None:
        step = STEP.get(kind)
        if step is not None:  # a call fits while none of its lines is this kind or a later one
            return self.oldest(self.open[kind], lambda c: c.step < step)
        if kind == "prep":
            return self.oldest(self.open[kind], lambda c: "prep" not in c.lines and "batch" not in c.lines)
        if kind == "b_g2":
            fitting = self.oldest(self.tail_done, lambda c: "held" not in c.lines and "b_g2" not in c.lines)
            return fitting or self.oldest(self.open[kind], lambda c: "b_g2" not in c.lines)
        return self.oldest(self.open[kind], lambda c: kind not in c.lines)


def group_calls(timings: list[TimingLine]) -> tuple[list[Call], list[TimingLine]]:
    """The calls the lines make, and the lines that had no call to go to."""
    filing = _Filing()
    unattached = []
    for line in timings:
        if line.kind == "dealloc":
            call = filing.oldest(filing.b_g2_done, lambda c: "dealloc" not in c.lines)
            if call is None:
                unattached.append(line)
            else:
                call.lines["dealloc"] = line
            continue
        target = filing.target(line.kind) or filing.new()
        target.lines[line.kind] = line
        target.step = max(target.step, STEP.get(line.kind, -1))
        if line.kind == "tail":
            filing.tail_done.append(target)
        elif line.kind == "b_g2":
            filing.b_g2_done.append(target)
    return filing.calls, unattached


def figures(lines: list[TimingLine]) -> dict[str, dict[str, Any]]:
    """Per tracing line kind: how many, and the median and maximum of each of its figures."""
    values: dict[str, dict[str, list[int]]] = {}
    for line in lines:
        per = values.setdefault(line.kind, {})
        for key, value in line.fields.items():
            if key.endswith("_ms"):
                per.setdefault(key, []).append(value)
    counts: dict[str, int] = {}
    for line in lines:
        counts[line.kind] = counts.get(line.kind, 0) + 1
    return {kind: {"lines": counts[kind], **{key: {"median": statistics.median(v), "max": max(v)}
                                             for key, v in per.items()}}
            for kind, per in values.items()}


def _match_timeline(calls: list[Call], timeline: list[TimelineEvent], report: ImportReport) -> None:
    ends = sorted((e for e in timeline if e.event == "GPU_END"), key=lambda e: (e.offset_ms, e.line))
    if not ends or not calls:
        return
    starts_by_key: dict[tuple[str, int], TimelineEvent] = {}
    for e in timeline:
        if e.event == "GPU_START":
            starts_by_key.setdefault((e.job, e.detail.get("partition", 0)), e)
    held = [c.ms("held", "mutex_held_ms") for c in calls]
    total = [c.ms("held", "total_start_fn_ms") for c in calls]
    gpu = [_gpu_ms(e, starts_by_key) for e in ends]
    anchor = "hold"
    if _mismatch(total, gpu) < _mismatch(held, gpu):
        anchor = "call"
    report.extra["timeline_brackets"] = "the mutex hold" if anchor == "hold" else "the whole proving call"
    durations = held if anchor == "hold" else total
    upcoming = iter(range(len(ends)))
    window: list[int] = []
    unmatched = []
    for call, duration in zip(calls, durations, strict=True):
        while len(window) < LOOKAHEAD and (j := next(upcoming, None)) is not None:
            window.append(j)
        if not window or ("held" not in call.lines and "tail" not in call.lines):
            unmatched.append(call)
            continue
        best = min(window, key=lambda j: (abs((gpu[j] or 0) - (duration or 0)) if duration is not None
                                          and gpu[j] is not None else 0, j))
        window.remove(best)
        call.timeline_event = ends[best]
        call.anchor = anchor
    # A call still running when the log ends has its GPU_START but no GPU_END yet.
    ended = {(e.job, e.detail.get("partition", 0)) for e in ends}
    starts = sorted((e for key, e in starts_by_key.items() if key not in ended),
                    key=lambda e: (e.offset_ms, e.line))
    for call, start in zip(unmatched, starts, strict=False):
        call.timeline_event = start
        call.anchor = anchor


def _gpu_ms(end: TimelineEvent, starts: dict[tuple[str, int], TimelineEvent]) -> int | None:
    if "gpu_ms" in end.detail:
        return end.detail["gpu_ms"]
    start = starts.get((end.job, end.detail.get("partition", 0)))
    return end.offset_ms - start.offset_ms if start is not None else None


def _mismatch(durations: list[int | None], gpu: list[int | None]) -> float:
    pairs = [abs(d - g) for d, g in zip(durations, gpu, strict=False) if d is not None and g is not None]
    if not pairs:
        return float("inf")
    pairs.sort()
    return float(pairs[len(pairs) // 2])


__all__ = ["LogLines", "assemble", "assemble_settled", "group_calls", "load_cuzk_log", "parse_cuzk_log"]
