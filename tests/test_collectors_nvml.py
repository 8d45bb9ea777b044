"""The counter sampler against a stand-in for NVML (no GPU)."""

import threading
import time
from types import SimpleNamespace

import pytest

from workbench.collectors.nvml_sampler import NvmlSampler
from workbench.trace.collector import CollectorUnavailable
from workbench.trace.recorder import Recorder


class NotSupported(Exception):
    pass


class FakeNvml:
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES, NVML_CLOCK_SM = 0, 1, 1

    def __init__(self, fail_init=False, clock_supported=True):
        self.fail_init = fail_init
        self.clock_supported = clock_supported
        self.live = 0
        self.reads = 0

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")
        self.live += 1

    def nvmlShutdown(self):
        self.live -= 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"gpu{index}"

    nvmlDeviceGetHandleByPciBusId = nvmlDeviceGetHandleByIndex

    def nvmlDeviceGetPcieThroughput(self, handle, counter):
        self.reads += 1
        return 1000 if counter == self.NVML_PCIE_UTIL_RX_BYTES else 10

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=37, memory=5)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=3 << 30, total=140 << 30)

    def nvmlDeviceGetClockInfo(self, handle, clock):
        if not self.clock_supported:
            raise NotSupported("Not Supported")
        return 1980


def test_samples_every_counter_on_the_gpu_track_and_labels_the_duty_cycle():
    nvml = FakeNvml()
    recorder = Recorder(nvtx=False)
    sampler = NvmlSampler(interval_ms=10, nvml=nvml)
    sampler.start(recorder)
    deadline = time.monotonic() + 5
    while sampler.samples < 3:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    sampler.stop()
    sampler.stop()
    assert nvml.live == 0
    values = {(c[0], c[1]): c[3] for c in recorder.counters}
    assert values == {
        ("nvml/gpu0", "pcie_tx_bytes_s"): 10 * 1024, ("nvml/gpu0", "pcie_rx_bytes_s"): 1000 * 1024,
        ("nvml/gpu0", "utilization_gpu"): 37, ("nvml/gpu0", "memory_used_bytes"): 3 << 30,
        ("nvml/gpu0", "sm_clock_mhz"): 1980,
    }
    label = next(i for i in recorder.instants if i[1] == "nvml_sampler")[5]
    assert label["utilization_gpu"].startswith("duty cycle") and label["interval_ms"] == 10


def test_a_counter_this_gpu_lacks_is_left_out_and_named():
    recorder = Recorder(nvtx=False)
    sampler = NvmlSampler(interval_ms=10, nvml=FakeNvml(clock_supported=False))
    sampler.start(recorder)
    sampler.stop()
    assert "sm_clock_mhz" not in {c[1] for c in recorder.counters}
    assert "gpu0/sm_clock_mhz" in sampler.failures
    label = next(i for i in recorder.instants if i[1] == "nvml_sampler")[5]
    assert "sm_clock_mhz" not in label["counters"] and "gpu0/sm_clock_mhz" in label["unreadable"]


def test_stops_promptly_with_a_long_period():
    sampler = NvmlSampler(interval_ms=60_000, nvml=FakeNvml())
    sampler.start(Recorder(nvtx=False))
    started = time.monotonic()
    sampler.stop()
    assert time.monotonic() - started < 1.0
    assert not [t for t in threading.enumerate() if t.name == "device-counters"]


def test_nvml_that_will_not_start_is_unavailable():
    with pytest.raises(CollectorUnavailable, match="NVML did not start"):
        NvmlSampler(nvml=FakeNvml(fail_init=True)).start(Recorder(nvtx=False))
