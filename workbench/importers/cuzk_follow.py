"""A cuzk log read as it grows: bytes in as they come, each line read once, a trace any time.

The bytes are cut into lines as the batch import's text reading cuts a file (a line ends at
`\\n`, `\\r\\n` or a lone `\\r`; UTF-8 with undecodable bytes replaced) and each line goes to
the batch import's own `LineReader`, so the trace of what was read (`trace()`, placed by the
batch import's `assemble`) is the batch import of the same bytes. What is not yet a whole
line is held until its end comes; when a file ends (it was rotated away) its last line counts
as a line, as it would in that file's import; when the reading stops, a line still open is
left out and said so. A line longer than `MAX_LINE` bytes (no line the daemon prints; binary
data, or a file that is not a log) is not kept: its bytes are dropped as they come, up to its
end, so memory stays bounded whatever arrives, and the line is counted as skipped.

Reading is linear in the bytes; making the trace is linear in the lines kept, so a live
reader makes one at a bounded rate (follow/session.py).
"""

from __future__ import annotations

import copy

from workbench.importers.cuzk_lines import LineReader, skip_line
from workbench.importers.cuzk_log import assemble_settled, no_collection
from workbench.importers.report import ImportReport
from workbench.trace.container import Trace

MAX_LINE = 1 << 20  # bytes
OVERLONG = f"line longer than {MAX_LINE >> 20} MiB (binary data?), not read"


class CuzkFollower:
    """`feed(bytes)` as they come, `end_of_file()` when a file is done (rotated away),
    `trace()` for the trace of the lines so far; `stop()` once no more will come."""

    def __init__(self, source: str, max_line: int = MAX_LINE) -> None:
        self.report = ImportReport("cuzk daemon log", source)
        self.reader = LineReader(self.report)
        self.max_line = max_line
        self.bytes = 0  # bytes fed
        self.files = 1  # files read (a rotation starts the next)
        self.notes: list[str] = []
        self._open = bytearray()  # the line not yet ended
        self._overlong = False  # the open line passed max_line: its bytes are being dropped
        self._fragment = False  # reading began inside a line: its rest is dropped

    def begin_mid_line(self) -> None:
        """Reading begins inside a line (at a file's end while a line was being written)."""
        self._fragment = True

    @property
    def lines(self) -> int:
        return self.reader.number

    @property
    def kept(self) -> int:
        return sum(len(s.timings) + len(s.timeline) + len(s.figures) for s in self.reader.segments)

    def feed(self, data: bytes) -> None:
        self.bytes += len(data)
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data, start, end)
            self._line_done()
            start = end + 1
        self._take(data, start, len(data))

    def _take(self, data: bytes, start: int, end: int) -> None:
        if self._overlong or self._fragment or start == end:
            return
        if len(self._open) + end - start > self.max_line:
            self._overlong = True
            self._open.clear()
            return
        self._open += data[start:end]

    def _line_done(self) -> None:
        if self._fragment:
            self._fragment = False
            self.notes.append("reading began inside a line: its end was left out")
            return
        if self._overlong:
            self._overlong = False
            self.reader.number += 1
            self.report.read = self.reader.number
            if OVERLONG not in self.report.skipped:
                self.notes.append(f"line {self.reader.number}: {OVERLONG} (nor is any other such line)")
            skip_line(self.report, OVERLONG, self.reader.number)
            return
        raw = bytes(self._open)
        self._open.clear()
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        text = raw.decode("utf-8", "replace")
        if "\r" in text:  # a lone carriage return ends a line too
            for part in text.split("\r"):
                self.reader.add(part)
        else:
            self.reader.add(text)

    def end_of_file(self, why: str = "") -> None:
        """The file being read is done (rotated or truncated): its last line, if open, ends here;
        what comes next is the next file's."""
        if self._open or self._overlong:
            self._line_done()
        self.files += 1
        if why:
            self.notes.append(why)

    def stop(self) -> None:
        """No more bytes will come: a line still open was cut off mid-write and is left out."""
        if self._open or self._overlong:
            self.notes.append(f"the last {len(self._open)} bytes, a line not yet ended when reading stopped, "
                              "were left out")
            self._open.clear()
            self._overlong = False

    def trace(self) -> Trace:
        return self.snapshot()[0]

    def snapshot(self) -> tuple[Trace, set[int]]:
        """The trace of the lines read so far, and the partitions later lines can no longer
        change; ImportFailed while no timing or TIMELINE line has come."""
        report = copy.deepcopy(self.report)  # the import completes its report; ours goes on
        with no_collection():
            trace, settled = assemble_settled(self.reader.segments, report)
        if self.files > 1 or self.notes:
            trace.meta["follow"] = {"files": self.files, "bytes": self.bytes, "notes": list(self.notes)}
        return trace, settled
