"""Device activity and counters on a real GPU: a scripted sequence comes back exactly, every
copy sits inside the host span that issued it, and a pipeline run's kernels land in the right
partitions and phases."""

import threading

import numpy as np
import pytest
from conftest import wait_until

from workbench.analysis.transfers import transfer_report
from workbench.analysis.utilisation import utilisation
from workbench.collectors import DeviceActivity, attribution, staged_asarray
from workbench.collectors.cupti_activity import load_cupti
from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.trace.collector import CollectorUnavailable
from workbench.trace.recorder import Recorder
from workbench.trace.scope import Scope

cp = pytest.importorskip("cupy")
try:
    CUPTI = load_cupti()
except CollectorUnavailable as err:
    pytest.skip(str(err), allow_module_level=True)

pytestmark = pytest.mark.gpu

H2D, D2H = 1, 2
COPIES = [(1 << 20, "pageable"), (3 << 20, "pinned"), (2 << 20, "pageable"), (5 << 20, "pinned")]
KERNELS = 6
FILL = r"""
extern "C" __global__ void scripted_fill(unsigned long long* x, unsigned long long n,
                                         unsigned long long v) {
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) x[i] = v + i;
}
"""


def host_array(nbytes, kind):
    if kind == "pageable":
        return np.ones(nbytes // 8, dtype=np.uint64)
    memory = cp.cuda.alloc_pinned_memory(nbytes)
    return np.frombuffer(memory, dtype=np.uint64, count=nbytes // 8)


def as_worker(collector, recorder, body):
    """Run `body` on a thread that records on worker/0, as a pipeline worker would."""
    recorder.name_track("worker/0", "gpu-worker-0")
    failures = []

    def run():
        wait_until(lambda: threading.get_native_id() in collector._thread_names)
        try:
            body()
        except BaseException as err:
            failures.append(err)

    thread = threading.Thread(target=run, name="gpu-worker-0")
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def scripted(recorder):
    kernel = cp.RawKernel(FILL, "scripted_fill")
    stream = cp.cuda.Stream(non_blocking=True)
    device = cp.empty(8 << 17, dtype=cp.uint64)  # 8 MiB
    hosts = [host_array(n, kind) for n, kind in COPIES]
    back = host_array(1 << 20, "pinned")
    for i, ((nbytes, kind), host) in enumerate(zip(COPIES, hosts, strict=True)):
        with recorder.span("worker/0", "h2d_copy", i, 0, {"bytes": nbytes, "source": kind}):
            cp.cuda.runtime.memcpyAsync(device.data.ptr, host.ctypes.data, nbytes, H2D, stream.ptr)
            stream.synchronize()
    for k in range(KERNELS):
        with recorder.span("worker/0", "ntt", 10 + k, 0), stream:
            kernel((64,), (256,), (device, np.uint64(device.size), np.uint64(k)))
            stream.synchronize()
    with recorder.span("worker/0", "d2h_copy", 20, 0):
        cp.cuda.runtime.memcpyAsync(back.ctypes.data, device.data.ptr, 1 << 20, D2H, stream.ptr)
        stream.synchronize()
    with recorder.span("worker/0", "clear", 21, 0):
        cp.cuda.runtime.memsetAsync(device.data.ptr, 0, 1 << 20, stream.ptr)
        stream.synchronize()


def test_the_library_enumerations_match_ours():
    memory, copy, sync = CUPTI.ActivityMemoryKind, CUPTI.ActivityMemcpyKind, CUPTI.ActivitySynchronizationType
    assert {attribution.MEMORY_KINDS[int(memory.PAGEABLE)], attribution.MEMORY_KINDS[int(memory.PINNED)],
            attribution.MEMORY_KINDS[int(memory.DEVICE)]} == {"pageable", "pinned", "device"}
    assert int(memory.PAGEABLE) == 1 and int(memory.PINNED) == 2 and int(memory.DEVICE) == 3
    assert (int(copy.HTOD), int(copy.DTOH), int(copy.DTOD)) == (1, 2, 8)
    assert attribution.SYNC_KINDS[int(sync.STREAM_SYNCHRONIZE)] == "stream_synchronize"


def test_a_scripted_sequence_comes_back_with_counts_bytes_directions_and_kinds():
    recorder = Recorder()
    collector = DeviceActivity()
    collector.start(recorder)
    try:
        as_worker(collector, recorder, lambda: scripted(recorder))
    finally:
        collector.stop()
    error = collector.clock.error_ns
    host = {s[4]: s for s in recorder.spans if s[0] == "worker/0"}

    kernels = sorted((s for s in recorder.spans
                      if s[0].startswith("gpu0/stream/") and s[1] == "scripted_fill"), key=lambda s: s[2])
    assert [s[4] for s in kernels] == [10 + k for k in range(KERNELS)]
    assert all(s[6]["by"] == "api" and s[6]["span"] == "ntt" for s in kernels)
    assert all(s[6]["block"] == [256, 1, 1] for s in kernels)

    copies = sorted((s for s in recorder.spans if s[0] == "gpu0/copy"), key=lambda s: s[2])
    h2d = [s for s in copies if s[1] == "h2d"]
    assert [(s[6]["bytes"], s[6]["src_kind"], s[6]["dst_kind"]) for s in h2d] == [
        (n, kind, "device") for n, kind in COPIES]
    assert [s[4] for s in h2d] == [0, 1, 2, 3]
    d2h = [s for s in copies if s[1] == "d2h"]
    assert [(s[6]["bytes"], s[6]["src_kind"], s[6]["dst_kind"], s[4]) for s in d2h] == [
        (1 << 20, "device", "pinned", 20)]
    margins = []
    for s in h2d + d2h + kernels:
        issuing = host[s[4]]
        margins.append((s[2] - issuing[2], issuing[3] - s[3]))
        assert issuing[2] - error <= s[2] and s[3] <= issuing[3] + error, (s, issuing, error)
    memsets = [s for s in recorder.spans if s[0] == "gpu0/memset"]
    assert [(s[6]["bytes"], s[4]) for s in memsets] == [(1 << 20, 21)]
    syncs = [s for s in recorder.spans if s[0] == "gpu0/sync" and s[1] == "stream_synchronize"]
    assert len(syncs) >= len(COPIES) + KERNELS + 2 and all(s[4] >= 0 for s in syncs)
    pageable = [s[6]["host_overhead_ms"] for s in h2d if s[6]["src_kind"] == "pageable"]
    print(f"\nFIGURE alignment error bound {error} ns, drift {collector.clock.drift_ppm:.3f} ppm; "
          f"device work inside its host span by at least {min(m[0] for m in margins)} ns at the start "
          f"and {min(m[1] for m in margins)} ns at the end; pageable host overhead ms {pageable}")


def test_staging_spans_appear_for_pageable_sources_only():
    recorder = Recorder()
    collector = DeviceActivity()
    collector.start(recorder)
    scope = Scope(recorder, "worker/0", partition=5, worker=0)
    try:
        as_worker(collector, recorder, lambda: [staged_asarray(host_array(1 << 20, kind), scope)
                                                for kind in ("pageable", "pinned")])
    finally:
        collector.stop()
    staging = [s for s in recorder.spans if s[1] == "staging_copy"]
    assert len(staging) == 1 and staging[0][6]["hidden"] is True
    h2d = sorted((s for s in recorder.spans if s[0] == "gpu0/copy" and s[1] == "h2d"), key=lambda s: s[2])
    # The device sees both as pinned copies: the staging is the host's work, now on record.
    assert [(s[6]["src_kind"], s[6]["span"], s[4]) for s in h2d] == [("pinned", "h2d_copy", 5)] * 2
    assert staging[0][3] <= h2d[0][2]


def test_a_pipeline_run_places_kernels_in_their_partitions_and_phases():
    from workbench.gpu.backend import GpuBackend

    config = RunConfig(backend="gpu", log2_constraints=12, partitions=4, gpu_workers=2, synth_threads=2,
                       memory_mode="pageable", gpu_trace=True, sample_interval_ms=50)
    pipeline = Pipeline(config, GpuBackend())
    result = pipeline.run()
    assert result.ok, result.error
    trace = result.trace
    kernels = trace.select(track_prefix="gpu0/stream/")
    assert kernels
    placed = [k for k in kernels if k.partition >= 0]
    assert len(placed) >= 0.95 * len(kernels)
    assert {k.attrs["phase"] for k in placed} <= {"ntt_msm_h", "batch_add", "tail_msm"}
    phases = {(s.worker, s.partition, s.name): s for s in trace.select(track_prefix="worker/")}
    error = [i for i in trace.iter_instants() if i.name == "clock_alignment"][-1].attrs["error_ns"]
    for k in placed:
        phase = phases[(k.worker, k.partition, k.attrs["phase"])]
        assert phase.start_ns - error <= k.start_ns, (k, phase)  # nothing runs before it is issued
    for p in range(config.partitions):
        mine = {(k.attrs["phase"], k.attrs["span"]) for k in placed if k.partition == p}
        assert {("ntt_msm_h", "ntt"), ("ntt_msm_h", "msm_h")} <= mine
        assert {phase for phase, _ in mine} >= {"batch_add", "tail_msm"}
    copies = [c for c in trace.select(track="gpu0/copy", name="h2d") if c.attrs.get("span") == "h2d_copy"]
    assert len(copies) == 3 * config.partitions
    assert {c.attrs["src_kind"] for c in copies} == {"pageable"}
    assert {c.attrs["bytes"] for c in copies} == {32 << config.log2_constraints}
    counters = {c.name for c in trace.iter_counters() if c.track == "nvml/gpu0"}
    assert counters == {"pcie_tx_bytes_s", "pcie_rx_bytes_s", "utilization_gpu", "memory_used_bytes",
                        "sm_clock_mhz"}
    (gpu,) = utilisation(trace)
    assert gpu.kernel_busy is not None and gpu.copy_busy is not None and gpu.nvml_duty_cycle is not None
    report = transfer_report(trace)
    assert report is not None and report.hidden_staging_ms is not None and report.device_rates is not None
    assert pipeline.notices == []
