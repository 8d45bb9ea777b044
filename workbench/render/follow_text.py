"""The live text view of `workbench follow`: a Gantt of the lock and barrier in characters,
the running verdict under it, and a line of what was read.

One row a lock or barrier track, and one for the waits for each lock, over the last
`WINDOW_S` seconds of the trace: `#` where the lock is held, `-` where someone waits for it,
`=` where a party waits at the barrier, `.` where nothing is. Rows come from the spans'
roles (model/roles.py): whatever the trace holds of lock holds, lock waits and barrier waits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.model.roles import ROLE_NAMES, span_roles
from workbench.trace.container import Trace

WINDOW_S = 60.0
COLUMNS = 60
MARKS = {"lock_hold": "#", "lock_wait": "-", "barrier_wait": "="}
ORDER = ("lock_hold", "lock_wait", "barrier_wait")  # a column shows the first of these it has
MAX_ROWS = 8


def gantt_rows(trace: Trace, columns: int = COLUMNS, window_s: float = WINDOW_S) -> list[str]:
    """The Gantt's rows, each `label |marks|`; none when the trace has no such spans."""
    if not len(trace.spans):
        return []
    codes = span_roles(trace)
    wanted = {ROLE_NAMES.index(r): r for r in MARKS}
    mask = np.isin(codes, list(wanted))
    if not mask.any():
        return []
    end = int(trace.spans.end_ns.max())
    start = max(int(trace.spans.start_ns.min()), end - int(window_s * 1e9))
    width = max(end - start, 1)
    rows: dict[str, list[str]] = {}
    for i in np.flatnonzero(mask):
        track = trace.strings.values[trace.spans.track[i]]
        s, e = int(trace.spans.start_ns[i]), int(trace.spans.end_ns[i])
        if e < start:
            continue
        role = wanted[int(codes[i])]
        # Waits get a row of their own: under a lock held back to back they would never show.
        cells = rows.setdefault(f"{track} waits" if role == "lock_wait" else track, [" "] * columns)
        first = max(0, (s - start) * columns // width)
        last = min(columns - 1, max(first, -(-(e - start) * columns // width) - 1))
        for c in range(first, last + 1):
            if cells[c] == " " or ORDER.index(role) < ORDER.index(_role_of(cells[c])):
                cells[c] = MARKS[role]
    label = max((len(t) for t in rows), default=0)
    out = [f"{track:<{label}} |{''.join(c if c != ' ' else '.' for c in cells)}|"
           for track, cells in sorted(rows.items())[:MAX_ROWS]]
    span_s = width / 1e9
    out.append(f"{'':<{label}}  last {span_s:.1f} s: # lock held, - lock waited for, = barrier waited at")
    return out


def _role_of(mark: str) -> str:
    return next(r for r, m in MARKS.items() if m == mark)


def status_line(progress: Any, idle_s: float) -> str:
    p = progress
    parts = [f"{p.lines} lines read", f"{p.calls} calls", f"{p.spans} spans"]
    if p.segments > 1:
        parts.append(f"{p.segments} daemon runs (restarts)")
    if p.files > 1:
        parts.append(f"{p.files} files (rotations)")
    if idle_s >= 1:
        parts.append(f"quiet {idle_s:.0f} s")
    return " · ".join(parts)


def render_follow(trace: Trace | None, progress: Any, idle_s: float, columns: int = COLUMNS) -> list[str]:
    """The whole view: Gantt rows, the verdict's headline, the status line."""
    rows = gantt_rows(trace, columns) if trace is not None else []
    return [*rows, f"verdict: {progress.headline}", status_line(progress, idle_s)]
