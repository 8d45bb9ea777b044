"""The segments of a cuzk log laid end to end: one daemon process after another.

A restart (importers/cuzk_lines.py says how one is seen) begins a new process whose TIMELINE
clock starts again at zero and whose partitions are numbered from zero again. Each segment
is placed on its own (importers/cuzk_log.py); here each is moved to begin where the one before
ended (the log gives no clock shared by two processes: the time the daemon was down is not
known, so none is shown), its partitions are numbered on from the ones before, and a
`restart` instant on the run track says where and why it began. The run starts with the
first segment and ends with the last.
"""

from __future__ import annotations

from typing import Any

from workbench.importers.cuzk_lines import LogLines
from workbench.importers.cuzk_placement import Call
from workbench.importers.report import ImportReport
from workbench.model import tracks as tr

BOUNDS = ("run_start", "run_end")  # each segment's own; the joined run gets its own pair

Rows = list[tuple[Any, ...]]


def join_segments(segments: list[LogLines], placed: list[tuple[list[Call], Rows, Rows]],
                  report: ImportReport) -> tuple[Rows, Rows]:
    """The spans and instants of all segments, one after another; the calls' partitions are
    renumbered as their spans' are."""
    spans: Rows = []
    instants: Rows = []
    end = 0  # where the segments so far end
    partitions = 0  # partition numbers the segments so far took
    facts = []
    for number, (segment, (calls, seg_spans, seg_instants)) in enumerate(zip(segments, placed, strict=True)):
        own = [i for i in seg_instants if not (i[0] == tr.RUN_TRACK and i[1] in BOUNDS)]
        times = [t for s in seg_spans for t in (s[2], s[3])] + [i[2] for i in own]
        shift = end - min(times) if times and number else 0
        ids = [s[4] for s in seg_spans if s[4] >= 0] + [i[3] for i in own if i[3] >= 0]
        offset = partitions
        spans += [(s[0], s[1], s[2] + shift, s[3] + shift, _renumber(s[4], offset), *s[5:])
                  for s in seg_spans]
        if number:
            instants.append((tr.RUN_TRACK, "restart", end, -1, -1,
                             {"line": segment.first_line, "why": segment.restart}))
        instants += [(i[0], i[1], i[2] + shift, _renumber(i[3], offset), *i[4:]) for i in own]
        for call in calls:
            if call.partition is not None:
                call.partition += offset
        partitions += max(ids) + 1 if ids else 0
        end = max(end, max(times) + shift if times else end)
        facts.append({"first_line": segment.first_line, "calls": len(calls), "partitions": len(set(ids)),
                      **({"restart": segment.restart} if segment.restart else {})})
    report.extra["segments"] = facts
    times = [t for s in spans for t in (s[2], s[3])] + [i[2] for i in instants]
    if times:
        instants.append((tr.RUN_TRACK, "run_start", min(times), -1, -1, None))
        instants.append((tr.RUN_TRACK, "run_end", max(times), -1, -1, None))
    return spans, instants


def _renumber(partition: int, offset: int) -> int:
    return partition + offset if partition >= 0 else partition
