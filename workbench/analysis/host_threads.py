"""Which host thread each span belongs to, and how to name it in a sentence.

A CUDA or OS call sits on `cuda/<thread>` or `os/<thread>` (model/tracks.py): its thread is
the caller. A range or op sits on the thread's own track. A lock's own spans (`mutex/...`,
`lock/...`) belong to the worker that recorded them where the span says, else to the lock's
track. Device spans (kernels, copies, memsets, counters) and a recording's sampling windows
belong to no host thread.

Contract: `span_threads(trace) -> (array of thread codes per span, -1 for device spans;
tuple of thread track names)`, `thread_label(track, names)`.
"""

from __future__ import annotations

import numpy as np

from workbench.model import tracks as tr
from workbench.trace.container import Trace


def span_threads(trace: Trace) -> tuple[np.ndarray, tuple[str, ...]]:
    """Each span's host thread as an index into the returned names (-1: a device span)."""
    spans = trace.spans
    text = trace.strings.values
    threads: dict[str, int] = {}
    per_track = np.full(len(text), -1, dtype=np.int64)
    for code in np.unique(spans.track).tolist():
        t = tr.parse(text[code])
        if t.on_device or t.kind in (tr.COUNTERS, tr.SAMPLED):
            continue
        caller = t.caller
        name = tr.build(caller) if caller is not None else text[code]
        per_track[code] = threads.setdefault(name, len(threads))
    out = per_track[spans.track] if len(spans) else np.zeros(0, np.int64)
    names = list(threads)
    # A worker's lock spans are that worker's thread's.
    used = np.unique(spans.track).tolist()
    lock_tracks = [c for c in used if tr.parse(text[c]).kind in (tr.MUTEX, tr.LOCK)]
    on_lock = np.isin(spans.track, lock_tracks) & (spans.worker >= 0)
    for w in np.unique(spans.worker[on_lock]).tolist():
        name = tr.worker_track(int(w))
        if name not in threads:
            threads[name] = len(names)
            names.append(name)
        out[on_lock & (spans.worker == w)] = threads[name]
    return out, tuple(names)


def thread_label(track: str, names: dict[str, str] | None = None) -> str:
    """"host thread 1234 (loader)" for a foreign thread, the track itself otherwise."""
    t = tr.parse(track)
    label = f"host thread {t.name}" if t.kind == tr.THREAD else track
    given = (names or {}).get(track)
    return f"{label} ({given})" if given and given != t.name else label
