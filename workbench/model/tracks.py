"""The track grammar: every track name is built here and parsed here.

A track says where a thing happened. Host threads of a pipeline:

    synth/<t>            a producer thread (synthesis)
    worker/<w>           a consumer thread (a GPU worker)
    worker/<w>/prep      the prep thread serving worker w
    mutex/gpu<n>         the GPU mutex: `wait` and `hold` spans
    barrier/worker<w>    the barrier between worker w and its prep thread
    queue, run           the partition queue, the run itself
    host/load            host memory load beside the run

Device side and foreign programs:

    gpu<n>/stream/<s>    kernels on a stream
    gpu<n>/copy          memory copies (`h2d`, `d2h`, `d2d`, `p2p`)
    gpu<n>/memset        memsets
    gpu<n>/sync          the GPU's records of host waits for it (synchronisations): role "sync"
    gpu<n>/<what>        other device records (a profiler's GPU-side ranges on
                         gpu<n>/ranges, ...): role "other"
    nvml/gpu<n>          counters sampled on a GPU
    thread/<id>          a host thread of a foreign program (its ranges and ops)
    cuda/<thread>        CUDA runtime and driver calls made by that thread
    os/<thread>          OS runtime calls made by that thread (locks, waits, I/O)
    lock/<name>          a lock of a foreign program: `wait` and `hold` spans
    sampled/kernels      when a recording took kernel records (`workbench record --cuda-mode
                         sampled`): a `window` span each; no thread's, no GPU's work

`<thread>` inside `cuda/` and `os/` is the calling thread's own track, so `os/worker/0`
is an OS call made by GPU worker 0. Contract: the builders below and `parse(track)`;
`parse(build...)` gives back what was built (a property test checks it).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# Track kinds, as `parse` reports them.
SYNTH, WORKER, PREP, MUTEX, BARRIER, QUEUE, RUN, HOST_LOAD = (
    "synth", "worker", "prep", "mutex", "barrier", "queue", "run", "host_load")
KERNELS, COPIES, MEMSETS, DEVICE, COUNTERS = "kernels", "copies", "memsets", "device", "counters"
_SYNC_RECORDS = "sync"  # gpu<n>/sync: where a GPU's records of synchronisations go
ON_DEVICE = (KERNELS, COPIES, MEMSETS, DEVICE)
THREAD, CUDA_API, OS_API, LOCK, OTHER = "thread", "cuda_api", "os_api", "lock", "other"
SAMPLED = "sampled"

HOST_LOAD_TRACK = "host/load"  # pipeline/host_load.py: its span and its GB/s counter
QUEUE_TRACK = "queue"
SAMPLED_TRACK = "sampled/kernels"  # the windows in which kernels were recorded (analysis/sampling.py)
RUN_TRACK = "run"


def synth_track(thread: int) -> str:
    return f"synth/{thread}"


def worker_track(worker: int) -> str:
    return f"worker/{worker}"


def prep_track(worker: int) -> str:
    return f"worker/{worker}/prep"


def mutex_track(gpu: int) -> str:
    return f"mutex/gpu{gpu}"


def barrier_track(worker: int) -> str:
    return f"barrier/worker{worker}"


def sync_track(gpu: int) -> str:
    """The GPU's records of host threads' waits for it (stream, event, context syncs)."""
    return gpu_track(gpu, _SYNC_RECORDS)


def gpu_track(gpu: int, what: str) -> str:
    return f"gpu{gpu}/{what}"


def stream_track(gpu: int, stream: int) -> str:
    return f"gpu{gpu}/stream/{stream}"


def copy_track(gpu: int) -> str:
    return f"gpu{gpu}/copy"


def memset_track(gpu: int) -> str:
    return f"gpu{gpu}/memset"


def nvml_track(gpu: int) -> str:
    return f"nvml/gpu{gpu}"


def thread_track(thread: int | str) -> str:
    return f"thread/{thread}"


def cuda_track(thread_track_name: str) -> str:
    return f"cuda/{thread_track_name}"


def os_track(thread_track_name: str) -> str:
    return f"os/{thread_track_name}"


def lock_track(name: str) -> str:
    return f"lock/{name}"


@dataclass(frozen=True)
class Track:
    """A parsed track name: its kind and the numbers or names it carries (-1 / "" if none)."""

    kind: str
    gpu: int = -1
    worker: int = -1
    thread: int = -1  # synthesis thread
    stream: int = -1
    # a lock's or a foreign thread's name; the calling thread of cuda/ and os/; what other
    # device records (kind DEVICE) are
    name: str = ""

    @property
    def on_device(self) -> bool:
        return self.kind in ON_DEVICE

    @property
    def caller(self) -> Track | None:
        """The thread that made a cuda/ or os/ call."""
        return parse(self.name) if self.kind in (CUDA_API, OS_API) else None


_N = r"(0|[1-9][0-9]*)"  # ASCII digits only: int() would read other scripts' digits too
_PATTERNS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = tuple(
    (re.compile(p), kind, fields) for p, kind, fields in (
        (rf"synth/{_N}", SYNTH, ("thread",)),
        (rf"worker/{_N}", WORKER, ("worker",)),
        (rf"worker/{_N}/prep", PREP, ("worker",)),
        (rf"mutex/gpu{_N}", MUTEX, ("gpu",)),
        (rf"barrier/worker{_N}", BARRIER, ("worker",)),
        (rf"gpu{_N}/stream/{_N}", KERNELS, ("gpu", "stream")),
        (rf"gpu{_N}/copy", COPIES, ("gpu",)),
        (rf"gpu{_N}/memset", MEMSETS, ("gpu",)),
        (rf"nvml/gpu{_N}", COUNTERS, ("gpu",)),
    )
)
_DEVICE_OTHER = re.compile(rf"gpu{_N}/(.+)", re.DOTALL)
_NAMED = {"thread/": THREAD, "cuda/": CUDA_API, "os/": OS_API, "lock/": LOCK}
_FIXED = {QUEUE_TRACK: QUEUE, RUN_TRACK: RUN, HOST_LOAD_TRACK: HOST_LOAD, SAMPLED_TRACK: SAMPLED}


@functools.lru_cache(maxsize=1 << 16)
def parse(track: str) -> Track:
    """What a track name says. Names outside the grammar are kind OTHER, named as they are.
    (Cached: an analysis asks about the same few tracks for every query it makes.)"""
    fixed = _FIXED.get(track)
    if fixed is not None:
        return Track(fixed)
    for pattern, kind, fields in _PATTERNS:
        m = pattern.fullmatch(track)
        if m:
            n = {f: int(v) for f, v in zip(fields, m.groups(), strict=True)}
            return Track(kind, gpu=n.get("gpu", -1), worker=n.get("worker", -1), thread=n.get("thread", -1),
                         stream=n.get("stream", -1))
    if m := _DEVICE_OTHER.fullmatch(track):
        return Track(DEVICE, gpu=int(m.group(1)), name=m.group(2))
    for prefix, kind in _NAMED.items():
        if track.startswith(prefix) and len(track) > len(prefix):
            return Track(kind, name=track[len(prefix):])
    return Track(OTHER, name=track)


def build(track: Track) -> str:
    """The name of a parsed track: the inverse of `parse`."""
    k = track.kind
    builders = {
        SYNTH: lambda: synth_track(track.thread), WORKER: lambda: worker_track(track.worker),
        PREP: lambda: prep_track(track.worker), MUTEX: lambda: mutex_track(track.gpu),
        BARRIER: lambda: barrier_track(track.worker), KERNELS: lambda: stream_track(track.gpu, track.stream),
        COPIES: lambda: copy_track(track.gpu), MEMSETS: lambda: memset_track(track.gpu),
        DEVICE: lambda: gpu_track(track.gpu, track.name),
        COUNTERS: lambda: nvml_track(track.gpu), THREAD: lambda: thread_track(track.name),
        CUDA_API: lambda: cuda_track(track.name), OS_API: lambda: os_track(track.name),
        LOCK: lambda: lock_track(track.name), OTHER: lambda: track.name,
    }
    fixed = {v: k for k, v in _FIXED.items()}
    if k in fixed:
        return fixed[k]
    return builders[k]()


def gpu_of(track: str) -> int:
    """The GPU a track belongs to (mutex, device or counter track), -1 for none."""
    return parse(track).gpu


def worker_of(track: str) -> int:
    """The GPU worker a host track belongs to (its thread, prep thread or barrier), -1 for none."""
    return parse(track).worker
