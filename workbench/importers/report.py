"""What an importer kept and what it skipped, by reason, stored in `trace.meta["import"]`.

Foreign files are never perfect (log noise, truncated tails, tables an older exporter did
not write); an importer keeps what it understands and says, with counts and the first
place each reason occurred, what it left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ImportFailed(ValueError):
    """A file the importer cannot make a trace of; the message names the line or row."""


@dataclass
class ImportReport:
    format: str
    source: str
    skipped: dict[str, int] = field(default_factory=dict)
    first_at: dict[str, str] = field(default_factory=dict)  # reason -> where it first happened
    missing: list[str] = field(default_factory=list)  # optional parts absent from the file
    reconstructed: str = ""  # how times were inferred, when they were
    read: int = 0  # lines, events or rows looked at
    kept: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def skip(self, reason: str, where: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        self.first_at.setdefault(reason, where)

    def as_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "format": self.format, "source": self.source, "read": self.read, "kept": self.kept,
            "skipped": dict(self.skipped), "first_at": dict(self.first_at),
        }
        if self.missing:
            meta["missing"] = list(self.missing)
        if self.reconstructed:
            meta["reconstructed"] = self.reconstructed
        meta.update(self.extra)
        return meta
