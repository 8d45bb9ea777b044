"""One host's file read and judged where it lies: the work a fleet's workers do.

`read_host` loads any input the importers read (format sniffed), diagnoses it and returns
only the small `HostRecord` (analysis/fleet.py), so a worker process or a Ray task sends back
a few hundred bytes, not the trace. Whatever stops a file being read becomes an unreadable
record with the one-line reason; the rest of the fleet goes on.

The host is named from the file's content where it says it: the syslog or journald prefix of
a daemon log's lines (`Mar 02 10:00:03 node7 cuzk[2231]: ...`), the Hostname an nsys export
records about its target; else from the file's name without its suffixes.

Contract: `expand(paths) -> list[Path]`, `read_host(path, options) -> HostRecord`.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

from workbench.analysis.fleet import HostRecord, host_record, unreadable
from workbench.analysis.verdict import DiagnoseOptions, diagnose
from workbench.importers import load_any  # every importer, loaded once before a pool forks
from workbench.importers.sniff import sniff

HEAD_BYTES = 1 << 16  # the part of a log searched for a host name
SUFFIXES = (".gz", ".json", ".sqlite", ".nsys-rep", ".wbtrace", ".log", ".txt", ".trace")
# "Mar  2 10:00:03[.000000] HOST IDENT[PID]:" (syslog, journald short) or "2026-03-02T10:00:03Z HOST IDENT:"
_SYSLOG = re.compile(
    r"^(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d\S*) "
    r"(?!(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR) )"  # a log level after the time is no host
    r"(?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,62}) [A-Za-z0-9_./@-]+(?:\[\d+\])?: ", re.MULTILINE)


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given, and a directory's readable files (its folders too, hidden ones left
    out), in name order. A named file is kept even when it cannot be read, so the table can
    say why."""
    out: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            out.append(path)
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                file = Path(folder) / name
                if not name.startswith(".") and file.is_file() and os.access(file, os.R_OK):
                    out.append(file)
    return list(dict.fromkeys(out))


def host_from_name(path: Path) -> str:
    name = path.name
    while True:
        stem = next((name[: -len(s)] for s in SUFFIXES if name.endswith(s) and len(name) > len(s)), None)
        if stem is None:
            return name
        name = stem


def host_from_content(path: Path, kind: str) -> str | None:
    try:
        if kind == "cuzk":
            with open(path, "rb") as handle:
                head = handle.read(HEAD_BYTES).decode("utf-8", "replace")
            found = _SYSLOG.search(head)
            return found.group("host") if found else None
        if kind == "nsys":
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                row = db.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' "
                                 "AND value != '' LIMIT 1").fetchone()
            return str(row[0]) if row else None
    except (OSError, sqlite3.Error):
        return None  # the name is a courtesy: the load says what is wrong with the file
    return None


def read_host(path: str | os.PathLike[str], options: DiagnoseOptions | None = None) -> HostRecord:
    """Load, diagnose and reduce one host's file; never raises for a bad file."""
    path = Path(path)
    started = time.perf_counter()
    host = host_from_name(path)
    try:
        kind = sniff(path) if path.is_file() else ""
        host = host_from_content(path, kind) or host
        trace = load_any(path)
        verdict = diagnose(trace, options or DiagnoseOptions())
        return host_record(host, str(path), kind or "pipe", trace, verdict, time.perf_counter() - started)
    except (ValueError, OSError, MemoryError, RecursionError) as err:
        return unreadable(host, str(path), _reason(path, err), time.perf_counter() - started)
    except Exception as err:  # a defect on one host's file must not cost the fleet
        return unreadable(host, str(path), f"{path}: internal error: {type(err).__name__}: {err}",
                          time.perf_counter() - started)


def _reason(path: Path, err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror and err.filename is not None:
        return f"{err.filename}: {err.strerror}"
    said = str(err).strip() or type(err).__name__
    return said if str(path) in said else f"{path}: {said}"
