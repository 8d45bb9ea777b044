"""Which format a file is in, read from its first bytes rather than its name.

A `.wbtrace` archive is a zip file, and a journal a killed run left (`.wbjournal`) is read
as one; an nsys export is an SQLite database; Chrome trace JSON
starts with `{` or `[` (possibly gzipped); a cuzk log is text holding CUZK_TIMING,
CUZK_NTT_H or TIMELINE lines. Anything else is refused with a message that says what was
looked for and how the file begins.

Whatever goes wrong while a file is read (a truncated gzip stream, a damaged database, text
in another encoding) comes out of `load_any` as an `ImportFailed` naming the file, so every
command can say it in one line.

Files that are not regular files are never read twice or forever: a device (`/dev/zero`) or
a socket is refused; a FIFO or pipe (`workbench import <(cat log)`) is read once into a private
temporary file, at most `PIPE_LIMIT` bytes, and imported from there.

Contract: `sniff(path) -> str` (one of FORMATS), `load_any(path) -> Trace`.
"""

from __future__ import annotations

import gzip
import os
import sqlite3
import stat
import tempfile
import zlib
from pathlib import Path

from workbench.importers.report import ImportFailed
from workbench.trace import store
from workbench.trace.container import Trace
from workbench.trace.journal_format import MAGIC as JOURNAL_MAGIC
from workbench.trace.journal_format import SUFFIX as JOURNAL_SUFFIX
from workbench.trace.store import ZIP_MAGIC

FORMATS = ("wbtrace", "nsys", "chrome", "cuzk")
SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
CUZK_MARKERS = (b"CUZK_TIMING:", b"CUZK_NTT_H:", b"TIMELINE,")
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
HEAD = 4096
PIPE_LIMIT = 2 << 30  # what a pipe may hold: it is copied whole to a temporary file


class UnknownFormat(ImportFailed):
    """A file none of the importers reads."""


def sniff(path: str | os.PathLike[str]) -> str:
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a trace, log or export")
    if _kind_of_file(path) != "regular":
        raise UnknownFormat(f"{path}: not a regular file, so its format is not sniffed (load_any reads it)")
    with open(path, "rb") as handle:
        head = handle.read(HEAD)
    if not head:
        raise UnknownFormat(f"{path}: the file is empty")
    if head.startswith((ZIP_MAGIC, JOURNAL_MAGIC)):  # store.load reads both
        return "wbtrace"
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as handle:
                inner = handle.read(HEAD)
        except (OSError, EOFError, zlib.error) as err:
            raise _gzip_failed(path, err) from None
        if inner.lstrip().startswith((b"{", b"[")):
            return "chrome"
        raise UnknownFormat(f"{path}: a gzip file that does not hold Chrome trace JSON")
    if head.startswith(UTF16_BOMS):
        raise UnknownFormat(f"{path}: UTF-16 text; the workbench reads UTF-8 (convert it, e.g. with iconv)")
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith((b"{", b"[")):
        return "chrome"
    if any(marker in head for marker in CUZK_MARKERS) or _cuzk_further(path):
        return "cuzk"
    raise UnknownFormat(
        f"{path}: not a format the workbench reads (looked for a .wbtrace archive or journal, an nsys SQLite "
        f"export, Chrome trace JSON or cuzk log lines); it begins {head[:40]!r}"
    )


def _gzip_failed(path: Path, err: Exception) -> ImportFailed:
    if isinstance(err, EOFError):
        return ImportFailed(f"{path}: the gzip data ends early: the file is cut off after "
                            f"{path.stat().st_size} bytes")
    return ImportFailed(f"{path}: damaged gzip data ({err})")


def _cuzk_further(path: Path) -> bool:
    """Logs may open with a long preamble: look through the whole file for a marker."""
    with open(path, "rb") as handle:
        tail = b""
        while chunk := handle.read(1 << 20):
            window = tail + chunk
            if any(marker in window for marker in CUZK_MARKERS):
                return True
            tail = window[-16:]
    return False


def _kind_of_file(path: Path) -> str:
    mode = path.stat().st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return "regular"
    return "pipe" if stat.S_ISFIFO(mode) else "device"


def load_any(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    if not path.exists():
        if path.name and path.with_name(path.name + JOURNAL_SUFFIX).is_file():
            return store.load(path)  # a run killed before its save: the journal it left
        raise FileNotFoundError(f"no file at {path}")
    kind = _kind_of_file(path)
    if kind == "device":
        raise ImportFailed(f"{path}: a device or socket, not a trace, log or export (give a regular file "
                           f"or a pipe)")
    if kind == "pipe":
        return _load_pipe(path)
    return _load_regular(path)


def _load_pipe(path: Path) -> Trace:
    """Read a pipe once, whole and bounded, so the sniffer and the importer see the same bytes."""
    with tempfile.TemporaryDirectory(prefix="workbench-pipe-") as folder:
        copy = Path(folder) / "input"
        with open(path, "rb") as source, open(copy, "wb") as target:
            while chunk := source.read(1 << 20):
                if target.tell() + len(chunk) > PIPE_LIMIT:
                    raise ImportFailed(f"{path}: a pipe holding more than {PIPE_LIMIT >> 30} GiB; save it "
                                       f"to a file and import that")
                target.write(chunk)
        try:
            trace = _load_regular(copy)
        except ValueError as err:  # ImportFailed, TraceFormatError: say the name the user gave
            raise type(err)(str(err).replace(str(copy), str(path))) from None
    report = trace.meta.get("import")
    if isinstance(report, dict):
        report["source"] = str(path)
    return trace


def _load_regular(path: Path) -> Trace:
    kind = sniff(path)
    try:
        return _load(kind, path)
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise _gzip_failed(path, err) from None
    except UnicodeDecodeError as err:
        raise ImportFailed(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except sqlite3.Error as err:
        raise ImportFailed(f"{path}: not a readable SQLite database ({err})") from None
    except MemoryError:
        raise ImportFailed(f"{path}: too large to import in the memory available") from None


def _load(kind: str, path: Path) -> Trace:
    if kind == "wbtrace":
        from workbench.trace import store

        return store.load(path)
    if kind == "nsys":
        from workbench.importers.nsys import load_nsys

        return load_nsys(path)
    if kind == "chrome":
        from workbench.importers.chrome import load_chrome

        return load_chrome(path)  # streams the file (gzipped or not): a large trace is never held whole
    from workbench.importers.cuzk_log import load_cuzk_log

    return load_cuzk_log(path)
