"""Device activity: the kernels, copies, memsets and synchronisations the GPU really ran,
from the activity records of `cupti-python` (the `gpu` extra), in process.

Records arrive in buffers that the library hands back on its own thread; each is copied at
once into a plain tuple (the buffer is reused after the callback). A background thread
flushes the library every `flush_interval_s`, samples the clock offset again, and writes the
records whose issuing phase has closed into the recorder as spans (see `attribution`), on
the track grammar's device tracks (model/tracks.py): kernels on their stream's track, named
by the kernel; copies (h2d / d2h / d2d ... with bytes, src_kind, dst_kind) on the copy track;
memsets on the memset track; stream, event and context synchronisations (host-side waits)
on the device's `sync` track.

Each carries the partition, worker, `phase` and innermost `span` that issued it and how that
was found (`by`: "api" or "time"). The clock alignment (offset, error bound, drift) is an
instant `clock_alignment` on track `device_activity`, written at start and again at stop
with every sample taken; a `summary` instant there counts what was recorded and placed.

Threads are told apart by the ids the library reports, matched to the recorder's track
names by the flush thread, which looks at the live threads every 50 ms; work from a thread
that lived less than that is placed by stream and time instead. The library's activity
state is per process: one collector records at a time.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from workbench.collectors import attribution as at
from workbench.model.tracks import parse
from workbench.trace.collector import CollectorUnavailable, import_for_collector
from workbench.trace.recorder import Recorder

TRACK = "device_activity"
BUFFER_BYTES = 8 << 20
START_READS, FLUSH_READS = 200, 32
TICK_S = 0.05  # how often the flush thread looks at threads and for a stop
INDEX_SLACK_NS = 30_000_000_000  # host spans this far before the oldest waiting record stay indexed

# API calls whose records say which thread issued the work; every other call stays off, so
# the library records (and we convert) only what attribution needs.
RUNTIME_CALLS = (
    "cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernelExC_v11060",
    "cudaMemcpy_v3020", "cudaMemcpyAsync_v3020", "cudaMemcpyAsync_ptsz_v7000",
    "cudaMemcpy2DAsync_v3020", "cudaMemset_v3020", "cudaMemsetAsync_v3020",
    "cudaMemsetAsync_ptsz_v7000", "cudaStreamSynchronize_v3020", "cudaEventSynchronize_v3020",
    "cudaDeviceSynchronize_v3020", "cudaStreamWaitEvent_v3020",
)
DRIVER_CALLS = (
    "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
    "cuLaunchCooperativeKernel", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemcpyAsync", "cuMemsetD8Async",
    "cuMemsetD32Async", "cuMemsetD8_v2", "cuMemsetD32_v2", "cuStreamSynchronize",
    "cuEventSynchronize", "cuCtxSynchronize", "cuStreamWaitEvent",
)

_process_lock = threading.Lock()
_active: DeviceActivity | None = None
_callbacks_registered = False


def load_cupti() -> Any:
    return import_for_collector("cupti.cupti", "cupti-python")


def _buffer_requested() -> tuple[int, int]:
    return BUFFER_BYTES, 0


def _buffer_completed(activities: Any) -> None:
    collector = _active
    if collector is not None:
        collector._take(activities)


class DeviceActivity:
    name = "device activity"

    def __init__(
        self, device: int = 0, flush_interval_s: float = 0.5, hold_back_s: float = 10.0,
        api_records: bool = True,
    ) -> None:
        self.device = device
        self.flush_interval_s = flush_interval_s
        self.hold_back_ns = int(hold_back_s * 1e9)
        self.api_records = api_records
        self._cupti: Any = None
        self._recorder: Recorder | None = None
        self._enabled: list[Any] = []
        self._running = False
        self._lock = threading.Lock()  # the library's thread appends, the flusher swaps
        self._new_records: list[at.DeviceRecord] = []
        self._new_apis: list[at.ApiRecord] = []
        self._waiting: list[at.DeviceRecord] = []
        self._apis: dict[int, at.ApiRecord] = {}
        self._contexts: dict[int, int] = {}
        self._call_names: dict[tuple[int, int], str] = {}
        self._thread_names: dict[int, str] = {}
        self._native_ids = False
        self._kinds: dict[int, str] = {}
        self._domains: dict[int, Any] = {}
        self._calls_selected = 0
        self._streams: dict[tuple[int, int], Counter[str]] = {}
        self._span_cursor = 0
        self._counts: Counter[str] = Counter()
        self._errors: list[str] = []
        self._busy_ns = 0  # time spent reading and placing records, which holds the GIL
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.clock: at.ClockMap | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, recorder: Recorder) -> None:
        global _active, _callbacks_registered
        cupti = load_cupti()
        _require_device()
        # Set before records can arrive: the library may hand buffers back from now on.
        self._cupti, self._recorder = cupti, recorder
        with _process_lock:
            if _active is not None:
                raise CollectorUnavailable("device activity is already being recorded in this process")
            try:
                if not _callbacks_registered:
                    cupti.activity_register_callbacks(_buffer_requested, _buffer_completed)
                    _callbacks_registered = True
                self._native_ids = _system_thread_ids(cupti)
                self._kinds = self._enable(cupti)
            except Exception as err:
                self._disable(cupti)
                raise CollectorUnavailable(
                    f"activity recording would not start ({type(err).__name__}: {err}); "
                    "another profiler may be attached"
                ) from None
            _active = self
        self._running = True
        self.clock = at.ClockMap([at.measure(cupti.get_timestamp, recorder.now_ns, START_READS)])
        recorder.instant(TRACK, "clock_alignment", attrs=self.clock.describe())
        self._snapshot_threads()
        self._stop.clear()
        self._thread = threading.Thread(target=self._flush_loop, name="device-activity", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        global _active
        if not self._running:
            return
        self._running = False
        cupti, recorder = self._cupti, self._recorder
        assert recorder is not None and self.clock is not None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.clock = self.clock.add(at.measure(cupti.get_timestamp, recorder.now_ns, START_READS))
            cupti.activity_flush_all(1)  # forced: incomplete buffers too
        finally:
            self._disable(cupti)
            with _process_lock:
                _active = None
        self._write(final=True)
        recorder.instant(TRACK, "clock_alignment", attrs=self.clock.describe())
        recorder.instant(TRACK, "summary", attrs={
            **self._counts, "api_records": self.api_records, "api_calls_selected": self._calls_selected,
            "busy_ms": self._busy_ns / 1e6, "errors": self._errors[:5],
        })

    # -- enabling -----------------------------------------------------------------------------
    def _enable(self, cupti: Any) -> dict[int, str]:
        kind = cupti.ActivityKind
        kinds = {int(kind.CONCURRENT_KERNEL): "kernel", int(kind.MEMCPY): "memcpy",
                 int(kind.MEMSET): "memset", int(kind.SYNCHRONIZATION): "sync"}
        if self.api_records:
            kinds[int(kind.RUNTIME)] = "runtime"
            kinds[int(kind.DRIVER)] = "driver"
        for value in kinds:
            cupti.activity_enable(value)
            self._enabled.append(value)
        if self.api_records:
            self._calls_selected = (
                _select_calls(cupti.activity_enable_runtime_api, cupti.RuntimeApiTraceCbid, RUNTIME_CALLS)
                + _select_calls(cupti.activity_enable_driver_api, cupti.DriverApiTraceCbid, DRIVER_CALLS)
            )
            self._domains = {int(kind.RUNTIME): cupti.CallbackDomain.RUNTIME_API,
                             int(kind.DRIVER): cupti.CallbackDomain.DRIVER_API}
        return kinds

    def _disable(self, cupti: Any) -> None:
        while self._enabled:
            try:
                cupti.activity_disable(self._enabled.pop())
            except Exception as err:
                self._errors.append(f"disable: {err}")

    # -- the library's thread ---------------------------------------------------------------
    def _take(self, activities: Any) -> None:
        """Copy every record out of the buffer now: the library reuses it after we return."""
        began = time.perf_counter_ns()
        records, apis = [], []
        kinds, contexts = self._kinds, self._contexts
        try:
            for a in activities:
                kind = kinds.get(a.kind)
                if kind == "kernel":
                    contexts[a.context_id] = a.device_id
                    records.append(at.DeviceRecord(
                        "kernel", _text(a.name), a.start, a.end, a.device_id, a.stream_id,
                        a.correlation_id, 0,
                        {"grid": [a.grid_x, a.grid_y, a.grid_z], "block": [a.block_x, a.block_y, a.block_z]},
                    ))
                elif kind == "memcpy":
                    contexts[a.context_id] = a.device_id
                    records.append(at.DeviceRecord(
                        "memcpy", at.COPY_KINDS.get(a.copy_kind, "copy"), a.start, a.end, a.device_id,
                        a.stream_id, a.correlation_id, a.runtime_correlation_id,
                        {"bytes": a.bytes, "src_kind": at.MEMORY_KINDS.get(a.src_kind, str(a.src_kind)),
                         "dst_kind": at.MEMORY_KINDS.get(a.dst_kind, str(a.dst_kind))},
                    ))
                elif kind == "memset":
                    records.append(at.DeviceRecord(
                        "memset", "memset", a.start, a.end, a.device_id, a.stream_id, a.correlation_id, 0,
                        {"bytes": a.bytes, "value": a.value,
                         "memory_kind": at.MEMORY_KINDS.get(a.memory_kind, str(a.memory_kind))},
                    ))
                elif kind == "sync":
                    records.append(at.DeviceRecord(
                        "sync", at.SYNC_KINDS.get(a.type, "synchronize"), a.start, a.end,
                        contexts.get(a.context_id, self.device), a.stream_id, a.correlation_id, 0, None,
                    ))
                elif kind is not None:
                    apis.append(at.ApiRecord(a.correlation_id, a.thread_id, a.start, a.end,
                                             self._call_name(a.kind, a.cbid)))
        except Exception as err:  # never raise into the library's thread
            self._errors.append(f"reading records: {type(err).__name__}: {err}")
        with self._lock:
            self._new_records.extend(records)
            self._new_apis.extend(apis)
        self._busy_ns += time.perf_counter_ns() - began

    def _call_name(self, kind: int, cbid: int) -> str:
        key = (kind, cbid)
        name = self._call_names.get(key)
        if name is None:
            try:
                name = _text(self._cupti.get_callback_name(self._domains[kind], cbid))
            except Exception:
                name = f"call {cbid}"
            self._call_names[key] = name
        return name

    # -- the flush thread ---------------------------------------------------------------------
    def _flush_loop(self) -> None:
        cupti, recorder = self._cupti, self._recorder
        assert recorder is not None
        next_flush = time.monotonic() + self.flush_interval_s
        while not self._stop.wait(TICK_S):
            self._snapshot_threads()
            if time.monotonic() < next_flush:
                continue
            next_flush += self.flush_interval_s
            try:
                cupti.activity_flush_all(0)
                assert self.clock is not None
                self.clock = self.clock.add(at.measure(cupti.get_timestamp, recorder.now_ns, FLUSH_READS))
                self._write(final=False)
            except Exception as err:
                self._errors.append(f"flush: {type(err).__name__}: {err}")

    def _snapshot_threads(self) -> None:
        # Pipeline threads are gone by the final flush: remember their ids while they live.
        for thread in threading.enumerate():
            tid = thread.native_id if self._native_ids else thread.ident
            if tid is not None:
                self._thread_names[tid] = thread.name

    def _thread_tracks(self) -> dict[int, str]:
        assert self._recorder is not None
        track_of = {name: track for track, name in dict(self._recorder.thread_names).items()}
        return {tid: track_of[name] for tid, name in self._thread_names.items() if name in track_of}

    def _write(self, final: bool) -> None:
        began = time.perf_counter_ns()
        try:
            self._place(final)
        finally:
            self._busy_ns += time.perf_counter_ns() - began

    def _place(self, final: bool) -> None:
        recorder, clock = self._recorder, self.clock
        assert recorder is not None and clock is not None
        with self._lock:
            records, self._new_records = self._new_records, []
            apis, self._new_apis = self._new_apis, []
        for api in apis:
            self._apis[api.correlation] = api
        self._counts.update(r.kind for r in records)
        self._counts["api_calls"] += len(apis)
        waiting = self._waiting + records
        if not waiting:
            return
        thread_tracks = self._thread_tracks()
        index = self._index(min(clock.to_host(r.start) for r in waiting))
        horizon = recorder.now_ns() - self.hold_back_ns
        ready, self._waiting = [], []
        for record in waiting:
            if final or at.settled(record, self._apis, clock, index, thread_tracks, horizon):
                ready.append(record)
            else:
                self._waiting.append(record)
        placed = at.attribute(ready, self._apis, clock, index, thread_tracks, self._streams,
                              candidates=set(thread_tracks.values()))
        for row in placed.rows:
            recorder.add_span(*row)
        self._counts.update(by_api=placed.by_api, by_time=placed.by_time, unplaced=placed.unplaced)
        if final:
            self._apis.clear()
        elif self._waiting:
            oldest = min(r.start for r in self._waiting) - self.hold_back_ns
            self._apis = {c: a for c, a in self._apis.items() if a.start >= oldest}

    def _index(self, earliest_ns: int) -> at.HostIndex:
        # Spans are appended as they close, so those that ended long before the oldest
        # waiting record can never contain it and are skipped for good.
        assert self._recorder is not None
        spans = self._recorder.spans
        end, cursor, threshold = len(spans), self._span_cursor, earliest_ns - INDEX_SLACK_NS
        while cursor < end and spans[cursor][3] < threshold:
            cursor += 1
        self._span_cursor = cursor
        return at.HostIndex(row for row in spans[cursor:end] if not parse(row[0]).on_device)


def _select_calls(enable: Any, calls: Any, keep: tuple[str, ...]) -> int:
    """Turn API records on for `keep` and off for every other call; how many calls took it."""
    wanted = {int(getattr(calls, name)) for name in keep if hasattr(calls, name)}
    done = 0
    for member in calls:
        if member.name.startswith(("INVALID", "SIZE", "FORCE_INT")):
            continue
        try:
            enable(int(member), 1 if int(member) in wanted else 0)
            done += 1
        except Exception:
            continue
    return done


def _system_thread_ids(cupti: Any) -> bool:
    """Ask for the kernel's thread ids (what `threading.get_native_id` gives); else pthread ids."""
    try:
        cupti.set_thread_id_type(cupti.ActivityThreadIdType.SYSTEM)
        return True
    except Exception:
        return False


def _require_device() -> None:
    try:
        import cupy
    except ImportError:
        return  # a user's pipeline without CuPy: the library itself will say if no device
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:
        raise CollectorUnavailable(f"no CUDA device ({type(err).__name__}: {err})") from None
    if count == 0:
        raise CollectorUnavailable("no CUDA device")


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
