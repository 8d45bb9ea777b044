"""`workbench recover JOURNAL`: the journal a killed run left, made a trace.

A run streams what it records to `<trace>.wbjournal` while it runs and removes it once the
trace is saved, so a journal that stays behind is a run that was killed (SIGKILL, a crash,
power). Its records up to the first one cut off or damaged become the trace; one line says
what was recovered and what was dropped. The temporary file a save killed mid-write left
beside the trace (its name carries the dead writer's process id) is removed. Every command also
reads a journal as it is, and the trace path of a killed run reads the journal beside it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    recover = commands.add_parser(
        "recover", help="turn the journal a killed run left (.wbjournal) into a trace",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    recover.add_argument("journal", type=Path, help="the journal (<trace>.wbjournal)")
    recover.add_argument("-o", "--output", type=str,
                         help="trace to write (default: the journal's name without .wbjournal; a new name "
                              "beside it if that exists)")
    recover.add_argument("--keep", action="store_true",
                         help="keep the journal (by default it is removed once the trace is written whole, "
                              "unless a damaged record was found in it)")
    recover.set_defaults(func=_recover)


def _recover(args: argparse.Namespace) -> int:
    from workbench.trace import journal_owner, journal_read, output, store
    from workbench.trace.store import ZIP_MAGIC

    path: Path = args.journal
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file, so not a journal")
    if not journal_read.is_journal(path):
        with open(path, "rb") as handle:
            head = handle.read(len(ZIP_MAGIC))
        if head == ZIP_MAGIC:
            raise ValueError(f"{path} is a workbench trace already, not a journal: nothing to recover")
    writer = journal_owner.live_writer(path)
    if writer is not None:
        raise ValueError(f"{path} is the journal of a run still going (process {writer}): it becomes the "
                         f"trace when that run ends; `workbench summary` reads it as it is")
    if args.output is not None:
        target, fresh = output.check_beside(args.output, "-o", [path]), False
    else:
        target, fresh = journal_read.trace_name(path), True
        output.check_folder(target.parent, f"trace {target}")
    trace, recovery = journal_read.read(path)
    # What a save killed mid-write left beside the trace the run meant to write.
    output.remove_stale_temporaries(journal_read.trace_name(path))
    written = store.save(trace, target, fresh=fresh)
    removed = not args.keep and not recovery.damaged
    if removed:
        path.unlink(missing_ok=True)
    print(f"recovered {written}: {recovery.line()}"
          f"{'; journal removed' if removed else f'; journal {path} kept'}")
    return 0


def say_left_behind(folder: Path) -> list[str]:
    """Lines for `run` to say about journals killed runs left in `folder` (none when clean)."""
    from workbench.trace.journal_owner import left_behind

    found = left_behind(folder) if folder.is_dir() else []
    if not found:
        return []
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return [f"{found[0]}{more} was left by a run that did not finish: `workbench recover {found[0]}` "
            f"makes it a trace"]
