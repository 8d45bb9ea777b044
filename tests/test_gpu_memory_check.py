"""The GPU backend's device-memory check against the peaks real runs held on the H200
(benchmarks/gpu_memory.py; benchmarks/RESULTS.md, "Device memory of a GPU run"). The check is
plain arithmetic, so it runs without a GPU: it must ask for at least what each measured run
took, and not refuse runs that fit by asking for far more."""

from __future__ import annotations

import pytest

from workbench.config import RunConfig
from workbench.gpu.backend import device_need

GIB = 2**30
# (log2, workers): peak device bytes in use, measured (the earlier case's leftover taken off).
MEASURED_PEAK_GIB = {(20, 1): 3.85, (20, 2): 5.10, (22, 1): 11.98, (22, 2): 17.20}


@pytest.mark.parametrize(("log2", "workers"), sorted(MEASURED_PEAK_GIB))
def test_the_check_covers_each_measured_peak_without_overasking(log2, workers):
    config = RunConfig(backend="gpu", log2_constraints=log2, gpu_workers=workers, partitions=2 * workers)
    ratio = device_need(config) / (MEASURED_PEAK_GIB[log2, workers] * GIB)
    assert 1.0 <= ratio <= 1.5, ratio
