import sys

import pytest

from workbench.config import RunConfig
from workbench.pipeline import switching
from workbench.pipeline.backends import select_backend
from workbench.pipeline.run import Pipeline


def test_overlapping_holders_restore_the_interval_once_the_last_leaves():
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        switching.enter()
        switching.enter()
        assert sys.getswitchinterval() == pytest.approx(switching.SWITCH_INTERVAL_S)
        switching.leave()
        assert sys.getswitchinterval() == pytest.approx(switching.SWITCH_INTERVAL_S)
        switching.leave()
        assert sys.getswitchinterval() == 0.005
        switching.leave()  # an extra leave changes nothing
        assert sys.getswitchinterval() == 0.005
    finally:
        while switching._active:
            switching.leave()
        sys.setswitchinterval(before)


def test_a_run_lowers_the_interval_while_it_runs_and_restores_it():
    before = sys.getswitchinterval()
    seen = []
    config = RunConfig(backend="cpu", log2_constraints=8, partitions=2, synth_threads=1)

    def fault(phase, partition, worker):
        seen.append(sys.getswitchinterval())

    try:
        sys.setswitchinterval(0.004)
        result = Pipeline(config, select_backend(config), fault=fault).run()
        assert result.ok
        assert seen and all(v == pytest.approx(switching.SWITCH_INTERVAL_S) for v in seen)
        assert sys.getswitchinterval() == 0.004
        assert result.trace.meta["switch_interval_s"] == pytest.approx(switching.SWITCH_INTERVAL_S)
    finally:
        sys.setswitchinterval(before)


def test_a_failing_run_restores_the_interval_too():
    before = sys.getswitchinterval()
    config = RunConfig(backend="cpu", log2_constraints=8, partitions=2, synth_threads=1)

    def fault(phase, partition, worker):
        if phase == "synthesis":
            raise RuntimeError("boom")

    try:
        sys.setswitchinterval(0.004)
        result = Pipeline(config, select_backend(config), fault=fault).run()
        assert result.outcome == "failed"
        assert sys.getswitchinterval() == 0.004
    finally:
        sys.setswitchinterval(before)
