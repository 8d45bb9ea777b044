"""Chrome trace JSON read one event at a time, so a large trace never exists as a list of dicts.

The text is read in chunks (a `.gz` file is decompressed as it is read, so the compressed
bytes, the decompressed bytes and the text are never all held at once) and each event is
decoded on its own with `json.JSONDecoder.raw_decode`. The caller sees the top-level
members other than `traceEvents` (`otherData`, `baseTimeNanoseconds`, ...) and every event
with its index; `number_text` gives back the exact text of a number in the current event,
because a float64 of an epoch microsecond (1.7e15) keeps only a quarter microsecond.

Syntax errors, text cut off inside an event and broken gzip streams raise ImportFailed
naming the file, the line and column, and the event. The array form may lack its closing
bracket (a trace cut off while written, which the format allows). A `.gz` file that inflates
past `gzip_limit` (64 times its size, at least 256 MiB, at most 8 GiB) is refused as it streams.

Contract: `read_events(handle, source, on_member, on_event)`, `GzipText(path)`,
`exact_ns(text, value)`.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from workbench.importers.report import ImportFailed

GZIP_RATIO = 64
GZIP_FLOOR = 256 << 20
GZIP_MAX = 8 << 30
CHUNK = 1 << 18  # characters read at a time (a window of 1 MiB made small traces cost 3.1x)
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r'\s*:\s*(-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?)')
_AFTER_EVENT = re.compile(r"[ \t\n\r]*,[ \t\n\r]*(?=[{\[\]])")  # the usual case, in one step


class GzipText:
    """A gzip file read as text a piece at a time; a broken stream ends the text and says why.

    The error waits until the text before it has been read, so the message can name the
    last event the file still holds in full.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.raw = gzip.open(path, "rb")  # noqa: SIM115 (closed by close(), as a file is)
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.broken: Exception | None = None
        self.limit = gzip_limit(path.stat().st_size)
        self.inflated = 0

    def read(self, n: int) -> str:
        if self.broken is not None:
            return ""
        try:
            data = self.raw.read1(n)
        except (EOFError, OSError, zlib.error) as err:
            self.broken = err
            return ""
        self.inflated += len(data)
        if self.inflated > self.limit:
            raise ImportFailed(
                f"{self.path}: decompresses to more than {self.limit} bytes, over {GZIP_RATIO} times its "
                f"size (the limit for a gzipped trace: real ones inflate 7 to 20 times); decompress it "
                f"yourself if it is genuine")
        return self.decoder.decode(data, final=not data)

    def close(self) -> None:
        self.raw.close()


def gzip_limit(compressed: int) -> int:
    """Real Chrome and Kineto traces inflate 7 to 20 times: far more is a bomb, refused while streaming."""
    return min(GZIP_MAX, max(GZIP_FLOOR, GZIP_RATIO * compressed))


class _Cut(Exception):
    """The text ended inside a value."""


class Reader:
    """A window over the text: `buf[pos:]` is what is not consumed yet."""

    def __init__(self, handle: IO[str] | GzipText, source: str) -> None:
        self.handle, self.source = handle, source
        self.buf, self.pos, self.eof = "", 0, False
        self.lines_before = 0  # newlines in text already dropped from the window
        self.columns_before = 0  # characters of the window's first line already dropped
        self.scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
        self.event = -1  # index of the event being read, -1 outside traceEvents
        self.span = (0, 0)  # where the last decoded value lies in buf

    def _fill(self, at_least: int = CHUNK) -> bool:
        if self.eof:
            return False
        if self.pos:
            self.lines_before += self.buf.count("\n", 0, self.pos)
            last = self.buf.rfind("\n", 0, self.pos)
            self.columns_before = self.pos - last - 1 if last >= 0 else self.columns_before + self.pos
            self.buf, self.pos = self.buf[self.pos:], 0
        try:
            chunk = self.handle.read(max(at_least, CHUNK))
        except (EOFError, OSError, zlib.error) as err:
            raise ImportFailed(f"{self.source}: the gzip stream is cut off or corrupt ({err}), "
                               f"{self._where()}") from None
        if not chunk:
            broken = getattr(self.handle, "broken", None)
            if broken is not None:
                raise ImportFailed(f"{self.source}: the gzip stream is cut off or corrupt ({broken}), "
                                   f"{self._where(len(self.buf))}")
            self.eof = True
            return False
        self.buf += chunk
        return True

    def skip_ws(self) -> str:
        """The next character that is not white space ("" at the end of the text)."""
        while True:
            m = _WS.match(self.buf, self.pos)
            self.pos = m.end() if m else self.pos
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, char: str) -> None:
        if self.skip_ws() != char:
            self._syntax(f"expected {char!r}")
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value, decoded whole."""
        self.skip_ws()
        while True:
            try:
                try:
                    obj, end = self.scan(self.buf, self.pos)
                except StopIteration as stop:  # what raw_decode makes of it, without its overhead
                    raise json.JSONDecodeError("Expecting value", self.buf, stop.value) from None
            except json.JSONDecodeError as err:
                if not self.eof:  # more text may finish the value; filling moves the window, so decode again
                    self._fill(len(self.buf))
                    continue
                if not self.buf[err.pos:].strip() or err.msg.startswith("Unterminated"):
                    raise _Cut() from None
                self._syntax(err.msg, err.pos)
            except RecursionError:
                self._syntax("values nested too deeply")
            except ValueError as err:  # an integer of more digits than Python converts
                self._syntax(str(err))
            # A number at the end of the window may go on in the next chunk.
            if end >= len(self.buf) and not self.eof:
                self._fill()
                continue
            self.span = (self.pos, end)
            self.pos = end
            return obj

    def number_text(self, key: str, value: float) -> str | None:
        """The exact text of the number under `key` in the value just decoded."""
        buf, (at, end) = self.buf, self.span
        quoted = f'"{key}"'
        while (at := buf.find(quoted, at, end)) >= 0:
            at += len(quoted)
            m = _NUMBER.match(buf, at)
            if m and float(m.group(1)) == value:  # a nested key of the same name has another value
                return m.group(1)
        return None

    def line_col(self, pos: int) -> tuple[int, int]:
        line = self.lines_before + self.buf.count("\n", 0, pos) + 1
        last = self.buf.rfind("\n", 0, pos)
        return line, pos - last if last >= 0 else self.columns_before + pos + 1

    def _where(self, pos: int | None = None) -> str:
        line, col = self.line_col(self.pos if pos is None else pos)
        event = f", in event {self.event}" if self.event >= 0 else ""
        return f"at line {line}, column {col}{event}"

    def _syntax(self, message: str, pos: int | None = None) -> None:
        line, col = self.line_col(self.pos if pos is None else pos)
        event = f" in event {self.event}" if self.event >= 0 else ""
        raise ImportFailed(f"{self.source}: not valid JSON ({message} at line {line}, column {col}){event}")

    def cut(self) -> ImportFailed:
        where = self._where()
        return ImportFailed(f"{self.source}: the text ends inside a value, {where}: the file is cut off")


def read_events(
    handle: IO[str] | GzipText, source: str, on_member: Callable[[str, Any], None],
    on_event: Callable[[int, Any, Reader], None],
) -> tuple[bool, int | None]:
    """Feed every event to `on_event` and every other top-level member to `on_member`.

    Returns whether there was a traceEvents list, and, when the text ends after a complete
    event but before the list's `]` (accepted: the array form may be cut off), how many
    events it held.
    """
    r = Reader(handle, source)
    try:
        first = r.skip_ws()
        if first == "\ufeff":
            r.pos += 1
            first = r.skip_ws()
        if first == "[":
            r.pos += 1
            return True, _array(r, on_event)
        if first != "{":
            if not first:
                raise ImportFailed(f"{source}: an empty file is not a Chrome trace")
            value = r.value()
            raise ImportFailed(f"{source}: Chrome trace JSON is an object or an array, not "
                               f"{type(value).__name__}")
        r.pos += 1
        found = False
        if r.skip_ws() == "}":
            return False, None
        while True:
            key = r.value()
            if not isinstance(key, str):
                r._syntax("expected a member name")
            r.expect(":")
            if key == "traceEvents" and r.skip_ws() == "[":
                r.pos += 1
                found = True
                cut = _array(r, on_event)
                if cut is not None:
                    return True, cut
            else:
                on_member(key, r.value())
            nxt = r.skip_ws()
            if nxt == "}":
                return found, None
            if nxt != ",":
                r._syntax("expected ',' or '}'")
            r.pos += 1
    except _Cut:
        raise r.cut() from None


def _array(r: Reader, on_event: Callable[[int, Any, Reader], None]) -> int | None:
    """The events of a traceEvents array; their number when the text ends before its `]`."""
    n = 0
    while True:
        char = r.skip_ws()
        if char == "]":
            r.pos += 1
            r.event = -1
            return None
        if not char:
            return n
        r.event = n
        on_event(n, r.value(), r)
        n += 1
        m = _AFTER_EVENT.match(r.buf, r.pos)
        if m:
            r.pos = m.end()
            continue
        char = r.skip_ws()
        if char == ",":
            r.pos += 1
        elif char == "]":
            continue
        elif not char:
            return n
        else:
            r._syntax("expected ',' or ']' after an event")


def exact_ns(text: str | None, value: float) -> int:
    """Nanoseconds from a microsecond number's text, exactly (rounding past the third decimal)."""
    if text is None or "e" in text or "E" in text:
        return round(value * 1000)  # no text, or an exponent: float precision is all there is
    whole, _, frac = text.partition(".")
    ns = abs(int(whole)) * 1000 + int((frac + "000")[:3])
    if frac[3:4] and (frac[3] > "5" or (frac[3] == "5" and (frac[4:].strip("0") or ns % 2))):
        ns += 1
    return -ns if text.startswith("-") else ns
