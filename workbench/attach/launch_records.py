"""Host-timed kernel launches and sampling windows from the ring into spans, a drain at a time
(convert.py hands them over; launches.h sends them under `--cuda-mode launches` or `sampled`).

- A launch (LAUNCH: the call's entry and exit on the host clock, the launching thread, the
  kernel's name, the call's name and correlation id) is a span of the call on
  `cuda/thread/<tid>`, named for the call (`cudaLaunchKernel_v7000`: role launch, a host call,
  never GPU time), attrs `kernel` and `correlation`; counted a kernel name at a time.
- A window (WINDOW) is a `window` span on `sampled/kernels`: the time in which kernel records
  were enabled, attrs `number` and `switch_ns` (what the two CUPTI calls that opened and
  closed it took).

Whole arrays at a time, as device_records.py: a launch-bound program sends tens of thousands a
second. Contract: `feed_launches(recorder, events, name, counts, by_kernel, threads, offset_ns)`,
`feed_windows(recorder, events, counts, offset_ns)`; each returns the latest end or None.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import repeat

import numpy as np

from workbench.attach.device_records import each_label
from workbench.events import NO_ID
from workbench.model import tracks as tr
from workbench.trace.recorder import Recorder

LOW32 = np.uint64(0xFFFFFFFF)


def feed_launches(recorder: Recorder, events: np.ndarray, name: Callable[[int], str], counts: Counter[str],
                  by_kernel: Counter[str], threads: set[int], offset_ns: int = 0) -> int | None:
    if not len(events):
        return None
    tid, aux, obj = events["tid"], events["aux"], events["obj"]
    start = events["t0"].astype(np.int64) - np.int64(offset_ns)
    end = events["t1"].astype(np.int64) - np.int64(offset_ns)
    tracks = each_label(tid, lambda t: tr.cuda_track(tr.thread_track(t)))
    calls = each_label(aux >> np.uint64(32), name)
    kernels, inverse = np.unique(obj, return_inverse=True)
    kernel_names = [name(int(k)) for k in kernels.tolist()]
    for k, n in zip(kernel_names, np.bincount(inverse.ravel(), minlength=len(kernels)).tolist(), strict=True):
        by_kernel[k] += n
    per_span = np.array(kernel_names, dtype=object)[inverse.ravel()].tolist()
    attrs = [{"kernel": k, "correlation": c} for k, c in zip(per_span, (aux & LOW32).tolist(), strict=True)]
    recorder.add_spans(list(zip(tracks, calls, start.tolist(), end.tolist(), repeat(NO_ID), repeat(NO_ID),
                                attrs)))
    threads.update(np.unique(tid).tolist())
    counts["kernel launches"] += len(events)
    return int(end.max())


def feed_windows(recorder: Recorder, events: np.ndarray, counts: Counter[str],
                 offset_ns: int = 0) -> int | None:
    if not len(events):
        return None
    start = events["t0"].astype(np.int64) - np.int64(offset_ns)
    end = events["t1"].astype(np.int64) - np.int64(offset_ns)
    attrs = [{"number": n, "switch_ns": s} for n, s in zip(events["obj"].tolist(), events["aux"].tolist(),
                                                            strict=True)]
    recorder.add_spans(list(zip(repeat(tr.SAMPLED_TRACK), repeat("window"), start.tolist(), end.tolist(),
                                repeat(NO_ID), repeat(NO_ID), attrs)))
    counts["sampling windows"] += len(events)
    counts["sampled ns"] += int((end - start).clip(min=0).sum())
    counts["sampling switch ns"] += int(events["aux"].sum())
    return int(end.max())
