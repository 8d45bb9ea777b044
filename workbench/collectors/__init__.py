"""Collectors of what the device did, recorded beside the pipeline's own spans.

`attribution` is pure (device records and host spans in, span rows out); `cupti_activity`
and `nvml_sampler` import their libraries only when started, so this package imports on any
machine and a collector that cannot run says why instead of failing the run.
"""

from __future__ import annotations

from workbench.collectors.attribution import ClockMap, ClockSample, attribute
from workbench.collectors.cupti_activity import DeviceActivity
from workbench.collectors.nvml_sampler import NvmlSampler
from workbench.collectors.staging import staged_asarray, staged_set
from workbench.config import RunConfig
from workbench.trace.collector import Collector

__all__ = [
    "ClockMap", "ClockSample", "DeviceActivity", "NvmlSampler", "attribute", "for_config",
    "staged_asarray", "staged_set",
]


def for_config(config: RunConfig, device: int = 0) -> list[Collector]:
    """The collectors a run with `gpu_trace` starts: device activity and device counters."""
    if not config.gpu_trace:
        return []
    gpus = tuple(range(device, device + getattr(config, "gpus", 1)))
    return [DeviceActivity(device=device),
            NvmlSampler(interval_ms=config.sample_interval_ms, devices=gpus)]
