"""Without the libraries or a device, collectors say so once and the run goes on."""

import sys

import pytest

from workbench.collectors import DeviceActivity, NvmlSampler, for_config
from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.trace.collector import CollectorUnavailable
from workbench.trace.recorder import Recorder


@pytest.fixture
def no_gpu_libraries(monkeypatch):
    # A None entry makes `import` fail, whatever this machine has installed.
    monkeypatch.setitem(sys.modules, "cupti", None)
    monkeypatch.setitem(sys.modules, "pynvml", None)


def test_a_cpu_run_with_gpu_trace_completes_and_names_what_is_off(no_gpu_libraries):
    config = RunConfig(backend="cpu", log2_constraints=5, partitions=3, gpu_trace=True)
    pipeline = Pipeline(config, CpuBackend())
    result = pipeline.run()
    assert result.ok
    assert [n.split(":")[0] for n in pipeline.notices] == [
        "device activity is off for this run", "device counters is off for this run"]
    assert all("pip install 'workbench[gpu]'" in n for n in pipeline.notices)
    assert result.trace.meta["notices"] == pipeline.notices
    assert not [t for t in result.trace.tracks() if t.startswith(("gpu0/", "nvml/"))]


def test_collectors_come_only_with_gpu_trace():
    assert for_config(RunConfig()) == []
    names = [c.name for c in for_config(RunConfig(gpu_trace=True, sample_interval_ms=250))]
    assert names == ["device activity", "device counters"]
    sampler = for_config(RunConfig(gpu_trace=True, sample_interval_ms=250))[1]
    assert isinstance(sampler, NvmlSampler) and sampler.interval_s == 0.25


def test_missing_libraries_raise_unavailable_not_import_errors(no_gpu_libraries):
    with pytest.raises(CollectorUnavailable, match="cupti-python is not installed"):
        DeviceActivity().start(Recorder(nvtx=False))
    with pytest.raises(CollectorUnavailable, match="nvidia-ml-py is not installed"):
        NvmlSampler().start(Recorder(nvtx=False))
    DeviceActivity().stop()  # never started: stopping is harmless
    NvmlSampler().stop()
