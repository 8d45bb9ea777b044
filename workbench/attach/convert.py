"""Ring events into spans on the track grammar, drain after drain (the live view reads them
as they come; model/tracks.py and model/roles.py give them their roles).

- A lock of the program is `lock/<address>` (`<pid>:<address>` for a child process's) with
  `wait` (call to acquired, only when the lock was not had at once) and `hold` (acquired to
  released) spans; attrs `thread` (the
  owner), `from` (the thread that released it last, when another one: the hand-off), `try`
  for a trylock, `cond` for a hold taken back at the end of a condition wait. A name the
  program gives the mutex through NVTX becomes a role rule naming the lock (`lock_rules`).
- Condition and semaphore waits: `pthread_cond_wait`, `pthread_cond_timedwait`, `sem_wait`
  ... on `os/thread/<tid>` (role cond_wait), attrs the condition, its mutex, `timed_out`.
- NVTX ranges on `thread/<tid>`, attrs `domain`; marks as instants there.
- CUDA activity: kernels on `gpu<n>/stream/<s>`, copies on `gpu<n>/copy` (bytes, src_kind,
  dst_kind), memsets on `gpu<n>/memset`, synchronisations on `gpu<n>/sync`, API calls on
  `cuda/thread/<tid>`; device times moved onto the host clock by the offsets the shim sent
  (device_records.py, a drain's records at a time).
- Kernel launches timed on the host (`--cuda-mode launches`, `sampled`): the launch call on
  `cuda/thread/<tid>`, attrs `kernel`; sampling windows on `sampled/kernels`
  (launch_records.py).

The ring's order is the locks' order (the shim sends a release before the real unlock and an
acquire after the real lock), so hand-offs are read off in one pass. Times are CLOCK_MONOTONIC
ns minus `offset_ns` (the trace clock's distance from it: 0 for the monotonic clock).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from workbench.attach import ring as rg
from workbench.attach.device_records import DeviceRecords
from workbench.attach.launch_records import feed_launches, feed_windows
from workbench.model import tracks as tr
from workbench.trace.recorder import Recorder

COND_NAMES = {0: "pthread_cond_wait", rg.F_TIMED: "pthread_cond_timedwait"}
SEM_NAMES = {0: "sem_wait", rg.F_TIMED: "sem_timedwait"}
OVERHEAD_KINDS = {0: "unknown", 1: "driver compiler", 1 << 16: "buffer flush", 2 << 16: "instrumentation",
                  3 << 16: "resource", 4 << 16: "module loading", 5 << 16: "lazy function loading",
                  6 << 16: "command buffer full", 7 << 16: "activity buffer request",
                  8 << 16: "UVM activity init"}  # CUpti_ActivityOverheadKind
# A drain's events by kind: host (below KERNEL), device (KERNEL to CLOCK), OVERHEAD, host-timed
# launches and sampling windows (LAUNCH, WINDOW), unknown.
GROUP_BOUNDS = np.array([rg.KERNEL - 1, rg.CLOCK, rg.OVERHEAD, rg.WINDOW])


class Converter:
    def __init__(self, recorder: Recorder, offset_ns: int = 0, main_pid: int = 0) -> None:
        self.recorder = recorder
        self.offset_ns = offset_ns
        self.main_pid = main_pid
        self.counts: Counter[str] = Counter()
        self.strings: dict[int, str] = {}
        self.domains: dict[int, str] = {0: "default"}
        self.lock_names: dict[str, str] = {}  # lock track -> the program's name for it
        self.threads: set[int] = set()
        self.thread_names: dict[int, str] = {}
        self.notes: list[str] = []  # what the shims said (a CUPTI call that failed, ...)
        self.launches: Counter[str] = Counter()  # host-timed kernel launches by kernel name
        self.last_ns = 0
        self._holds: dict[tuple[int, int, int], list[tuple[int, dict[str, Any]]]] = {}
        self._released_by: dict[tuple[int, int], int] = {}
        self._stacks: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
        self._started: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        self._pending_names: list[rg.Text] = []
        self._device = DeviceRecords(recorder, offset_ns)

    def _t(self, ns: int) -> int:
        return ns - self.offset_ns

    def lock_track(self, pid: int, address: int) -> str:
        here = f"{address:#x}" if pid in (self.main_pid, 0) else f"{pid}:{address:#x}"
        return tr.lock_track(here)

    def feed(self, drained: rg.Drained) -> None:
        for text in drained.texts:
            self._text(text)
        events = drained.events
        if not len(events):
            return
        self.counts["events"] += len(events)
        # Host events, device records with their clock readings, CUPTI's overheads, unknown
        # kinds: one stable sort by that group keeps each group in ring order (np.take: a
        # structured array's rows by index several times faster than by a mask or [index]).
        group = np.searchsorted(GROUP_BOUNDS, events["kind"]).astype(np.uint8)
        order = np.argsort(group, kind="stable")
        ends = np.cumsum(np.bincount(group, minlength=len(GROUP_BOUNDS) + 1)).tolist()
        host = np.take(events, order[:ends[0]])  # device times are another clock's (device_records.py)
        if len(host):
            self.last_ns = max(self.last_ns, self._t(int(host["t0"].max())), self._t(int(host["t1"].max())))
        if ends[1] > ends[0]:
            device = np.take(events, order[ends[0]:ends[1]])
            last = self._device.feed(device, self._name, self.counts, self.threads)
            if last is not None:
                self.last_ns = max(self.last_ns, last)
        if ends[2] > ends[1]:
            self._overheads(np.take(events, order[ends[1]:ends[2]]))
        if ends[3] > ends[2]:
            self._host_timed(np.take(events, order[ends[2]:ends[3]]))
        if ends[4] > ends[3]:  # those below KERNEL are counted in the loop
            self.counts["unknown events"] += ends[4] - ends[3]
        handlers = {rg.LOCK: self._lock, rg.UNLOCK: self._unlock, rg.COND: self._cond, rg.SEM: self._sem,
                    rg.PUSH: self._push, rg.POP: self._pop, rg.START: self._start, rg.END: self._end,
                    rg.MARK: self._mark}
        for kind, flags, tid, pid, obj, aux, t0, t1 in zip(
                *(host[f].tolist() for f in ("kind", "flags", "tid", "pid", "obj", "aux", "t0", "t1")),
                strict=True):
            handler = handlers.get(kind)
            if handler is not None:
                handler(flags, tid, pid, obj, aux, t0, t1)
            else:
                self.counts["unknown events"] += 1

    # -- texts ------------------------------------------------------------------------------
    def _text(self, text: rg.Text) -> None:
        if text.kind == rg.T_STRING:
            self.strings[text.id] = text.text
        elif text.kind == rg.T_DOMAIN:
            self.domains[text.id] = text.text
        elif text.kind == rg.T_THREAD:
            name = text.text or self.strings.get(text.ref, "")
            if name:
                self.thread_names[text.tid] = name
        elif text.kind == rg.T_NOTE:
            if text.text not in self.notes:
                self.notes.append(text.text)
        elif text.kind == rg.T_OBJECT:
            name = text.text or self.strings.get(text.ref, "")
            if name:
                self.lock_names[self.lock_track(text.pid, text.id)] = name
                self.counts["named objects"] += 1

    def _name(self, string_id: int) -> str:
        return self.strings.get(string_id, f"string {string_id}")

    # -- locks ------------------------------------------------------------------------------
    def _lock(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        self.threads.add(tid)
        track = self.lock_track(pid, obj)
        attrs: dict[str, Any] = {"thread": tid}
        previous = self._released_by.get((pid, obj))
        if previous is not None and previous != tid:
            attrs["from"] = previous
        if flags & rg.F_TRY:
            attrs["try"] = True
        if flags & rg.F_COND:
            attrs["cond"] = True
        elif not flags & rg.F_TRY and (flags & rg.F_WAITED or t1 > t0):  # taken at once: no wait
            self.recorder.add_span(track, "wait", self._t(t0), self._t(t1), attrs=dict(attrs))
            self.counts["lock waits"] += 1
        self._holds.setdefault((pid, tid, obj), []).append((self._t(t1), attrs))
        self.counts["lock acquires"] += 1

    def _unlock(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        self._released_by[(pid, obj)] = tid
        stack = self._holds.get((pid, tid, obj))
        if not stack:
            self.counts["releases without a recorded acquire"] += 1
            return
        start, attrs = stack.pop()
        if stack:  # a recursive mutex: the outer hold goes on
            return
        del self._holds[(pid, tid, obj)]
        self.recorder.add_span(self.lock_track(pid, obj), "hold", start, self._t(t0), attrs=attrs)
        self.counts["lock holds"] += 1

    def _cond(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        attrs: dict[str, Any] = {"cond": f"{obj:#x}", "mutex": self.lock_track(pid, aux)}
        if flags & rg.F_TIMEOUT:
            attrs["timed_out"] = True
        name = COND_NAMES[flags & rg.F_TIMED]
        self.recorder.add_span(tr.os_track(tr.thread_track(tid)), name, self._t(t0), self._t(t1), attrs=attrs)
        self.counts["condition waits"] += 1

    def _sem(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        attrs: dict[str, Any] = {"semaphore": f"{obj:#x}"}
        if flags & rg.F_TIMEOUT:
            attrs["timed_out"] = True
        name = SEM_NAMES[flags & rg.F_TIMED]
        self.recorder.add_span(tr.os_track(tr.thread_track(tid)), name, self._t(t0), self._t(t1), attrs=attrs)
        self.counts["semaphore waits"] += 1

    # -- NVTX -------------------------------------------------------------------------------
    def _push(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        self.threads.add(tid)
        self._stacks.setdefault((pid, tid, obj), []).append((self._t(t0), aux))

    def _pop(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        stack = self._stacks.get((pid, tid, obj))
        if not stack:
            self.counts["NVTX pops without a push"] += 1
            return
        start, name = stack.pop()
        depth = len(stack)
        self.recorder.add_span(tr.thread_track(tid), self._name(name), start, self._t(t0),
                               attrs={"domain": self.domains.get(obj, f"#{obj}"), "depth": depth})
        self.counts["NVTX ranges"] += 1

    def _start(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        self.threads.add(tid)
        self._started[(pid, t1)] = (self._t(t0), aux, obj, tid)

    def _end(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        found = self._started.pop((pid, aux), None)
        if found is None:
            self.counts["NVTX range ends without a start"] += 1
            return
        start, name, domain, starter = found
        attrs: dict[str, Any] = {"domain": self.domains.get(domain, f"#{domain}"), "range": "start_end"}
        if starter != tid:
            attrs["ended_by"] = tid
        self.recorder.add_span(tr.thread_track(starter), self._name(name), start, self._t(t0), attrs=attrs)
        self.counts["NVTX ranges"] += 1

    def _mark(self, flags: int, tid: int, pid: int, obj: int, aux: int, t0: int, t1: int) -> None:
        self.recorder.instant(tr.thread_track(tid), self._name(aux), ts_ns=self._t(t0),
                              attrs={"domain": self.domains.get(obj, f"#{obj}")})
        self.counts["NVTX marks"] += 1

    def _host_timed(self, events: np.ndarray) -> None:
        """Kernel launches timed on the host and sampling windows (launch_records.py)."""
        is_launch = events["kind"] == rg.LAUNCH
        found = [feed_launches(self.recorder, events[is_launch], self._name, self.counts, self.launches,
                               self.threads, self.offset_ns),
                 feed_windows(self.recorder, events[~is_launch], self.counts, self.offset_ns)]
        self.last_ns = max([self.last_ns, *(f for f in found if f is not None)])

    def _overheads(self, events: np.ndarray) -> None:
        """CUPTI's records of its own overhead (`--cuda-kinds ...,overhead`): counted and summed by
        kind, for telling what the recording costs a program (no spans: CUPTI's time, not the
        program's)."""
        took = (events["t1"].astype(np.int64) - events["t0"].astype(np.int64)).clip(min=0)
        for kind in np.unique(events["obj"]).tolist():
            chosen = events["obj"] == kind
            name = OVERHEAD_KINDS.get(kind, f"kind {kind}")
            self.counts[f"CUPTI overhead: {name}"] += int(chosen.sum())
            self.counts[f"CUPTI overhead ns: {name}"] += int(took[chosen].sum())

    # -- the end ----------------------------------------------------------------------------
    def finish(self, end_ns: int) -> None:
        """Close what the program left open (it ended, or died, holding a lock or inside a
        range): such spans end at `end_ns`, attrs `unfinished`."""
        end_ns = max(end_ns, self.last_ns)
        for (pid, _tid, obj), held in sorted(self._holds.items()):
            since, attrs = held[0]
            self.recorder.add_span(self.lock_track(pid, obj), "hold", since, end_ns,
                                   attrs={**attrs, "unfinished": True})
            self.counts["lock holds"] += 1
            self.counts["unfinished"] += 1
        self._holds.clear()
        for (_pid, tid, domain), stack in sorted(self._stacks.items()):
            for depth, (start, name) in enumerate(stack):
                attrs = {"domain": self.domains.get(domain, f"#{domain}"), "depth": depth, "unfinished": True}
                self.recorder.add_span(tr.thread_track(tid), self._name(name), start, end_ns, attrs=attrs)
                self.counts["NVTX ranges"] += 1
                self.counts["unfinished"] += 1
        self._stacks.clear()
        for start, name, domain, tid in self._started.values():
            attrs = {"domain": self.domains.get(domain, f"#{domain}"), "range": "start_end",
                     "unfinished": True}
            self.recorder.add_span(tr.thread_track(tid), self._name(name), start, end_ns, attrs=attrs)
            self.counts["unfinished"] += 1
        self._started.clear()

    def lock_rules(self) -> list[dict[str, str]]:
        """Role rules that name the program's named locks (model/roles.py `lock`)."""
        rules = []
        for track, name in sorted(self.lock_names.items()):
            pattern = re.escape(track)
            rules.append({"role": "lock_wait", "track": pattern, "name": "wait", "lock": name})
            rules.append({"role": "lock_hold", "track": pattern, "name": "hold", "lock": name})
        return rules


def as_array(rows: list[tuple[int, ...]]) -> np.ndarray:
    """Events from plain tuples (kind, flags, tid, pid, obj, aux, t0, t1): for tests."""
    out = np.zeros(len(rows), rg.EVENT)
    for k, field in enumerate(("kind", "flags", "tid", "pid", "obj", "aux", "t0", "t1")):
        out[field] = [r[k] for r in rows]
    return out
