"""What any trace the workbench accepts must satisfy, whoever wrote the file it came from.

Shared by the property tests over mutated real files and the attack harness
(benchmarks/attacks.py): a loaded trace either meets these or the loader should have refused it.
"""

from __future__ import annotations

import math

import numpy as np

TIME_LIMIT = 2**62  # the loaders' own bound on a time (trace/store_read.py)


def trace_faults(trace) -> list[str]:
    """What is wrong with a loaded trace: column lengths, string indices, times, and the
    summary's own figures (no negative time, no share above the whole)."""
    faults: list[str] = []
    strings = len(trace.strings.values)
    tables = {
        "spans": (trace.spans, ("track", "name", "start_ns", "end_ns", "partition", "worker")),
        "instants": (trace.instants, ("track", "name", "ts_ns", "partition", "worker")),
        "counters": (trace.counters, ("track", "name", "ts_ns", "value")),
    }
    for table, (columns, names) in tables.items():
        n = len(columns)
        for name in names:
            column = getattr(columns, name)
            if not isinstance(column, np.ndarray) or column.ndim != 1 or len(column) != n:
                faults.append(f"{table}.{name}: not a column of {n} rows")
        if hasattr(columns, "attrs") and len(columns.attrs) != n:
            faults.append(f"{table}.attrs: {len(columns.attrs)} entries for {n} rows")
        for name in ("track", "name"):
            column = getattr(columns, name)
            if n and (column.min() < 0 or column.max() >= strings):
                faults.append(f"{table}.{name}: an index outside the string table")
    spans = trace.spans
    if len(spans):
        if (spans.end_ns < spans.start_ns).any():
            faults.append("a span ends before it starts")
        if max(abs(int(spans.start_ns.min())), abs(int(spans.end_ns.max()))) > TIME_LIMIT:
            faults.append("a span time beyond 2^62 ns")
    for table in (trace.instants, trace.counters):
        if len(table) and max(abs(int(table.ts_ns.min())), abs(int(table.ts_ns.max()))) > TIME_LIMIT:
            faults.append("an instant or counter time beyond 2^62 ns")
    faults += summary_faults(trace)
    return faults


def summary_faults(trace) -> list[str]:
    from workbench.analysis.role_summary import is_pipeline, role_summary
    from workbench.analysis.summary import summarize

    faults = []
    if is_pipeline(trace):
        summary = summarize(trace)
        if not 0 <= summary.mutex_held_fraction <= 1 + 1e-9:
            faults.append(f"mutex held {summary.mutex_held_fraction:.3g} of the wall time")
        if not summary.wall_s >= 0 or not math.isfinite(summary.wall_s):
            faults.append(f"wall time {summary.wall_s}")
        for stats in summary.phases:
            if not 0 <= stats.min_ms <= stats.max_ms or not math.isfinite(stats.total_ms):
                faults.append(f"phase {stats.phase}: times {stats.min_ms}..{stats.max_ms} ms")
    else:
        roles = role_summary(trace)
        if not roles.window_s >= 0:
            faults.append(f"window of {roles.window_s} s")
        for total in roles.roles:
            if not total.total_ms >= 0:
                faults.append(f"role {total.role}: {total.total_ms} ms")
    return faults
