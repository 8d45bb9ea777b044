"""Where a PyTorch profiler (Kineto) event goes on the track grammar, read from its `cat`.

Kineto writes GPU activity under the device's pid and the stream's tid, host activity
under the process and thread that did it:

    kernel                          gpu<device>/stream/<stream>   (args device, stream)
    gpu_memcpy                      gpu<device>/copy   h2d/d2h/d2d/p2p, bytes, src_kind, dst_kind
    gpu_memset                      gpu<device>/memset
    gpu_user_annotation,            gpu<device>/ranges  (mirrors and measurements, not GPU work)
      cuda_profiler_range
    cuda_runtime, cuda_driver       cuda/<calling thread's track>  (ROCm traces put hip* calls
                                    under cuda_runtime too)
    cuda_sync                       cuda/<track of the call with its correlation>, named as the
                                    nsys importer names synchronisation records (stream_synchronize,
                                    ...); on gpu<device>/ranges when no call has its correlation
    Trace                           the profiler's recording window: an instant at its start on
                                    its pseudo-thread's track (attrs profiler_window, dur_ns), as
                                    it is no work of any thread
    anything else                   the thread's own track (cpu_op, user_annotation,
                                    python_function, ...)

Every argument is kept, so `correlation` (and `External id`) link a launch to its kernel
(a copy without `bytes` takes the `size` of the call with its correlation, as ROCm writes it);
the `ac2g` flow events carry the same correlation as their id. A ProfilerStep#N range is a
unit of work by the default role rules. Contract: `code(cat)` (0 for other categories),
`place(code, name, pid, tid, attrs)`, `size_copies(copies, calls)`, `thread_name(name, tid)`,
`FLOW_TO_KERNEL`.
"""

from __future__ import annotations

import re
from typing import Any

from workbench.model import tracks as tr

KERNEL, MEMCPY, MEMSET, SYNC = "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"
GPU_RANGES = frozenset({"gpu_user_annotation", "cuda_profiler_range"})
RANGES = "ranges"  # gpu<n>/ranges: a device record track of the grammar (kind DEVICE, role other)
API = frozenset({"cuda_runtime", "cuda_driver"})
DEVICE = frozenset({KERNEL, MEMCPY, MEMSET, SYNC} | GPU_RANGES)
SYNC_NAMES = {"Stream Sync": "stream_synchronize", "Event Sync": "event_synchronize",
              "Context Sync": "context_synchronize", "Stream Wait Event": "stream_wait_event"}
WINDOW = "Trace"  # the profiler's own recording window, on a pseudo-thread: neither host work nor GPU
CODES = {cat: i + 1 for i, cat in enumerate(sorted(DEVICE | API | {WINDOW}))}
CATEGORY = {i: cat for cat, i in CODES.items()}
FLOW_TO_KERNEL = "ac2g"  # the flow from a runtime call to the GPU work it launched

# "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoD (Device -> Device)", "Memcpy PtoP ..."
_MEMCPY = re.compile(r"^Memcpy ([HDPA])to([HDPA])(?: \((\w+) -> (\w+)\))?")
_MEMSET = re.compile(r"^Memset(?: \((\w+)\))?")
_THREAD_NAME = re.compile(r"thread (\d+) \((.+)\)")
_SIDE = {"H": "h", "D": "d", "P": "p", "A": "d"}  # an array lives on the device


class Placement:
    """Where an event goes: a track built here (`track`), or the calling thread's CUDA track."""

    __slots__ = ("api", "attrs", "name", "sync", "track")

    def __init__(self, track: str | None, name: str, attrs: dict[str, Any] | None, api: bool = False,
                 sync: bool = False):
        self.track, self.name, self.attrs, self.api, self.sync = track, name, attrs, api, sync


def code(cat: Any) -> int:
    """A small number for each Kineto category placed off the thread's track, 0 for the rest."""
    return CODES.get(cat, 0) if isinstance(cat, str) else 0


def place(cat_code: int, name: str, pid: Any, tid: Any, attrs: dict[str, Any] | None) -> Placement | None:
    """The Kineto placement of an event, None where it stays on its thread's track."""
    cat = CATEGORY[cat_code]
    if cat == WINDOW:
        return None
    if cat in API:
        return Placement(None, name, attrs, api=True)
    args = attrs or {}
    device = _int(args.get("device"), _int(pid, -1))
    if device < 0:
        return None
    if cat == KERNEL:
        stream = _int(args.get("stream"), _int(tid, -1))
        return Placement(tr.stream_track(device, stream), name, attrs) if stream >= 0 else None
    if cat == MEMCPY:
        return _memcpy(device, name, attrs)
    if cat == MEMSET:
        m = _MEMSET.match(name)
        extra = {"dst_kind": m.group(1).lower()} if m and m.group(1) else {}
        return Placement(tr.memset_track(device), "memset", {**args, **extra} or None)
    ranges = tr.gpu_track(device, RANGES)
    if cat == SYNC:
        return Placement(ranges, SYNC_NAMES.get(name, "synchronize"), attrs, sync=True)
    return Placement(ranges, name, attrs)


def _memcpy(device: int, name: str, attrs: dict[str, Any] | None) -> Placement:
    m = _MEMCPY.match(name)
    if not m:
        return Placement(tr.copy_track(device), "copy", attrs)
    src, dst, src_kind, dst_kind = m.groups()
    extra = {"src_kind": src_kind.lower(), "dst_kind": dst_kind.lower()} if src_kind and dst_kind else {}
    return Placement(tr.copy_track(device), f"{_SIDE[src]}2{_SIDE[dst]}", {**(attrs or {}), **extra})


def thread_name(name: str, tid: Any) -> str:
    """Kineto names a thread "thread 598009 (pt_autograd_0)": its id is in its track already."""
    m = _THREAD_NAME.fullmatch(name.strip())
    return m.group(2) if m and m.group(1) == str(tid) else name.strip()


def size_copies(copies: list[dict[str, Any]], calls: list[dict[str, Any]]) -> None:
    """ROCm traces give a copy's size only on the runtime call that made it (`size`): take it over."""
    sizes = {}
    for args in calls:
        size, corr = args.get("size"), args.get("correlation")
        if isinstance(corr, int) and isinstance(size, int | str) and str(size).isdigit():
            sizes[corr] = int(size)
    for args in copies:
        corr = args.get("correlation")
        if "bytes" not in args and isinstance(corr, int) and corr in sizes:
            args["bytes"] = sizes[corr]


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else default
