"""Hand-offs between spans: drawn as flow arrows by the Gantt and by trace viewers (the Chrome
export writes them as flow events).

Found by role (model/roles.py), so they appear on any trace that has the roles, not only on
the workbench's own:

- lock: one holder releases a lock and the next holder acquires it (consecutive `lock_hold`
  spans of one lock, by lock identity, whose holders differ or are not known; the holder is the
  span's worker, else the thread in its `thread` attribute, as `workbench record` writes);
- partition: a producer finishes a unit (the last producer span of a partition) and a
  consumer picks it up (the first consumer span of that partition);
- launch: a host CUDA call and the GPU work it issued, by the correlation id both record
  (as the PyTorch profiler draws them, category `ac2g`).

Contract: `handoffs(trace) -> list[Handoff]` of span index pairs, in time order of the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from workbench.model.roles import CODE, lock_identity, span_roles, trace_rules
from workbench.trace.container import Trace

LOCK, PARTITION, LAUNCH = "lock_handoff", "partition_handoff", "ac2g"
HOST_CALLS = ("launch", "sync", "runtime")  # the call a device span's correlation names, first found first


@dataclass(frozen=True)
class Handoff:
    kind: str  # LOCK, PARTITION or LAUNCH
    source: int  # span index: the release, or the producer's last span
    target: int  # span index: the next acquire, or the consumer's first span
    label: str  # the lock's identity, "partition <n>" or "ac2g"


def handoffs(trace: Trace, codes: np.ndarray | None = None) -> list[Handoff]:
    codes = span_roles(trace) if codes is None else codes
    found = _lock_handoffs(trace, codes) + _partition_handoffs(trace, codes) + _launches(trace, codes)
    return sorted(found, key=lambda h: (int(trace.spans.end_ns[h.source]), h.kind, h.target))


def _lock_handoffs(trace: Trace, codes: np.ndarray) -> list[Handoff]:
    spans, text = trace.spans, trace.strings.values
    holds = np.flatnonzero(codes == CODE["lock_hold"])
    if not len(holds):
        return []
    rules = trace_rules(trace)
    by_lock: dict[str, list[int]] = {}
    identities: dict[tuple[int, int], str] = {}
    for i in holds.tolist():
        key = (int(spans.track[i]), int(spans.name[i]))
        if key not in identities:
            identities[key] = lock_identity(text[key[0]], text[key[1]], rules) or text[key[0]]
        by_lock.setdefault(identities[key], []).append(i)
    found = []
    for lock, members in by_lock.items():
        members.sort(key=lambda i: (int(spans.start_ns[i]), i))
        for a, b in pairwise(members):
            holder_a, holder_b = _holder(trace, a), _holder(trace, b)
            if holder_a is not None and holder_a == holder_b:
                continue  # the same holder again: no hand-off
            found.append(Handoff(LOCK, a, b, lock))
    return found


def _holder(trace: Trace, i: int) -> tuple[str, int] | None:
    """Who held a lock: the worker, else the thread a recording names (`thread` attribute)."""
    worker = int(trace.spans.worker[i])
    if worker >= 0:
        return ("worker", worker)
    thread = (trace.spans.attrs[i] or {}).get("thread")
    return ("thread", thread) if isinstance(thread, int) and not isinstance(thread, bool) else None


def _partition_handoffs(trace: Trace, codes: np.ndarray) -> list[Handoff]:
    spans = trace.spans
    with_partition = spans.partition >= 0
    producers = np.flatnonzero(with_partition & (codes == CODE["producer"]))
    consumers = np.flatnonzero(with_partition & (codes == CODE["consumer"]))
    if not len(producers) or not len(consumers):
        return []
    last: dict[int, int] = {}
    for i in producers.tolist():
        p = int(spans.partition[i])
        if p not in last or spans.end_ns[i] > spans.end_ns[last[p]]:
            last[p] = i
    first: dict[int, int] = {}
    for i in consumers.tolist():
        p = int(spans.partition[i])
        if p not in first or spans.start_ns[i] < spans.start_ns[first[p]]:
            first[p] = i
    return [Handoff(PARTITION, last[p], first[p], f"partition {p}") for p in sorted(last) if p in first]


def _launches(trace: Trace, codes: np.ndarray) -> list[Handoff]:
    attrs = trace.spans.attrs

    def correlation(i: int) -> int | None:
        value = (attrs[i] or {}).get("correlation")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    device = np.flatnonzero(np.isin(codes, [CODE[r] for r in ("kernel", "copy", "memset")])).tolist()
    wanted = {c for i in device if (c := correlation(i)) is not None}
    caller: dict[int, int] = {}
    for role in HOST_CALLS if wanted else ():
        for i in np.flatnonzero(codes == CODE[role]).tolist():
            c = correlation(i)
            if c in wanted and c not in caller:
                caller[c] = i
    return [Handoff(LAUNCH, caller[c], i, LAUNCH) for i in device if (c := correlation(i)) in caller]
