"""The GPU backend's device-memory check against the peaks real runs held on the H200
(benchmarks/gpu_memory.py; benchmarks/RESULTS.md, "Device memory of a GPU run"). The check is
plain arithmetic, so it runs without a GPU: it must ask for at least what each measured run
took, and not refuse runs that fit by asking for far more."""

from __future__ import annotations

import pytest

from workbench.config import RunConfig
from workbench.gpu import msm
from workbench.gpu.backend import device_need

GIB = 2**30
# (log2, workers): peak device bytes in use, measured (the earlier case's leftover taken off).
MEASURED_PEAK_GIB = {(20, 1): 3.85, (20, 2): 5.10, (22, 1): 11.98, (22, 2): 17.20}


@pytest.mark.parametrize(("log2", "workers"), sorted(MEASURED_PEAK_GIB))
def test_the_check_covers_each_measured_peak_without_overasking(log2, workers, monkeypatch):
    monkeypatch.setattr(msm, "PRECOMPUTED", "off")  # the peaks were measured without window tables
    config = RunConfig(backend="gpu", log2_constraints=log2, gpu_workers=workers, partitions=2 * workers)
    ratio = device_need(config) / (MEASURED_PEAK_GIB[log2, workers] * GIB)
    assert 1.0 <= ratio <= 1.5, ratio


@pytest.mark.parametrize(("log2", "c"), [(22, 20), (24, 22)])
def test_the_check_adds_the_h_querys_window_table_where_the_setup_builds_one(log2, c, monkeypatch):
    """The table holds ceil(255 / c) windows of the H query's 96-byte affine points (a 255-bit
    scalar field); below PRECOMPUTED_MIN_POINTS the setup builds none and the need has none."""
    config = RunConfig(backend="gpu", log2_constraints=log2, gpu_workers=2, partitions=4)
    monkeypatch.setattr(msm, "PRECOMPUTED", "off")
    without = device_need(config)
    monkeypatch.setattr(msm, "PRECOMPUTED", "prepared")
    assert device_need(config) - without == -(-255 // c) * (1 << log2) * 96
    monkeypatch.setattr(msm, "PRECOMPUTED_MIN_POINTS", (1 << log2) + 1)
    assert device_need(config) == without


class _FakeRuntime:
    def __init__(self, free: int) -> None:
        self.free = free

    def getDeviceCount(self) -> int:
        return 1

    def memGetInfo(self) -> tuple[int, int]:
        return self.free, 2 * self.free


class _FakeCupy:
    """What GpuBackend.check asks of CuPy: the device count and each device's free memory."""

    def __init__(self, free: int) -> None:
        import contextlib
        import types

        self.cuda = types.SimpleNamespace(runtime=_FakeRuntime(free),
                                          Device=lambda gpu: contextlib.nullcontext())


def _checked(free: int, config: RunConfig):
    from workbench.gpu.backend import GpuBackend

    backend = GpuBackend.__new__(GpuBackend)  # no CuPy here: only what check reads
    backend._cp, backend.setup_notices, backend.no_table = _FakeCupy(free), [], False
    backend.check(config)
    return backend


def test_a_gpu_without_room_for_the_table_runs_without_one_and_says_so():
    config = RunConfig(backend="gpu", log2_constraints=22, gpu_workers=2, partitions=4)
    bare = device_need(config, table=False)
    assert device_need(config) > bare  # the default builds a table at 2^22
    roomy = _checked(device_need(config), config)
    assert not roomy.no_table and roomy.setup_notices == []
    tight = _checked(bare, config)
    assert tight.no_table and "window table" in tight.setup_notices[0]
    from workbench.config import ConfigError

    with pytest.raises(ConfigError, match="GiB free"):
        _checked(bare - 1, config)
