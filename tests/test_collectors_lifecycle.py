from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.trace.collector import CollectorUnavailable


class Probe:
    def __init__(self, name, fail_start=None):
        self.name = name
        self.fail_start = fail_start
        self.started = self.stopped = 0

    def start(self, recorder):
        if self.fail_start is not None:
            raise self.fail_start
        self.started += 1
        recorder.counter(f"probe/{self.name}", "value", 1.0)

    def stop(self):
        self.stopped += 1


def run(collectors, **overrides):
    config = RunConfig(backend="cpu", log2_constraints=5, partitions=3, **overrides)
    pipeline = Pipeline(config, CpuBackend(), collectors=collectors)
    return pipeline, pipeline.run()


def test_collectors_start_and_stop_with_the_run():
    probe = Probe("probe")
    pipeline, result = run([probe])
    assert result.ok and probe.started == probe.stopped == 1
    assert [c.track for c in result.trace.iter_counters()] == ["probe/probe"]
    assert pipeline.notices == []


def test_a_collector_that_cannot_start_is_named_once_and_the_run_goes_on():
    broken = Probe("device activity", CollectorUnavailable("no CUDA device"))
    crashing = Probe("sampler", RuntimeError("boom"))
    fine = Probe("fine")
    pipeline, result = run([broken, crashing, fine])
    assert result.ok
    assert pipeline.notices == [
        "device activity is off for this run: no CUDA device",
        "sampler failed to start and is off: RuntimeError: boom",
    ]
    assert result.trace.meta["notices"] == pipeline.notices
    assert broken.stopped == crashing.stopped == 0 and fine.stopped == 1


def test_collectors_stop_when_a_phase_fails():
    probe = Probe("probe")

    def fault(phase, partition, worker):
        if phase == "tail_msm":
            raise RuntimeError("injected")

    config = RunConfig(backend="cpu", log2_constraints=5, partitions=3)
    result = Pipeline(config, CpuBackend(), collectors=[probe], fault=fault).run()
    assert result.outcome == "failed" and probe.stopped == 1
