"""Device counters sampled through NVML (`nvidia-ml-py`, the `gpu` extra) on a thread of
their own, as counter tracks `nvml/gpu<d>`:

| counter | unit | what it is |
|---|---|---|
| `pcie_tx_bytes_s` | bytes/s | PCIe traffic sent by the GPU (device to host), over a 20 ms window |
| `pcie_rx_bytes_s` | bytes/s | PCIe traffic received by the GPU (host to device), likewise |
| `utilization_gpu` | % | duty cycle: share of the driver's sample period with a kernel running |
| `memory_used_bytes` | bytes | device memory in use, all processes |
| `sm_clock_mhz` | MHz | current SM clock |

NVML reports PCIe throughput in KB/s (taken here as 1024 bytes). Each throughput read
blocks for its 20 ms window, so a sample takes about 40 ms and periods shorter than that
run back to back. A sample's timestamp is the middle of its read. What each counter means
is also written into the trace, on the instant `nvml_sampler` at the start. The duty cycle
counts a period as busy if any kernel ran in it at all, however few SMs it used: it is not
kernel-busy time (the device activity records give that).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from workbench.model.tracks import gpu_track, nvml_track
from workbench.trace.collector import CollectorUnavailable, import_for_collector
from workbench.trace.recorder import Recorder

KIB = 1024
DUTY_CYCLE = ("duty cycle: share of the driver's sample period in which at least one kernel "
              "was running on the GPU; not SM occupancy or kernel-busy time")
UNITS = {"pcie_tx_bytes_s": "bytes/s, device to host", "pcie_rx_bytes_s": "bytes/s, host to device",
         "utilization_gpu": "%", "memory_used_bytes": "bytes", "sm_clock_mhz": "MHz"}

Reader = Callable[[Any], float]


def load_nvml() -> Any:
    return import_for_collector("pynvml", "nvidia-ml-py")


def readers(nvml: Any) -> dict[str, Reader]:
    return {
        "pcie_tx_bytes_s": lambda h: nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_TX_BYTES) * KIB,
        "pcie_rx_bytes_s": lambda h: nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_RX_BYTES) * KIB,
        "utilization_gpu": lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu,
        "memory_used_bytes": lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used,
        "sm_clock_mhz": lambda h: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
    }


class NvmlSampler:
    name = "device counters"

    def __init__(self, interval_ms: int = 100, devices: Sequence[int] = (0,), nvml: Any = None) -> None:
        self.interval_s = interval_ms / 1000
        self.devices = tuple(devices)
        self._nvml = nvml
        self._recorder: Recorder | None = None
        self._sources: list[tuple[str, Any, dict[str, Reader]]] = []  # (track, handle, readers)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self.failures: dict[str, str] = {}

    def start(self, recorder: Recorder) -> None:
        nvml = self._nvml or load_nvml()
        try:
            nvml.nvmlInit()
        except Exception as err:
            raise CollectorUnavailable(f"NVML did not start ({type(err).__name__}: {err})") from None
        try:
            self._sources = [self._source(nvml, d) for d in self.devices]
        except Exception as err:
            _shutdown(nvml)
            raise CollectorUnavailable(f"NVML cannot read the GPU ({type(err).__name__}: {err})") from None
        if not any(source[2] for source in self._sources):
            _shutdown(nvml)
            raise CollectorUnavailable(f"NVML reads none of the counters here: {self.failures}")
        self._nvml, self._recorder = nvml, recorder
        for track, _, metrics in self._sources:
            recorder.instant(track, "nvml_sampler", attrs={
                "interval_ms": self.interval_s * 1000, "counters": sorted(metrics),
                "units": {m: UNITS[m] for m in metrics}, "utilization_gpu": DUTY_CYCLE,
                "unreadable": dict(self.failures),
            })
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="device-counters", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        _shutdown(self._nvml)

    def _source(self, nvml: Any, device: int) -> tuple[str, Any, dict[str, Reader]]:
        handle = _handle(nvml, device)
        metrics = {}
        for metric, read in readers(nvml).items():
            try:
                read(handle)
            except Exception as err:  # a counter this GPU or driver does not offer
                self.failures[gpu_track(device, metric)] = f"{type(err).__name__}: {err}"  # the GPU's metric
                continue
            metrics[metric] = read
        return nvml_track(device), handle, metrics

    def _loop(self) -> None:
        recorder = self._recorder
        assert recorder is not None
        now = recorder.now_ns
        due = time.monotonic()
        while True:
            for track, handle, metrics in self._sources:
                for metric, read in metrics.items():
                    before = now()
                    try:
                        value = read(handle)
                    except Exception:
                        continue
                    recorder.counter(track, metric, value, (before + now()) // 2)
            self.samples += 1
            due += self.interval_s
            delay = due - time.monotonic()
            if delay < 0:  # reads outlasted the period: start again from now, don't catch up
                due, delay = time.monotonic(), 0.0
            if self._stop.wait(delay):
                return


def _handle(nvml: Any, device: int) -> Any:
    """NVML's handle for CUDA device `device`, found by PCI bus id: NVML counts devices its own
    way, which differs from CUDA's when only some are visible to the process."""
    try:
        import cupy

        bus_id = cupy.cuda.Device(device).pci_bus_id
        return nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
    except Exception:
        return nvml.nvmlDeviceGetHandleByIndex(device)


def _shutdown(nvml: Any) -> None:
    with contextlib.suppress(Exception):
        nvml.nvmlShutdown()
