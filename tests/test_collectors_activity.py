"""The device-activity collector's lifecycle, threads and flushing, against a stand-in for the
activity library (no GPU): records handed back in buffers come out as attributed spans."""

import enum
import threading
import time
from types import SimpleNamespace

import pytest
from conftest import wait_until

from workbench.collectors import cupti_activity
from workbench.collectors.cupti_activity import DeviceActivity
from workbench.trace.collector import CollectorUnavailable
from workbench.trace.recorder import Recorder

OFFSET = 3_000_000_000


class Kind(enum.IntEnum):
    CONCURRENT_KERNEL = 10
    MEMCPY = 1
    MEMSET = 2
    SYNCHRONIZATION = 38
    RUNTIME = 5
    DRIVER = 6


class Runtime(enum.IntEnum):
    INVALID = 0
    cudaMemcpyAsync_v3020 = 41
    cudaMalloc_v3020 = 20
    SIZE = 500


class Driver(enum.IntEnum):
    INVALID = 0
    cuLaunchKernel = 307
    cuCtxGetCurrent = 9


class FakeActivityLibrary:
    """Buffers are handed back when flushed, as the library does, on the flushing thread."""

    ActivityKind = Kind
    RuntimeApiTraceCbid = Runtime
    DriverApiTraceCbid = Driver
    CallbackDomain = SimpleNamespace(RUNTIME_API=1, DRIVER_API=2)
    ActivityThreadIdType = SimpleNamespace(SYSTEM=1)

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.enabled: set[int] = set()
        self.calls: dict[int, int] = {}
        self.pending: list = []
        self.completed = None
        self.flushes: list[int] = []

    def activity_register_callbacks(self, requested, completed):
        self.completed = completed

    def set_thread_id_type(self, kind):
        pass

    def activity_enable(self, kind):
        if self.refuse:
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        self.enabled.add(int(kind))

    def activity_disable(self, kind):
        self.enabled.discard(int(kind))

    def activity_enable_runtime_api(self, cbid, enable):
        self.calls[cbid] = enable

    activity_enable_driver_api = activity_enable_runtime_api

    def get_callback_name(self, domain, cbid):
        return (Runtime if domain == 1 else Driver)(cbid).name

    def get_timestamp(self):
        return time.perf_counter_ns() + OFFSET

    def activity_flush_all(self, flag):
        self.flushes.append(flag)
        batch, self.pending = self.pending, []
        if batch:
            cupti_activity._buffer_completed(batch)


def kernel(name, start, end, correlation, stream=7):
    return SimpleNamespace(kind=Kind.CONCURRENT_KERNEL, name=name, start=start + OFFSET, end=end + OFFSET,
                           device_id=0, context_id=1, stream_id=stream, correlation_id=correlation,
                           grid_x=4, grid_y=1, grid_z=1, block_x=128, block_y=1, block_z=1)


def copy(start, end, correlation, runtime_correlation, nbytes):
    return SimpleNamespace(kind=Kind.MEMCPY, copy_kind=1, src_kind=1, dst_kind=3, bytes=nbytes,
                           start=start + OFFSET, end=end + OFFSET, device_id=0, context_id=1, stream_id=7,
                           correlation_id=correlation, runtime_correlation_id=runtime_correlation)


def api(kind, cbid, correlation, thread, at_ns):
    return SimpleNamespace(kind=kind, cbid=int(cbid), correlation_id=correlation, thread_id=thread,
                           start=at_ns + OFFSET, end=at_ns + 1_000 + OFFSET)


@pytest.fixture
def library(monkeypatch):
    fake = FakeActivityLibrary()
    monkeypatch.setattr(cupti_activity, "load_cupti", lambda: fake)
    monkeypatch.setattr(cupti_activity, "_require_device", lambda: None)
    monkeypatch.setattr(cupti_activity, "_callbacks_registered", False)
    yield fake
    assert cupti_activity._active is None, "a test left device activity recording"


def issue_work(recorder, library, partition):
    """What a GPU worker thread does: spans around a copy and a kernel, with their records."""
    scope = dict(partition=partition, worker=0)
    tid = threading.get_native_id()
    with recorder.span("worker/0", "ntt_msm_h", **scope):
        with recorder.span("worker/0", "h2d_copy", **scope) as span:
            t = recorder.now_ns()
            library.pending.append(api(Kind.RUNTIME, Runtime.cudaMemcpyAsync_v3020, 100 + partition, tid, t))
            library.pending.append(copy(t + 2_000, t + 40_000, 900 + partition, 100 + partition, 4096))
            time.sleep(0.001)
        with recorder.span("worker/0", "ntt", **scope):
            t = recorder.now_ns()
            library.pending.append(api(Kind.DRIVER, Driver.cuLaunchKernel, 200 + partition, tid, t))
            library.pending.append(kernel("ntt_pass", t + 5_000, t + 9_000, 200 + partition))
            time.sleep(0.001)
    return span


def run_worker(collector, target):
    """A worker thread that, like the pipeline's, lives long enough for the collector to see it."""
    def body():
        wait_until(lambda: threading.get_native_id() in collector._thread_names)
        target()

    thread = threading.Thread(target=body, name="gpu-worker-0")
    thread.start()
    thread.join()


def test_records_become_attributed_spans_on_device_tracks(library):
    recorder = Recorder(nvtx=False)
    recorder.name_track("worker/0", "gpu-worker-0")
    collector = DeviceActivity(flush_interval_s=0.05)
    collector.start(recorder)
    assert {int(k) for k in (Kind.CONCURRENT_KERNEL, Kind.MEMCPY, Kind.RUNTIME)} <= library.enabled
    assert library.calls == {41: 1, 20: 0, 307: 1, 9: 0}  # only the calls attribution needs
    run_worker(collector, lambda: [issue_work(recorder, library, p) for p in range(3)])
    collector.stop()
    collector.stop()  # idempotent
    assert library.enabled == set() and library.flushes[-1] == 1

    device = [s for s in recorder.spans if s[0].startswith("gpu0/")]
    assert sorted((s[0], s[1], s[4]) for s in device) == sorted(
        [("gpu0/copy", "h2d", p) for p in range(3)] + [("gpu0/stream/7", "ntt_pass", p) for p in range(3)])
    for _track, name, start, end, partition, worker, attrs in device:
        assert worker == 0 and attrs["by"] == "api" and attrs["phase"] == "ntt_msm_h"
        assert attrs["span"] == ("h2d_copy" if name == "h2d" else "ntt")
        host = next(s for s in recorder.spans if s[0] == "worker/0" and s[1] == attrs["span"]
                    and s[4] == partition)
        # The stand-in's clock is the host's plus an offset: the map must take it off exactly.
        error = collector.clock.error_ns
        assert host[2] - error <= start and end <= host[3] + 50_000
    summary = next(i for i in recorder.instants if i[1] == "summary")[5]
    assert summary["kernel"] == 3 and summary["memcpy"] == 3 and summary["by_api"] == 6
    alignment = [i for i in recorder.instants if i[1] == "clock_alignment"]
    assert len(alignment) == 2 and alignment[-1][5]["samples"] >= 2
    assert abs(alignment[-1][5]["offset_ns"] - OFFSET) <= alignment[-1][5]["error_ns"] + 1_000


def test_a_refused_start_is_unavailable_and_leaves_nothing_enabled(library):
    library.refuse = True
    with pytest.raises(CollectorUnavailable, match="another profiler may be attached"):
        DeviceActivity().start(Recorder(nvtx=False))
    assert library.enabled == set()


def test_one_recording_per_process(library):
    first = DeviceActivity()
    first.start(Recorder(nvtx=False))
    try:
        with pytest.raises(CollectorUnavailable, match="already being recorded"):
            DeviceActivity().start(Recorder(nvtx=False))
    finally:
        first.stop()


def test_periodic_flushes_write_settled_records_during_the_run(library):
    recorder = Recorder(nvtx=False)
    recorder.name_track("worker/0", "gpu-worker-0")
    collector = DeviceActivity(flush_interval_s=0.02)
    collector.start(recorder)
    try:
        run_worker(collector, lambda: issue_work(recorder, library, 0))
        deadline = time.monotonic() + 5
        while not any(s[0] == "gpu0/copy" for s in recorder.spans):
            assert time.monotonic() < deadline, "no device span written before stop"
            time.sleep(0.01)
    finally:
        collector.stop()
    assert sum(s[0] == "gpu0/copy" for s in recorder.spans) == 1  # written once, not again at stop


def test_a_pipeline_run_with_a_stand_in_library_places_work_in_its_phases(library):
    from workbench.config import RunConfig
    from workbench.pipeline.run import Pipeline
    from workbench.prover.cpu_backend import CpuBackend

    correlation = iter(range(1, 10_000))

    def launches(phase):
        # The launch is made inside the phase, on the worker's thread, as a real library's is:
        # the phase's span is open by then however late the thread was scheduled.
        def run(self, *args):
            scope = args[-1]
            c, t = next(correlation), time.perf_counter_ns()
            library.pending.append(api(Kind.DRIVER, Driver.cuLaunchKernel, c, threading.get_native_id(), t))
            name = f"{phase}:{scope.partition}:{scope.worker}"
            library.pending.append(kernel(name, t + 1_000, t + 2_000, c, stream=scope.worker))
            return getattr(CpuBackend, phase)(self, *args)
        return run

    phases = ("ntt_msm_h", "batch_add", "tail_msm")
    Launching = type("Launching", (CpuBackend,), {p: launches(p) for p in phases})
    config = RunConfig(backend="cpu", log2_constraints=10, partitions=4, gpu_trace=True)
    pipeline = Pipeline(config, Launching(), collectors=[DeviceActivity(flush_interval_s=0.02)])
    result = pipeline.run()
    assert result.ok and pipeline.notices == []
    kernels = result.trace.select(track_prefix="gpu0/stream/")
    assert len(kernels) == 3 * config.partitions
    for k in kernels:
        phase, partition, worker = k.name.split(":")
        assert (k.attrs["phase"], k.partition, k.worker, k.attrs["by"]) == (
            phase, int(partition), int(worker), "api")
