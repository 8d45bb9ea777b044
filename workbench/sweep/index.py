"""A sweep folder's index: every run's configuration, repeat, host, GPUs, seed, times, status,
error and files, in `index.json` beside the traces. Rewritten whole (written aside and renamed)
after every run, so a sweep stopped at any moment leaves an index that says what ran.

Statuses: pending, running, completed, failed (a phase raised, or the run could not start),
cut_short (running when the sweep was stopped: its trace, if any, holds what it did), not_run
(still waiting when the sweep was stopped).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.trace import output

INDEX = "index.json"
FORMAT = "workbench-sweep"
VERSION = 1
PENDING, RUNNING, NOT_RUN = "pending", "running", "not_run"
REQUIRED = {"order", "label", "cell", "repeat", "config", "seed"}


@dataclass
class Entry:
    order: int  # position in the order the sweep started its runs
    label: str  # the run's name, and its trace file's stem
    cell: str
    repeat: int
    config: dict[str, Any]
    seed: int  # the circuit seed the run used (its config's)
    fault: str | None = None
    status: str = PENDING
    error: str | None = None
    host: str | None = None
    node: str | None = None
    gpus: list[Any] = field(default_factory=list)
    start: float | None = None  # seconds since the epoch, on the host that ran it
    end: float | None = None
    wall_s: float | None = None
    cpu_s: float | None = None  # CPU time of the process that ran it, during the run
    partitions: int = 0
    partitions_done: int = 0
    trace: str | None = None  # file name inside the folder
    proofs: str | None = None
    notices: list[str] = field(default_factory=list)


@dataclass
class SweepIndex:
    grid: dict[str, Any]
    executor: str
    entries: list[Entry]
    status: str = "running"  # running | completed | interrupted | stopped
    started: float | None = None
    ended: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        data = {"format": FORMAT, "version": VERSION, **asdict(self)}
        return json.dumps(data, indent=1, default=str) + "\n"

    def write(self, folder: Path) -> Path:
        return output.write_text(folder / INDEX, self.to_json())

    def by_status(self, *statuses: str) -> list[Entry]:
        return [e for e in self.entries if e.status in statuses]


def read_index(folder: str | Path) -> SweepIndex:
    path = Path(folder) / INDEX
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: line {err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a sweep index (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise ValueError(f"{path}: sweep index version {data.get('version')!r}; this workbench reads "
                         f"{VERSION}")
    known = set(Entry.__dataclass_fields__)
    entries = []
    for k, raw in enumerate(data.get("entries", [])):
        if not isinstance(raw, dict) or not set(raw) >= REQUIRED:
            raise ValueError(f"{path}: entries[{k}] lacks order, label, cell, repeat, config or seed")
        entries.append(Entry(**{key: value for key, value in raw.items() if key in known}))
    return SweepIndex(data.get("grid", {}), str(data.get("executor", "?")), entries,
                      str(data.get("status", "?")), data.get("started"), data.get("ended"),
                      list(data.get("notes", [])))
