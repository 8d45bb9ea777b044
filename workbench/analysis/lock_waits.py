"""Lock contention on host threads: how long threads waited on locks, conditions, barriers.

Reads spans of role lock_wait, cond_wait and barrier_wait (contended pthread calls of an OS
runtime trace, a foreign lock's `wait` spans, the pipeline's own mutex and barrier waits).
A wait's lock is its identity where the trace knows it (model/roles.py `lock_identity`:
the mutex's GPU, a lock track's name, a role rule's `lock`), else the call it waited in.

Contract: `lock_waits(trace) -> LockWaits | None` (None: no such spans).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.distribution import Distribution
from workbench.analysis.host_threads import span_threads, thread_label
from workbench.model import roles as rl
from workbench.trace.container import Trace

ROLES = rl.WAIT_ROLES
EVIDENCE = 5


@dataclass(frozen=True)
class WaitGroup:
    key: str  # a thread's label, or a lock's identity
    waits: Distribution
    longest: int  # span index


@dataclass(frozen=True)
class LockWaits:
    waits: Distribution
    by_role: dict[str, float]  # ms waited in each role
    threads: tuple[WaitGroup, ...]  # most waited first
    locks: tuple[WaitGroup, ...]
    longest: tuple[int, ...]  # span indices, longest first


def lock_waits(trace: Trace) -> LockWaits | None:
    codes = rl.span_roles(trace)
    mask = rl.role_mask(trace, *ROLES, codes=codes)
    if not mask.any():
        return None
    spans, text = trace.spans, trace.strings.values
    index = np.flatnonzero(mask)
    ns = spans.end_ns[index] - spans.start_ns[index]
    thread, names = span_threads(trace)
    rules = rl.trace_rules(trace)
    by_thread: dict[str, list[int]] = {}
    by_lock: dict[str, list[int]] = {}
    for k, i in enumerate(index.tolist()):
        t = int(thread[i])
        who = thread_label(names[t], trace.thread_names) if t >= 0 else "unknown thread"
        track, name = text[spans.track[i]], text[spans.name[i]]
        lock = rl.lock_identity(track, name, rules) or name
        by_thread.setdefault(who, []).append(k)
        by_lock.setdefault(lock, []).append(k)
    roles = np.array(rl.ROLE_NAMES)[codes[index]]
    order = np.argsort(-ns, kind="stable")
    return LockWaits(
        waits=Distribution.of_ns(ns),
        by_role={r: float(ns[roles == r].sum()) / 1e6 for r in ROLES if (roles == r).any()},
        threads=_groups(by_thread, ns, index), locks=_groups(by_lock, ns, index),
        longest=tuple(int(index[k]) for k in order[:EVIDENCE].tolist()),
    )


def _groups(groups: dict[str, list[int]], ns: np.ndarray, index: np.ndarray) -> tuple[WaitGroup, ...]:
    out = []
    for key, members in groups.items():
        m = np.array(members)
        out.append(WaitGroup(key, Distribution.of_ns(ns[m]), int(index[m[int(np.argmax(ns[m]))]])))
    out.sort(key=lambda g: -g.waits.total_ms)
    return tuple(out)
