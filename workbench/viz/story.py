"""A partition's whole story, for the Gantt's details panel: every step it went through in
order (synthesis, the queue, the lock wait, the hold and each phase under it, the barrier,
finish), with when and how long, a line that adds up its waits, and what the verdict says
about it.

Only a pipeline's trace has partitions to tell of; a foreign trace gets no story here (its
details panel tells a span's thread and unit context from the bars instead), so no pipeline
word is ever put on a trace without a pipeline.

Contract: `stories(trace, bars, origin_ns, verdict, only) -> (steps, notes)`, two column dicts;
`bars` one per span in the trace's order; `only`, when given, the partitions to tell of (a
notebook's kernel tells one partition's story when its bar is clicked, span_details.py).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from workbench.model.pipeline import PICKUP, QUEUED
from workbench.trace.container import Trace
from workbench.viz.bars import Bars

STEP_COLUMNS = ("partition", "step", "lane", "start", "duration_ms", "depth", "note")
NOTE_COLUMNS = ("partition", "text")
MAX_PARTITIONS = 20_000
# A partition's kernels, copies and memsets on the device: one step per name and lane (there
# may be hundreds), with their count and summed time.
DEVICE_ROLES = ("kernel", "copy", "memset")  # beyond these a report's stories would outweigh its bars


def empty() -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    return {c: [] for c in STEP_COLUMNS}, {c: [] for c in NOTE_COLUMNS}


def stories(
    trace: Trace, bars: Bars, origin_ns: int, verdict: Any = None, only: Collection[int] | None = None,
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    steps, notes = empty()
    if len(bars) != len(trace.spans):
        return steps, notes
    picked = np.flatnonzero(bars.partition >= 0)
    queue = _queue_steps(trace, origin_ns)
    if only is not None:
        asked = [int(p) for p in only]
        picked = picked[np.isin(bars.partition[picked], asked)]
        queue = {p: v for p, v in queue.items() if p in asked}
    partitions = sorted(set(bars.partition[picked].tolist()) | set(queue))[:MAX_PARTITIONS]
    if not partitions:
        return steps, notes
    wanted = set(partitions)
    picked = picked[np.isin(bars.partition[picked], partitions)]
    on_device = np.isin(bars.role[picked], DEVICE_ROLES)
    rows: list[tuple[int, float, int, str, str, float, str]] = [
        (int(bars.partition[i]), float(bars.left[i]), int(bars.depth[i]), str(bars.phase[i]),
         str(bars.lane[i]), float(bars.duration_ms[i]), str(bars.detail[i]))
        for i in picked[~on_device].tolist()]
    rows += _device_rows(bars, picked[on_device])
    rows += [(p, at, 0, "queue", "queue", ms, "synthesised, waiting for a GPU worker")
             for p, (at, ms) in queue.items() if p in wanted]
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    for p, start, depth, step, lane, ms, note in rows:
        for column, value in zip(STEP_COLUMNS, (p, step, lane, start, ms, depth, note), strict=True):
            steps[column].append(value)
    waits = _waits(bars, picked)
    spans = {p: (start, end) for p, start, end in _extents(bars, picked)}
    words = _verdict_words(verdict, wanted)
    for p in partitions:
        start, end = spans.get(p, (0.0, 0.0))
        said = [f"{name} {ms:.1f} ms" for name, ms in sorted(waits.get(p, {}).items(), key=lambda kv: -kv[1])
                if ms >= 0.05]
        if p in queue:
            said.insert(0, f"queue {queue[p][1]:.1f} ms")
        head = f"partition {p}: {(end - start) * 1e3:.1f} ms from its first step to its last"
        notes["partition"].append(p)
        notes["text"].append(head + (f"; waiting: {', '.join(said)}" if said else ""))
        for line in words.get(p, ()):
            notes["partition"].append(p)
            notes["text"].append(line)
    return steps, notes


def _device_rows(bars: Bars, device: np.ndarray) -> list[tuple[int, float, int, str, str, float, str]]:
    groups: dict[tuple[int, str, str], list[int]] = {}
    for i in device.tolist():
        groups.setdefault((int(bars.partition[i]), str(bars.lane[i]), str(bars.phase[i])), []).append(i)
    rows = []
    for (p, lane, phase), members in groups.items():
        first, last = min(bars.left[members]), max(bars.right[members])
        total = float(bars.duration_ms[members].sum())
        if len(members) == 1:
            rows.append((p, float(first), 0, phase, lane, total, str(bars.detail[members[0]])))
            continue
        note = f"{len(members)} on the device between {first:.6f} s and {last:.6f} s, {total:.3f} ms in all"
        rows.append((p, float(first), 0, f"{phase} ×{len(members)}", lane, total, note))
    return rows


def _queue_steps(trace: Trace, origin_ns: int) -> dict[int, tuple[float, float]]:
    """Per partition: when it was queued (s) and how long it waited there (ms), from the
    pipeline's `queued` and `pickup` instants."""
    inst = trace.instants
    queued, pickup = trace.string_id(QUEUED), trace.string_id(PICKUP)
    at: dict[int, int] = {}
    for i in np.flatnonzero(inst.name == queued).tolist():
        at.setdefault(int(inst.partition[i]), int(inst.ts_ns[i]))
    out: dict[int, tuple[float, float]] = {}
    for i in np.flatnonzero(inst.name == pickup).tolist():
        p = int(inst.partition[i])
        if p in at and p >= 0:
            out[p] = ((at[p] - origin_ns) / 1e9, (int(inst.ts_ns[i]) - at[p]) / 1e6)
    return out


def _waits(bars: Bars, picked: np.ndarray) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for i in picked[bars.family[picked] == "wait"].tolist():
        phase = str(bars.phase[i])
        per = out.setdefault(int(bars.partition[i]), {})
        per[phase] = per.get(phase, 0.0) + float(bars.duration_ms[i])
    return out


def _extents(bars: Bars, picked: np.ndarray) -> list[tuple[int, float, float]]:
    out = []
    part = bars.partition[picked]
    for p in np.unique(part).tolist():
        members = picked[part == p]
        out.append((int(p), float(bars.left[members].min()), float(bars.right[members].max())))
    return out


def _verdict_words(verdict: Any, partitions: set[int]) -> dict[int, list[str]]:
    """Each finding's title and sentence, under every partition its evidence names."""
    out: dict[int, list[str]] = {}
    for finding in getattr(verdict, "findings", ()) or ():
        evidence = getattr(finding, "evidence", None)
        named = getattr(evidence, "partitions", ()) or ()
        title, sentence = getattr(finding, "title", ""), getattr(finding, "sentence", "")
        line = f"verdict: {title}" + (f" ({sentence})" if sentence else "")
        for p in named:
            if int(p) in partitions:
                out.setdefault(int(p), []).append(line)
    return out
