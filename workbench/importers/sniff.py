"""Which format a file is in, read from its first bytes rather than its name.

A `.wbtrace` archive is a zip file; an nsys export is an SQLite database; Chrome trace JSON
starts with `{` or `[` (possibly gzipped); a cuzk log is text holding CUZK_TIMING,
CUZK_NTT_H or TIMELINE lines. Anything else is refused with a message that says what was
looked for and how the file begins.

Contract: `sniff(path) -> str` (one of FORMATS), `load_any(path) -> Trace`.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from workbench.importers.report import ImportFailed
from workbench.trace.container import Trace

FORMATS = ("wbtrace", "nsys", "chrome", "cuzk")
SQLITE_MAGIC = b"SQLite format 3\x00"
ZIP_MAGIC = b"PK\x03\x04"
GZIP_MAGIC = b"\x1f\x8b"
CUZK_MARKERS = (b"CUZK_TIMING:", b"CUZK_NTT_H:", b"TIMELINE,")
HEAD = 4096


class UnknownFormat(ImportFailed):
    """A file none of the importers reads."""


def sniff(path: str | os.PathLike[str]) -> str:
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a trace, log or export")
    with open(path, "rb") as handle:
        head = handle.read(HEAD)
    if head.startswith(ZIP_MAGIC):
        return "wbtrace"
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as handle:
                inner = handle.read(HEAD)
        except (OSError, EOFError) as err:
            raise UnknownFormat(f"{path}: a gzip file that cannot be read ({err})") from None
        if inner.lstrip().startswith((b"{", b"[")):
            return "chrome"
        raise UnknownFormat(f"{path}: a gzip file that does not hold Chrome trace JSON")
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith((b"{", b"[")):
        return "chrome"
    if any(marker in head for marker in CUZK_MARKERS) or _cuzk_further(path):
        return "cuzk"
    raise UnknownFormat(
        f"{path}: not a format the workbench reads (looked for a .wbtrace archive, an nsys SQLite "
        f"export, Chrome trace JSON or cuzk log lines); it begins {head[:40]!r}"
    )


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


def load_any(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no file at {path}")
    kind = sniff(path)
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
