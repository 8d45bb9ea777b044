"""Where a sampled recording's kernels are complete, so that the GPU's busy and idle time can
be judged there and nowhere else.

`workbench record --cuda-mode sampled` records kernels only while a window is open (`window`
spans on sampled/kernels); every launch is timed on the host (role launch: a host call, never
GPU time), but a kernel launched outside a window has no record. Judged, for each window: from
the start of the first kernel launched in it to the end of the last. Kernels of a stream run in
launch order, so every kernel launched before the window on that stream ended before the
first one began, and none launched after it started before the last one ended; a kernel of
another stream launched before the window may still run unseen at its start (the GPU would be
busier there than the trace shows). The windows are the recording's, not a GPU's: with several
GPUs each is judged over the same intervals, set by the kernels of all of them.

A kernel belongs to the window its launch was made in (the correlation id the kernel record
and the launch share); one whose launch is not in the trace, to the last window opened before
it started.

Contract: `judged_windows(trace) -> Intervals | None` (None: the trace's kernels are not
sampled, all of them are there).
"""

from __future__ import annotations

import numpy as np

from workbench.analysis.intervals import Intervals
from workbench.model import roles as rl
from workbench.model import tracks as tr
from workbench.trace.container import Trace


def judged_windows(trace: Trace) -> Intervals | None:
    spans = trace.spans
    windows = trace.span_mask(track=tr.SAMPLED_TRACK) if len(spans) else np.zeros(0, bool)
    if not windows.any():
        return None
    codes = rl.span_roles(trace)
    # One verdict asks for each GPU's utilisation, its steady window's and the idle causes: the
    # windows are worked out once a trace (span_roles' array is the same while its spans and
    # rules are, so it keys the cache).
    cached = trace.__dict__.get("_judged_windows")
    if cached is not None and cached[0] is codes:
        return cached[1]
    judged = _judged(trace, windows, codes)
    trace.__dict__["_judged_windows"] = (codes, judged)
    return judged


def _judged(trace: Trace, windows: np.ndarray, codes: np.ndarray) -> Intervals:
    spans = trace.spans
    order = np.argsort(spans.start_ns[windows], kind="stable")
    opened, closed = spans.start_ns[windows][order], spans.end_ns[windows][order]
    kernels = np.flatnonzero(codes == rl.CODE["kernel"])
    if not len(kernels):
        return Intervals.empty()
    # The launches made inside a window, by correlation id: a few reads of attrs, not all.
    launches = np.flatnonzero(codes == rl.CODE["launch"])
    at = np.searchsorted(opened, spans.start_ns[launches], side="right") - 1
    inside = (at >= 0) & (spans.start_ns[launches] <= closed[np.maximum(at, 0)])
    window_of: dict[int, int] = {}
    for i, w in zip(launches[inside].tolist(), at[inside].tolist(), strict=True):
        correlation = (spans.attrs[i] or {}).get("correlation")
        if correlation is not None:
            window_of[int(correlation)] = w
    by_start = np.searchsorted(opened, spans.start_ns[kernels], side="right") - 1
    which = np.array([window_of.get(int((spans.attrs[i] or {}).get("correlation", -1)), -1)
                      for i in kernels.tolist()], dtype=np.int64)
    which = np.where(which >= 0, which, by_start)
    keep = which >= 0  # a kernel before the first window: its launch was not sampled, by this trace
    first = np.full(len(opened), np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(len(opened), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, which[keep], spans.start_ns[kernels][keep])
    np.maximum.at(last, which[keep], spans.end_ns[kernels][keep])
    had = last > first
    return Intervals.of(first[had], last[had])
