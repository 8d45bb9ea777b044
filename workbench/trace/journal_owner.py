"""Whose a journal is: the process that writes it (its id is in the header), and whether that
process still runs. A journal whose writer is gone is one a killed run left behind; one whose
writer runs is a run going on, not to be recovered (nor named) under its feet.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.trace.journal_format import MAGIC, SUFFIX, Ending, records
from workbench.trace.output import process_running
from workbench.trace.store_read import parse_json


def left_behind(folder: str | os.PathLike[str], limit: int = 100) -> list[Path]:
    """Journals in `folder` whose run is gone (killed, or crashed): not this process's, nor a
    running one's (by the process id in the header). At most `limit` files are looked at."""
    found = []
    for number, path in enumerate(sorted(Path(folder).glob("*" + SUFFIX))):
        if number >= limit:
            break
        pid = _writer(path)
        if pid != os.getpid() and not _running(pid):
            found.append(path)
    return found


def _writer(path: Path) -> int | None:
    try:
        with open(path, "rb") as handle:
            if handle.read(len(MAGIC)) != MAGIC:
                return None
            first = next(records(handle, path.stat().st_size, Ending()), None)
        header = parse_json(path, "journal header", first.body) if first is not None else None
    except (OSError, ValueError):
        return None
    pid = header.get("pid") if isinstance(header, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _running(pid: int | None) -> bool:
    return pid is not None and process_running(pid)


def live_writer(path: str | os.PathLike[str]) -> int | None:
    """The process id of the run still writing the journal at `path`, or None."""
    pid = _writer(Path(path))
    return pid if pid is not None and pid != os.getpid() and _running(pid) else None
