"""CUDA activity records from the ring into spans, a drain at a time (convert.py hands them
over): kernels on `gpu<n>/stream/<s>`, copies on `gpu<n>/copy` (bytes, src_kind, dst_kind),
memsets on `gpu<n>/memset`, synchronisations on `gpu<n>/sync`, API calls on
`cuda/thread/<tid>`. A record's device times move onto the host clock by the clock reading
(WB_CLOCK: host minus device, read together) last sent before it.

Whole arrays at a time: a launch-bound program sends tens of thousands of records a second,
and a Python step per record would keep a core of the recorder's busy beside the program.

Contract: `DeviceRecords(recorder, offset_ns)`; `.feed(events, name, counts, threads) -> last
end (trace clock) or None`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import pairwise, repeat
from typing import Any

import numpy as np

from workbench.attach import ring as rg
from workbench.collectors.attribution import COPY_KINDS, MEMORY_KINDS, SYNC_KINDS
from workbench.events import NO_ID
from workbench.model import tracks as tr
from workbench.trace.recorder import Recorder

DEVICE_KINDS = (rg.KERNEL, rg.MEMCPY, rg.MEMSET, rg.SYNC, rg.API)  # in the order of their codes
COUNTS = {rg.KERNEL: "kernels", rg.MEMCPY: "copies", rg.MEMSET: "memsets", rg.SYNC: "synchronisations",
          rg.API: "CUDA API calls"}


class DeviceRecords:
    def __init__(self, recorder: Recorder, offset_ns: int = 0) -> None:
        self.recorder = recorder
        self.offset_ns = offset_ns  # CLOCK_MONOTONIC minus the trace clock
        self.offset: int | None = None  # host minus device, the last clock reading's

    def feed(self, events: np.ndarray, name: Callable[[int], str], counts: Counter[str],
             threads: set[int]) -> int | None:
        """Spans of the device records among `events` (ring order, clock readings included);
        returns the latest end among them, None when there were none."""
        kind = events["kind"]
        is_clock = kind == rg.CLOCK
        readings = events["t1"][is_clock].astype(np.int64) - events["t0"][is_clock].astype(np.int64)
        which = np.cumsum(is_clock) - 1  # the reading in force at each event (-1: one from before)
        known = which >= 0 if self.offset is None else np.ones(len(events), dtype=bool)
        before = np.int64(self.offset if self.offset is not None else 0)
        offsets = np.where(which >= 0, readings[np.maximum(which, 0)] if len(readings) else before, before)
        if len(readings):
            self.offset = int(readings[-1])
        records = ~is_clock
        lost = int((records & ~known).sum())
        if lost:  # the shim reads the clocks first: never, unless damaged
            counts["device records before a clock reading"] += lost
        records &= known
        if not records.any():
            return None
        shift = offsets - np.int64(self.offset_ns)
        start = events["t0"].astype(np.int64) + shift
        end = events["t1"].astype(np.int64) + shift
        # The records grouped by kind, each group in ring order: one stable sort, not a mask a kind.
        at = np.flatnonzero(records)
        at = at[np.argsort(kind[at], kind="stable")]
        bounds = np.searchsorted(kind[at], [*DEVICE_KINDS, DEVICE_KINDS[-1] + 1])
        for k, (first, last) in zip(DEVICE_KINDS, pairwise(bounds.tolist()), strict=True):
            if last > first:
                chosen = at[first:last]
                rows = self._rows(k, np.take(events, chosen), start[chosen], end[chosen], name, threads)
                self.recorder.add_spans(rows)
                counts[COUNTS[k]] += last - first
        return int(end[at].max())

    def _rows(self, kind: int, ev: np.ndarray, start: np.ndarray, end: np.ndarray, name: Callable[[int], str],
              threads: set[int]) -> list[Any]:
        aux, obj, tid, flags = ev["aux"], ev["obj"], ev["tid"], ev["flags"]
        device = (aux >> np.uint64(32)).astype(np.int64)
        stream = (aux & np.uint64(0xFFFFFFFF)).astype(np.int64).tolist()
        if kind == rg.KERNEL:
            tracks = each_label(aux, lambda a: tr.stream_track(a >> 32, a & 0xFFFFFFFF))
            names = each_label(obj, name)
            attrs: list[dict[str, Any]] = [{"correlation": c} for c in tid.tolist()]
        elif kind == rg.MEMCPY:
            tracks = each_label(device, tr.copy_track)
            names = each_label(flags, lambda f: COPY_KINDS.get(f & 31, "copy"))
            attrs = [{"bytes": b, "src_kind": MEMORY_KINDS.get((f >> 5) & 31, "unknown"),
                      "dst_kind": MEMORY_KINDS.get((f >> 10) & 31, "unknown"), "stream": s, "correlation": c}
                     for b, f, s, c in zip(obj.tolist(), flags.tolist(), stream, tid.tolist(), strict=True)]
        elif kind == rg.MEMSET:
            tracks = each_label(device, tr.memset_track)
            names = ["memset"] * len(ev)
            attrs = [{"bytes": b, "memory_kind": MEMORY_KINDS.get(f, "unknown"), "stream": s,
                      "correlation": c}
                     for b, f, s, c in zip(obj.tolist(), flags.tolist(), stream, tid.tolist(), strict=True)]
        elif kind == rg.SYNC:
            tracks = each_label(device, lambda d: tr.gpu_track(d, "sync"))
            names = each_label(obj, lambda o: SYNC_KINDS.get(o, "synchronize"))
            attrs = [{"stream": s, "correlation": c} for s, c in zip(stream, tid.tolist(), strict=True)]
        else:  # an API call, on its thread's CUDA track
            threads.update(np.unique(tid).tolist())
            tracks = each_label(tid, lambda t: tr.cuda_track(tr.thread_track(t)))
            names = each_label(obj, name)
            attrs = [{"correlation": a} for a in aux.tolist()]
        return list(zip(tracks, names, start.tolist(), end.tolist(), repeat(NO_ID), repeat(NO_ID), attrs))


def each_label(values: np.ndarray, label: Callable[[int], str]) -> list[str]:
    """label(v) for each value, worked out once for each distinct one."""
    distinct, inverse = np.unique(values, return_inverse=True)
    labels = np.array([label(int(v)) for v in distinct.tolist()], dtype=object)
    return labels[inverse.ravel()].tolist()
