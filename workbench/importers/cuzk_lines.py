"""Reading cuzk daemon log lines: CUZK_TIMING, CUZK_NTT_H and TIMELINE, wherever they sit in
a line (after timestamps and level prefixes), with everything else counted and skipped.

Each TIMING line is recognised by the field that names it (prep_msm_ms, b_g2_msm_ms,
mutex_wait_ms, ntt_msm_h_ms, barrier_wait_ms, batch_add_ms, tail_msm_ms, mutex_held_ms), so
a line that gains fields in another daemon version is still read; values are integer
milliseconds (`ms` suffix allowed, as CUZK_NTT_H writes them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from workbench.importers.report import ImportReport

TIMING = re.compile(r"CUZK_TIMING:\s*(.*)")
NTT_H = re.compile(r"CUZK_NTT_H:\s*(.*)")
TIMELINE = re.compile(r"TIMELINE,([^,]*),([^,]*),([^,]*),?(.*)")
FIELD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
VALUE = re.compile(r"(-?\d+)(?:ms)?,?")
MAX_MS = 10**9  # eleven days: a larger figure is garbage, not a phase

# The field that names each TIMING line, and the kind the line is filed under.
KINDS = (
    ("prep_msm_ms", "prep"), ("b_g2_msm_ms", "b_g2"), ("mutex_wait_ms", "prelock"),
    ("pre_lock_cpu_ms", "prelock"), ("ntt_msm_h_ms", "ntt"), ("barrier_wait_ms", "barrier"),
    ("batch_add_ms", "batch"), ("tail_msm_ms", "tail"), ("mutex_held_ms", "held"),
    ("total_start_fn_ms", "held"),
)
TIMELINE_EVENTS = ("SYNTH_START", "SYNTH_END", "GPU_QUEUE", "GPU_PICKUP", "GPU_START", "GPU_END")


@dataclass(frozen=True)
class TimingLine:
    kind: str  # prep | b_g2 | prelock | ntt | barrier | batch | tail | held | ntt_h
    fields: dict[str, int]
    line: int


@dataclass(frozen=True)
class TimelineEvent:
    offset_ms: int
    event: str
    job: str
    detail: dict[str, int]
    line: int


@dataclass
class LogLines:
    timings: list[TimingLine] = field(default_factory=list)
    timeline: list[TimelineEvent] = field(default_factory=list)


def read_lines(text: str, report: ImportReport) -> LogLines:
    out = LogLines()
    for number, line in enumerate(text.splitlines(), start=1):
        report.read += 1
        where = f"line {number}"
        if (m := TIMING.search(line)) is not None:
            fields = _fields(m.group(1))
            kind = next((k for key, k in KINDS if key in (fields or {})), None)
            if fields is None:
                report.skip("CUZK_TIMING line with a malformed value", where)
            elif kind is None:
                report.skip("CUZK_TIMING line of an unknown kind", where)
            else:
                out.timings.append(TimingLine(kind, fields, number))
        elif (m := NTT_H.search(line)) is not None:
            fields = _fields(m.group(1))
            if fields is None or not fields:
                report.skip("CUZK_NTT_H line with a malformed value", where)
            else:
                out.timings.append(TimingLine("ntt_h", fields, number))
        elif (m := TIMELINE.search(line)) is not None:
            event = _timeline(m, number)
            if event is None:
                report.skip("malformed TIMELINE line", where)
            elif event.event not in TIMELINE_EVENTS:
                report.skip("TIMELINE event of an unknown kind", where)
            else:
                out.timeline.append(event)
        elif line.strip():
            report.skip("not a cuzk timing line", where)
    return out


def _fields(text: str) -> dict[str, int] | None:
    fields: dict[str, int] = {}
    for key, raw in FIELD.findall(text):
        m = VALUE.fullmatch(raw)
        if m is None:
            return None
        value = int(m.group(1))
        if not 0 <= value <= MAX_MS:
            return None
        fields[key] = value
    return fields


def _timeline(m: re.Match[str], number: int) -> TimelineEvent | None:
    offset, event, job, detail_text = (g.strip() for g in m.groups())
    if not re.fullmatch(r"-?\d+", offset) or abs(int(offset)) > MAX_MS * 100:
        return None
    detail: dict[str, int] = {}
    for part in filter(None, detail_text.split(",")):
        key, sep, value = part.partition("=")
        value = value.removesuffix("ms")
        if not sep or not re.fullmatch(r"\d+", value) or int(value) > MAX_MS:
            return None
        detail[key.strip()] = int(value)
    return TimelineEvent(int(offset), event, job, detail, number)
