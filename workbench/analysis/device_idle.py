"""What a GPU waited for: its idle time by cause, for any GPU program, read from roles.

The GPU counts as busy while one of its kernels runs. Each idle moment of the trace's
window gets the first cause that holds then:

1. copy: a copy or memset runs on this GPU (by direction and memory kind);
2. sync: a host thread waits in a synchronisation call (role sync);
3. lock: a host thread waits on a lock, a condition or a barrier (lock_wait, cond_wait,
   barrier_wait);
4. launch: a thread that launches GPU work (role launch) is busy on the host: in launches,
   other runtime calls, OS calls or its own ranges, so nothing new reaches the GPU;
5. host: another host thread is busy in calls or ranges (every thread, where the trace
   does not say who launches);
6. nothing: nothing runs on the GPU and no host activity is recorded.

Where the trace knows which threads drive the GPU (they make CUDA calls), lock waits count
on those threads only: a helper thread parked on a condition variable does not hold the
GPU back. A host call names no GPU: with several GPUs it counts for each GPU that idles
during it. A lock hold is not host work by itself (what the holder does shows in its own
calls and ranges). OS calls in which a thread sleeps (poll, epoll_wait, nanosleep, ...) are not host
work. A cause whose roles the trace lacks is not judged, and `not_judged` says why.

A recording that sampled its kernels (`--cuda-mode sampled`) is judged inside its sampling
windows only (analysis/sampling.py): elsewhere kernels ran unrecorded, and their launches,
timed on the host, say nothing of when the GPU was busy. `window_ms` is then the time judged.

Contract: `device_idle(trace) -> tuple[DeviceIdle, ...]`, one per GPU that ran kernels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from workbench.analysis.host_threads import span_threads, thread_label
from workbench.analysis.idle import IdleCause, IdleReport
from workbench.analysis.intervals import Intervals, concurrency_ns, covered_ns
from workbench.analysis.sampling import judged_windows
from workbench.analysis.summary import run_window_ns
from workbench.analysis.utilisation import DEVICE_KERNELS
from workbench.model import roles as rl
from workbench.model import tracks as tr
from workbench.trace.container import Trace

EVIDENCE = 5
MAX_KEYS = 50  # contributors a cause is split among, largest first
# OS calls in which the calling thread sleeps until something happens: waiting, not working.
SLEEP_CALLS = re.compile(r"^(?:poll|ppoll|select|pselect6?|epoll_wait|epoll_pwait2?|nanosleep|clock_nanosleep"
                         r"|usleep|sleep|pause|sigwait|sigtimedwait|sigwaitinfo|sigsuspend|accept4?"
                         r"|wait|waitpid|waitid|wait4)$")
CAUSES = {
    "copy": "copies or memsets running, no kernel",
    "sync": "a host thread waiting in a synchronisation call",
    "lock": "a host thread waiting on a lock, condition or barrier",
    "launch": "the launching thread busy on the host (launch gaps)",
    "host": "a host thread busy in calls or ranges",
    "nothing": "nothing running and no host activity recorded",
}
LOCK_ROLES = rl.WAIT_ROLES
BUSY_ROLES = ("launch", "runtime", "os_call", "host", "producer", "prep", "consumer", "other")


@dataclass(frozen=True)
class Part:
    thread: str  # "host thread 1234" ("" for copies)
    what: str  # the call or range it is in, or the copies ("h2d pageable -> device")
    ms: float
    share: float  # of the window
    evidence: tuple[int, ...]


@dataclass(frozen=True)
class Cause:
    cause: str
    label: str
    ms: float
    share: float  # of the window
    pieces: int
    before_first_ms: float  # of it, before the GPU's first kernel
    evidence: tuple[int, ...]
    parts: tuple[Part, ...]  # largest first


@dataclass(frozen=True)
class DeviceIdle:
    gpu: int
    window_ms: float
    busy_ms: float
    idle_ms: float
    before_first_ms: float  # idle before the first kernel
    after_last_ms: float  # idle after the last kernel
    causes: tuple[Cause, ...]  # largest first
    launchers: tuple[str, ...]  # threads that launch GPU work (empty: the trace does not say)
    not_judged: tuple[str, ...]  # causes the trace cannot show, and why
    sampled_windows: int = 0  # judged inside this many sampling windows only (0: the whole trace)

    @property
    def idle_share(self) -> float:
        return self.idle_ms / self.window_ms if self.window_ms else 0.0

    def get(self, cause: str) -> Cause | None:
        return next((c for c in self.causes if c.cause == cause), None)

    def report(self) -> IdleReport:
        """The same figures as the pipeline's idle report, for tables and run diffs."""
        causes = tuple(IdleCause(c.cause, c.label, c.ms, c.share, c.pieces, c.evidence) for c in self.causes)
        return IdleReport(self.gpu, DEVICE_KERNELS, self.window_ms, self.busy_ms, self.idle_ms, causes)


def device_idle(trace: Trace) -> tuple[DeviceIdle, ...]:
    spans = trace.spans
    if not len(spans):
        return ()
    codes = rl.span_roles(trace)
    text = trace.strings.values
    gpu_of_track = np.array([tr.parse(t).gpu for t in text], dtype=np.int64)
    gpu = gpu_of_track[spans.track]
    kernels = codes == rl.CODE["kernel"]
    gpus = sorted(set(gpu[kernels].tolist()))
    host = _host_causes(trace, codes) if gpus else None
    judged = judged_windows(trace) if gpus else None
    return tuple(_one(trace, g, codes, gpu, host, judged) for g in gpus if host is not None)


@dataclass(frozen=True)
class _HostCauses:
    """The host side of idle causes (waits, launch gaps, host work): the same for every GPU."""

    groups: list[tuple[str, np.ndarray, list[tuple[int, str, str]]]]
    not_judged: list[str]
    launchers: tuple[str, ...]


def _host_causes(trace: Trace, codes: np.ndarray) -> _HostCauses:
    thread, names = span_threads(trace)
    role = np.array(rl.ROLE_NAMES)[codes]
    sleeping = _name_mask(trace, SLEEP_CALLS) & (codes == rl.CODE["os_call"])
    drives = np.isin(codes, [rl.CODE[r] for r in ("launch", "sync", "runtime")])
    driving = set(thread[drives & (thread >= 0)].tolist())
    launchers = set(thread[(codes == rl.CODE["launch"]) & (thread >= 0)].tolist())
    not_judged = []
    sync = (codes == rl.CODE["sync"]) & (thread >= 0)  # a GPU's own sync record names no thread
    lock = np.isin(codes, [rl.CODE[r] for r in LOCK_ROLES]) & (thread >= 0)
    if driving:
        # A foreign lock's own track (lock/<name>) names no thread: its waits may be anyone's.
        threadless = [k for k, n in enumerate(names) if tr.parse(n).kind in (tr.LOCK, tr.MUTEX)]
        lock &= np.isin(thread, [*driving, *threadless])
    busy_host = np.isin(codes, [rl.CODE[r] for r in BUSY_ROLES]) & (thread >= 0) & ~sleeping
    on_launcher = np.isin(thread, list(launchers))
    if not sync.any():
        not_judged.append("synchronisation waits (no spans of role sync)")
    if not lock.any():
        not_judged.append("lock, condition and barrier waits (no spans of role lock_wait, cond_wait or "
                          "barrier_wait)")
    if not launchers:
        not_judged.append("launch gaps (no spans of role launch: the trace does not say which thread "
                          "launches GPU work)")
    labels = {k: thread_label(n, trace.thread_names) for k, n in enumerate(names)}
    masks = (("sync", sync), ("lock", lock), ("launch", busy_host & on_launcher),
             ("host", busy_host & ~on_launcher))
    groups = [(cause, mask, _by_thread(trace, mask, thread, labels, role)) for cause, mask in masks]
    return _HostCauses(groups, not_judged, tuple(labels[k] for k in sorted(launchers)))


def _one(trace: Trace, g: int, codes: np.ndarray, gpu: np.ndarray, host: _HostCauses,
         judged: Intervals | None) -> DeviceIdle:
    spans = trace.spans
    start, end = run_window_ns(trace)
    mine = gpu == g
    kernel = mine & (codes == rl.CODE["kernel"])
    busy = _of(trace, kernel).clip(start, end)
    first, last = int(spans.start_ns[kernel].min()), int(spans.end_ns[kernel].max())
    if judged is not None:  # sampled: the windows' time alone, each from its first kernel to its last
        scope = judged.clip(start, end)
        busy, idle = busy.intersect(scope), scope.subtract(busy)
        window = max(scope.total(), 1)
    else:
        idle = busy.complement(start, end)
        window = max(end - start, 1)
    copies = mine & np.isin(codes, [rl.CODE["copy"], rl.CODE["memset"]])
    not_judged = [] if copies.any() else ["copies (no copy or memset records for this GPU)"]
    groups = [("copy", copies, [(0, *_copy_what(trace, i)) for i in np.flatnonzero(copies).tolist()]),
              *host.groups]
    causes = []
    remaining = idle
    for cause, mask, keys in groups:
        piece = remaining.intersect(_of(trace, mask))
        remaining = remaining.subtract(piece)
        if piece.total() > 0:
            causes.append(_cause(trace, cause, piece, mask, keys, start, window, first))
    if remaining.total() > 0:
        none = np.zeros(len(spans), bool)
        causes.append(_cause(trace, "nothing", remaining, none, [], start, window, first))
    causes.sort(key=lambda c: -c.ms)
    sampled = judged is not None
    return DeviceIdle(
        gpu=g, window_ms=window / 1e6, busy_ms=busy.total() / 1e6, idle_ms=idle.total() / 1e6,
        before_first_ms=0.0 if sampled else max(min(first, end) - start, 0) / 1e6,
        after_last_ms=0.0 if sampled else max(end - max(last, start), 0) / 1e6,
        causes=tuple(causes), launchers=host.launchers, not_judged=tuple([*not_judged, *host.not_judged]),
        sampled_windows=len(judged) if judged is not None else 0,
    )


def _of(trace: Trace, mask: np.ndarray) -> Intervals:
    return Intervals.of(trace.spans.start_ns[mask], trace.spans.end_ns[mask])


def _name_mask(trace: Trace, pattern: re.Pattern[str]) -> np.ndarray:
    ids = [i for i, s in enumerate(trace.strings.values) if pattern.match(s)]
    return np.isin(trace.spans.name, ids)


def _copy_what(trace: Trace, i: int) -> tuple[str, str]:
    name = trace.strings.values[trace.spans.name[i]]
    attrs = trace.spans.attrs[i] or {}
    if rl.default_role(trace.strings.values[trace.spans.track[i]], name) == "memset":
        return "", "memsets"
    src, dst = attrs.get("src_kind"), attrs.get("dst_kind")
    kinds = f" {src} -> {dst}" if src is not None and dst is not None else ""
    return "", f"{name}{kinds}"


def _by_thread(trace: Trace, mask: np.ndarray, thread: np.ndarray, labels: dict[int, str],
               role: np.ndarray) -> list[tuple[int, str, str]]:
    """Each span's group key: its thread and what it is in, ranked so that the innermost
    thing (a call) is named before what encloses it (a range)."""
    rank = {"launch": 0, "sync": 0, "runtime": 1, "lock_wait": 0, "cond_wait": 0, "barrier_wait": 0,
            "os_call": 2}
    text = trace.strings.values
    out = []
    for i in np.flatnonzero(mask).tolist():
        what, who = text[trace.spans.name[i]], labels[int(thread[i])]
        t = tr.parse(text[trace.spans.track[i]])
        if t.kind == tr.LOCK and trace.spans.worker[i] < 0:
            what, who = f"lock {t.name}", "a host thread"
        out.append((rank.get(str(role[i]), 3), who, what))
    return out


def _cause(trace: Trace, cause: str, piece: Intervals, mask: np.ndarray, keys: list[tuple[int, str, str]],
           start: int, window: int, first: int) -> Cause:
    spans = trace.spans
    idx = np.flatnonzero(mask)
    overlaps = concurrency_ns(spans.start_ns[idx], spans.end_ns[idx], piece.starts, piece.ends)
    top = np.argsort(-overlaps, kind="stable")[:EVIDENCE]
    evidence = tuple(int(idx[k]) for k in top.tolist() if overlaps[k] > 0)
    parts = _parts(trace, piece, idx, keys, window)
    total = piece.total()
    before = piece.clip(start, first).total()
    return Cause(cause, CAUSES[cause], total / 1e6, total / window, len(piece), before / 1e6, evidence, parts)


def _parts(trace: Trace, piece: Intervals, idx: np.ndarray, keys: list[tuple[int, str, str]],
           window: int) -> tuple[Part, ...]:
    """Split a cause's time among what covers it: innermost first, then the larger first."""
    spans = trace.spans
    by_key: dict[tuple[int, str, str], list[int]] = {}
    for i, key in zip(idx.tolist(), keys, strict=True):
        by_key.setdefault(key, []).append(i)
    # Ranked once by how much of the cause each key's spans cover (summed span by span, so
    # thousands of names cost one lookup each), then taken in that order, innermost tier first.
    cover = covered_ns(piece, spans.start_ns[idx], spans.end_ns[idx])
    size: dict[tuple[int, str, str], float] = {}
    for key, c in zip(keys, cover.tolist(), strict=True):
        size[key] = size.get(key, 0.0) + c
    out = []
    left = piece
    for rank in sorted({k[0] for k in by_key}):
        tier = [k for k in by_key if k[0] == rank and size[k] > 0]
        for key in sorted(tier, key=lambda k: -size[k])[:MAX_KEYS]:
            members = np.array(by_key[key])
            got = left.intersect(Intervals.of(spans.start_ns[members], spans.end_ns[members]))
            if not got.total():
                continue
            left = left.subtract(got)
            cover = concurrency_ns(spans.start_ns[members], spans.end_ns[members], got.starts, got.ends)
            order = np.argsort(-cover, kind="stable")[:EVIDENCE]
            out.append(Part(key[1], key[2], got.total() / 1e6, got.total() / window,
                            tuple(int(members[k]) for k in order.tolist() if cover[k] > 0)))
    out.sort(key=lambda p: -p.ms)
    return tuple(out)
