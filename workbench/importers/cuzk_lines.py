"""Reading cuzk daemon log lines, wherever they sit in a line (after timestamps, level
prefixes, terminal colour codes), with everything else counted and skipped by line number.

The line kinds, as the daemon prints them (tests/test_importers_cuzk_formats.py lists the
source of each):
- the prover's `CUZK_TIMING:` lines, each recognised by the field that names it (so a line
  that gains fields in another daemon version is still read), plus two worded ones (the
  memory pool threshold, the cached d_a buffer) and the pre-staging outcome, whose values
  are words (`prestage_setup=ok`);
- `CUZK_NTT_H:` with the parts of ntt_msm_h (`ms` suffix on every value);
- `TIMELINE,<offset_ms>,<event>,<job>,<detail>` from the engine, where a detail is
  `key=value` pairs or a bare word (`monolithic`) and a value may be a word (`kind=...`);
- the engine's tracing lines `GPU_TIMING <what> key=value ...` and `FIN_TIMING <what> ...`,
  whose `partition` is written `Some(3)`.
Durations are integer milliseconds; a duration past `MAX_MS` is garbage, not a phase.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

from workbench.importers.report import ImportReport

TIMING_MARK, NTT_H_MARK, TIMELINE_MARK = "CUZK_TIMING:", "CUZK_NTT_H:", "TIMELINE,"
TRACING = re.compile(r"\b((?:GPU|FIN)_TIMING) ([^=]*?)(?: +(\w+=.*))?$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
FIELD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
# A key=value pair in one match: a plain figure (groups 2, 3) or anything else (group 4, read
# by the slower rules: Some(3), a word).
PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(?:(-?\d+)(ms)?,?(?!\S)|(\S*))")
INT = re.compile(r"(-?\d+)(ms)?,?")
SOME = re.compile(r"Some\((\d+)\)")  # how tracing writes an Option
MAX_MS = 10**9  # eleven days
MAX_VALUE = 2**63
DIGITS = 19  # more digits than this is not a figure the daemon prints
KEPT_LINE_NUMBERS = 20  # line numbers kept per skip reason (the count covers them all)
RESTART_MS = 5_000  # a TIMELINE offset this far back is a new process's clock

# The field that names each CUZK_TIMING line, and the kind the line is filed under.
KINDS = (
    ("split_vectors_ms", "split"), ("setup_to_split_ms", "split"), ("prep_msm_ms", "prep"),
    ("b_g2_msm_ms", "b_g2"), ("mutex_wait_ms", "prelock"), ("pre_lock_cpu_ms", "prelock"),
    ("ntt_msm_h_ms", "ntt"), ("barrier_wait_ms", "barrier"), ("batch_add_ms", "batch"),
    ("tail_msm_ms", "tail"), ("mutex_held_ms", "held"), ("total_start_fn_ms", "held"),
    ("async_dealloc_ms", "dealloc"), ("host_register", "host_register"), ("free_mib", "prestage_vram"),
    ("prestage_setup", "prestage_setup"),
)
PRIORITY = {key: n for n, (key, _) in enumerate(KINDS)}
# Fields whose values are words, not numbers.
WORD_FIELDS = frozenset({"host_register", "prestage_setup", "job_id", "kind"})
# CUZK_TIMING lines that are sentences, with the fields their numbers fill.
WORDED = (
    (re.compile(r"set pool release threshold to (\w+) on gpu (\d+)"), "pool",
     ("pool_release_threshold", "gpu")),
    (re.compile(r"d_a_cache allocated (\d+) MiB on gpu (\d+)"), "d_a_cache", ("d_a_cache_mib", "gpu")),
)
WORDED_HINTS = ("set pool", "d_a_cache allocated")  # a cheap test before the sentences' patterns
TIMELINE_EVENTS = ("SYNTH_START", "SYNTH_END", "CHAN_SEND", "GPU_QUEUE", "GPU_PICKUP", "GPU_START", "GPU_END")
TIMELINE_NUMBERS = frozenset({"partition", "worker", "synth_ms", "gpu_ms"})
# The engine's tracing lines that time its worker loop and finaliser.
TRACING_KINDS = frozenset({
    "GPU_TIMING hot_path pre-prove overhead", "GPU_TIMING spawn_blocking prove_start",
    "GPU_TIMING prove_start returned", "FIN_TIMING finalizer partition", "FIN_TIMING finalizer monolithic",
    "FIN_TIMING malloc_trim (success path)", "FIN_TIMING malloc_trim (discard path)",
})


@dataclass(slots=True)
class TimingLine:
    kind: str  # a KINDS or WORDED kind, "ntt_h" (CUZK_NTT_H) or a TRACING_KINDS message
    fields: dict[str, int]
    line: int
    words: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TimelineEvent:
    offset_ms: int
    event: str
    job: str
    detail: dict[str, int]
    line: int
    words: dict[str, str] = field(default_factory=dict)  # kind=..., or a bare word such as monolithic


@dataclass
class LogLines:
    """The lines of one segment of the log: what one daemon process printed."""

    timings: list[TimingLine] = field(default_factory=list)
    timeline: list[TimelineEvent] = field(default_factory=list)
    figures: list[TimingLine] = field(default_factory=list)  # the tracing lines
    first_line: int = 1
    restart: str = ""  # how the log showed that a new process began here ("" for the first)


def skip_line(report: ImportReport, reason: str, number: int) -> None:
    """Count a skipped line under its reason, keeping the first line numbers of each."""
    report.skip(reason, f"line {number}")
    kept = report.extra.setdefault("skipped_lines", {}).setdefault(reason, [])
    if len(kept) < KEPT_LINE_NUMBERS:
        kept.append(number)


class LineReader:
    """The one reading of a log line, shared by the batch import and `follow`: lines come one at
    a time, each read once, numbered from 1; what they hold goes to the current segment.

    A daemon restart starts a new segment: the process named in a journald or syslog prefix
    (`cuzk[2231]:`) changes to one not seen before, or a TIMELINE offset (milliseconds since
    that process's engine started) falls back by more than `RESTART_MS`, which no process's
    own lines do (its threads print within milliseconds of taking the time)."""

    def __init__(self, report: ImportReport) -> None:
        self.report = report
        self.segments = [LogLines()]
        self.number = 0
        self._process = ""
        self._processes: set[str] = set()
        self._latest = -1  # the latest TIMELINE offset of this segment

    def add(self, line: str) -> None:
        """One line, without its line ending."""
        self.number = number = self.number + 1
        self.report.read = number
        if "\x1b" in line:
            line = ANSI.sub("", line)
        if (at := line.find(TIMING_MARK)) >= 0:
            parsed = _timing(line[at + len(TIMING_MARK):], number)
            if isinstance(parsed, str):
                skip_line(self.report, parsed, number)
            else:
                self._segment(line, at, None).timings.append(parsed)
        elif (at := line.find(NTT_H_MARK)) >= 0:
            fields, words = _fields(line[at + len(NTT_H_MARK):]) or ({}, {})
            if not fields or words:
                skip_line(self.report, "CUZK_NTT_H line with a malformed value", number)
            else:
                self._segment(line, at, None).timings.append(TimingLine("ntt_h", fields, number))
        elif (at := line.find(TIMELINE_MARK)) >= 0:
            event = _timeline(line[at + len(TIMELINE_MARK):], number)
            if isinstance(event, str):
                skip_line(self.report, event, number)
            else:
                self._segment(line, at, event.offset_ms).timeline.append(event)
        elif "_TIMING " in line and (m := TRACING.search(line)) is not None:
            kind = f"{m.group(1)} {m.group(2).strip()}"
            parsed_fields = _fields(m.group(3) or "")
            if kind not in TRACING_KINDS:
                skip_line(self.report, f"{m.group(1)} line of an unknown kind", number)
            elif parsed_fields is None:
                skip_line(self.report, f"{m.group(1)} line with a malformed value", number)
            else:
                figure = TimingLine(kind, parsed_fields[0], number, parsed_fields[1])
                self._segment(line, m.start(), None).figures.append(figure)
        elif line.strip():
            skip_line(self.report, "not a cuzk timing line", number)

    def _segment(self, line: str, at: int, offset: int | None) -> LogLines:
        """The segment a kept line goes to: a new one when the line shows a restart."""
        why = ""
        process = _process(line, at)
        if process and process != self._process:
            if self._process and process not in self._processes:
                why = f"{process} began after {self._process}"
            self._processes.add(process)
            self._process = process
        if offset is not None:
            if not why and offset + RESTART_MS < self._latest:
                why = f"the TIMELINE clock went back from {self._latest} ms to {offset} ms"
            if why:
                self._latest = -1
            self._latest = max(self._latest, offset)
        if why:
            self.segments.append(LogLines(first_line=self.number, restart=why))
        return self.segments[-1]


def _process(line: str, at: int) -> str:
    """The `name[pid]` of a journald or syslog prefix before position `at`, or ""."""
    close = line.find("]:", 0, at)
    if close < 0:
        return ""
    opening = line.rfind("[", 0, close)
    if opening < 0 or not line[opening + 1:close].isdigit():
        return ""
    return line[line.rfind(" ", 0, opening) + 1:close + 1]


def read_lines(text: str, report: ImportReport) -> list[LogLines]:
    """Every line of `text` read (each ends at a newline; a carriage return before it is dropped)."""
    reader = LineReader(report)
    for raw in io.StringIO(text):
        reader.add(raw.rstrip("\r\n"))
    return reader.segments


def _timing(body: str, number: int) -> TimingLine | str:
    if any(hint in body for hint in WORDED_HINTS):
        for pattern, kind, names in WORDED:
            if (m := pattern.search(body)) is not None:
                words = dict(zip(names, m.groups(), strict=True))
                fields = {k: int(v) for k, v in words.items() if _digits(v)}
                return TimingLine(kind, fields, number, {k: v for k, v in words.items() if k not in fields})
    parsed = _fields(body)
    if parsed is None:
        return "CUZK_TIMING line with a malformed value"
    fields, words = parsed
    # The line's kind is named by the first of KINDS among its keys.
    first = min((PRIORITY[k] for k in (*fields, *words) if k in PRIORITY), default=None)
    if first is None:
        return "CUZK_TIMING line of an unknown kind"
    return TimingLine(KINDS[first][1], fields, number, words)


def _fields(text: str) -> tuple[dict[str, int], dict[str, str]] | None:
    """Numbers and words by key; None when a number is malformed or out of range."""
    fields: dict[str, int] = {}
    words: dict[str, str] = {}
    for key, digits, ms, raw in PAIR.findall(text):
        if not digits:  # not a plain figure: Some(3), a word, or malformed
            m = SOME.fullmatch(raw)
            if m is not None:
                digits = m.group(1)
            elif key in WORD_FIELDS or raw == "None":
                words[key] = raw
                continue
            else:
                return None
        if len(digits) > DIGITS:
            return None
        value = int(digits)
        if ms or key.endswith("_ms"):  # a duration
            if not 0 <= value <= MAX_MS:
                return None
        elif not -MAX_VALUE <= value <= MAX_VALUE:
            return None
        fields[key] = value
    return fields, words


def _timeline(body: str, number: int) -> TimelineEvent | str:
    offset, _, rest = body.partition(",")
    event, _, rest = rest.partition(",")
    job, _, detail_text = rest.partition(",")
    offset, event, job = offset.strip(), event.strip(), job.strip()
    if not _digits(offset) or int(offset) > MAX_MS * 100 or not event:
        return "malformed TIMELINE line"
    if event not in TIMELINE_EVENTS:
        return "TIMELINE event of an unknown kind"
    detail: dict[str, int] = {}
    words: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in detail_text.split(","))):
        key, sep, value = part.partition("=")
        value = value.removesuffix("ms")
        if sep and _digits(value) and int(value) <= MAX_MS:
            detail[key.strip()] = int(value)
        elif key.strip() in TIMELINE_NUMBERS or (sep and not value):
            return "malformed TIMELINE line"
        else:
            words[key.strip()] = value
    return TimelineEvent(int(offset), event, job, detail, number, words)


def _digits(text: str) -> bool:
    """A plain decimal number short enough to be a figure (int() refuses thousands of digits)."""
    return text.isascii() and text.isdigit() and len(text) <= DIGITS
