"""cuzk daemon logs in: timing lines grouped into proving calls and laid out in time.

Grouping. The timing lines carry no partition number, so lines are filed into calls by the
order the daemon prints them: the GPU thread's lines of one call come in sequence
(mutex_wait, ntt_msm_h, barrier_wait, batch_add, tail_msm, then mutex_held at the end) and
the mutex keeps calls from overlapping there, so each such line goes to the oldest call
still waiting for it and not already past it. prep_msm is printed before the GPU thread can
pass the barrier (so before that call's batch_add line) and b_g2_msm after tail_msm; the
CUZK_NTT_H line goes to the oldest call without one. Calls missing lines (a truncated log)
keep what they have.

Placement. With TIMELINE lines, each call is matched to a GPU_START/GPU_END pair (the
closest gpu_ms among the next few, in order), which anchors it in time and names its
partition and worker; whether that pair brackets the mutex hold or the whole call is
decided by which of mutex_held_ms and total_start_fn_ms gpu_ms matches better. Without
TIMELINE the calls are chained: each takes the mutex when the previous one releases it, and
workers are the fewest lanes that fit the calls; every span so placed says
`reconstructed=True`. Inside a call the phases follow one another as the daemon runs them.

Contract: `load_cuzk_log(path) -> Trace`, `parse_cuzk_log(text, source) -> Trace`.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.importers.cuzk_lines import LogLines, TimelineEvent, TimingLine, read_lines
from workbench.importers.cuzk_placement import Call, place_calls
from workbench.importers.report import ImportFailed, ImportReport
from workbench.trace.container import Trace

CHAIN = ("prelock", "ntt", "barrier", "batch", "tail", "held")
LOOKAHEAD = 4  # GPU_END events considered for each call


def load_cuzk_log(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    return parse_cuzk_log(path.read_text(encoding="utf-8", errors="replace"), str(path))


def parse_cuzk_log(text: str, source: str = "<text>") -> Trace:
    report = ImportReport("cuzk daemon log", source)
    lines = read_lines(text, report)
    if not lines.timings and not lines.timeline:
        reasons = ", ".join(f"{n} {r} (first at {report.first_at[r]})" for r, n in report.skipped.items())
        raise ImportFailed(
            f"{source}: no CUZK_TIMING, CUZK_NTT_H or TIMELINE lines found in {report.read} lines"
            + (f" ({reasons})" if reasons else "")
        )
    calls = group_calls(lines.timings)
    incomplete = sum(1 for c in calls if not c.complete)
    if incomplete:
        report.extra["incomplete_calls"] = incomplete
    _match_timeline(calls, lines.timeline, report)
    spans, instants = place_calls(calls, lines.timeline, report)
    report.kept = len(lines.timings) + len(lines.timeline)
    meta = {"outcome": "completed", "import": report.as_meta()}
    workers = len({s[5] for s in spans if s[0].startswith("worker/")})
    config = {"gpu_workers": workers} if workers else {}
    return Trace.from_rows(spans, instants, (), config, meta)


def group_calls(timings: list[TimingLine]) -> list[Call]:
    calls: list[Call] = []
    for line in timings:
        target = _target(calls, line.kind)
        if target is None:
            target = Call(len(calls))
            calls.append(target)
        target.lines[line.kind] = line
    return calls


def _target(calls: list[Call], kind: str) -> Call | None:
    open_calls = [c for c in calls if kind not in c.lines]
    if kind in CHAIN:
        after = CHAIN[CHAIN.index(kind) + 1:]
        return next((c for c in open_calls if not any(k in c.lines for k in after)), None)
    if kind == "prep":
        return next((c for c in open_calls if "batch" not in c.lines), None)
    if kind == "b_g2":
        fitting = next((c for c in open_calls if "tail" in c.lines and "held" not in c.lines), None)
        return fitting or next(iter(open_calls), None)
    return next(iter(open_calls), None)


def _match_timeline(calls: list[Call], timeline: list[TimelineEvent], report: ImportReport) -> None:
    ends = sorted((e for e in timeline if e.event == "GPU_END"), key=lambda e: (e.offset_ms, e.line))
    if not ends or not calls:
        return
    held = [c.ms("held", "mutex_held_ms") for c in calls]
    total = [c.ms("held", "total_start_fn_ms") for c in calls]
    gpu = [_gpu_ms(e, timeline) for e in ends]
    anchor = "hold"
    if _mismatch(total, gpu) < _mismatch(held, gpu):
        anchor = "call"
    report.extra["timeline_brackets"] = "the mutex hold" if anchor == "hold" else "the whole proving call"
    durations = held if anchor == "hold" else total
    free = list(range(len(ends)))
    unmatched = []
    for call, duration in zip(calls, durations, strict=True):
        window = free[:LOOKAHEAD]
        if not window or ("held" not in call.lines and "tail" not in call.lines):
            unmatched.append(call)
            continue
        best = min(window, key=lambda j: (abs((gpu[j] or 0) - (duration or 0)) if duration is not None
                                          and gpu[j] is not None else 0, j))
        free.remove(best)
        call.timeline_event = ends[best]
        call.anchor = anchor
    # A call still running when the log ends has its GPU_START but no GPU_END yet.
    ended = {(e.job, e.detail.get("partition")) for e in ends}
    starts = sorted(
        (e for e in timeline if e.event == "GPU_START" and (e.job, e.detail.get("partition")) not in ended),
        key=lambda e: (e.offset_ms, e.line),
    )
    for call, start in zip(unmatched, starts, strict=False):
        call.timeline_event = start
        call.anchor = anchor


def _gpu_ms(end: TimelineEvent, timeline: list[TimelineEvent]) -> int | None:
    if "gpu_ms" in end.detail:
        return end.detail["gpu_ms"]
    start = next((e for e in timeline if e.event == "GPU_START" and e.job == end.job
                  and e.detail.get("partition") == end.detail.get("partition")), None)
    return end.offset_ms - start.offset_ms if start is not None else None


def _mismatch(durations: list[int | None], gpu: list[int | None]) -> float:
    pairs = [abs(d - g) for d, g in zip(durations, gpu, strict=False) if d is not None and g is not None]
    if not pairs:
        return float("inf")
    pairs.sort()
    return float(pairs[len(pairs) // 2])


__all__ = ["LogLines", "group_calls", "load_cuzk_log", "parse_cuzk_log"]
