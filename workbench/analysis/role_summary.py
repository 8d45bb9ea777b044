"""What a trace holds, by role: the summary of a program that is not our pipeline.

A foreign trace has no partitions, workers or mutex, so the pipeline summary (partitions a
minute, phases, holds) has nothing to say about it; this says what it does have: how many
spans of each role, how long they took in all, and which names took longest.

Contract: `role_summary(trace) -> RoleSummary`; `is_pipeline(trace)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.summary import run_window_ns
from workbench.model.roles import CODE, ROLE_NAMES, span_roles
from workbench.trace.container import Trace

TOP = 3  # names shown per role


@dataclass(frozen=True)
class RoleTotal:
    role: str
    spans: int
    total_ms: float  # summed durations (spans of one role may overlap: not wall time)
    longest: tuple[tuple[str, int, float], ...]  # (name, spans, total ms), largest first


@dataclass(frozen=True)
class RoleSummary:
    source: str  # the format it was imported from, or "" for our own trace
    window_s: float
    tracks: int
    roles: tuple[RoleTotal, ...]  # in ROLE_NAMES order


def is_pipeline(trace: Trace, codes: np.ndarray | None = None) -> bool:
    """Whether the trace holds a pipeline's consumer threads (our runs, cuzk logs)."""
    codes = span_roles(trace) if codes is None else codes
    return bool((codes == CODE["consumer"]).any())


def role_summary(trace: Trace) -> RoleSummary:
    codes = span_roles(trace)
    spans = trace.spans
    durations = (spans.end_ns - spans.start_ns) / 1e6
    totals = []
    for code in np.unique(codes).tolist():
        mask = codes == code
        names, inverse = np.unique(spans.name[mask], return_inverse=True)
        per_name = np.bincount(inverse, weights=durations[mask])
        counts = np.bincount(inverse)
        order = np.argsort(-per_name, kind="stable")[:TOP]
        text = trace.strings.values
        longest = tuple((text[int(names[k])], int(counts[k]), float(per_name[k])) for k in order)
        totals.append(RoleTotal(ROLE_NAMES[code], int(mask.sum()), float(durations[mask].sum()), longest))
    start, end = run_window_ns(trace)
    imported = trace.meta.get("import")
    source = str(imported.get("format", "")) if isinstance(imported, dict) else ""
    used = np.unique(spans.track) if len(spans) else np.zeros(0, np.int32)
    return RoleSummary(source, (end - start) / 1e9, len(used), tuple(totals))
