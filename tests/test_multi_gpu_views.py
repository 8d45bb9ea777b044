"""Several GPUs in the views: findings and tables per GPU, Gantt lanes grouped by GPU."""

import re

import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from golden import CASES, build

from workbench.analysis import DiagnoseOptions, diagnose
from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.render.verdict_text import render_verdict
from workbench.viz import findings as viz_findings
from workbench.viz.lanes import base_lane, expected_lanes, lane_sort_key, worker_gpus
from workbench.viz.tables import mutex_table

NO_WHATIF = DiagnoseOptions(whatif=False)


@pytest.fixture(scope="module")
def two_gpu_run():
    config = RunConfig(backend="cpu", gpus=2, gpu_workers=2, log2_constraints=6, partitions=12,
                       memory_mode="pageable")
    result = Pipeline(config, CpuBackend()).run()
    assert result.ok, result.error
    return result.trace


def test_two_gpu_run_verdict_is_per_gpu_and_whole_run(two_gpu_run):
    trace = two_gpu_run
    verdict = diagnose(trace)
    assert [g.gpu for g in verdict.gpus] == [0, 1]
    assert sum(g.partitions for g in verdict.gpus) == verdict.summary.partitions_done == 12
    total = sum(g.throughput_per_min for g in verdict.gpus)
    assert total == pytest.approx(verdict.summary.throughput_per_min)
    assert [g.workers for g in verdict.gpus] == [(0, 1), (2, 3)]
    assert verdict.contention is not None and verdict.contention.gpus == (0, 1)
    owner = worker_gpus(trace.meta)
    for f in verdict.findings:
        assert f.id in ("gpu_imbalance", "host_contention") or re.search(r"/gpu[01]$", f.id), f.id
        if "/gpu" in f.id:
            gpu = int(f.id[-1])
            workers = {trace.span(i).worker for i in f.evidence.spans} - {-1}
            assert {owner[w] for w in workers} <= {gpu}, (f.id, workers)
    text = render_verdict(verdict, trace)
    assert re.search(r"partitions/min\s+\S+\s+\S+", text)
    assert "GPU 0" in text and "GPU 1" in text and "copies by GPU" in text
    html = viz_findings.verdict_html(viz_findings.diagnose(trace))
    assert "per GPU" in html and "copies across GPUs" in html
    assert "gpu1 worker 2" in mutex_table(verdict.summary, owner)
    assert "gpu1 worker 2" not in mutex_table(verdict.summary)


def test_single_gpu_verdict_has_no_per_gpu_view():
    verdict = diagnose(build(CASES["balanced"]), NO_WHATIF)
    assert len(verdict.gpus) == 1 and not verdict.multi_gpu and verdict.contention is None
    assert all("/gpu" not in f.id for f in verdict.findings)
    assert "copies by GPU" not in render_verdict(verdict)
    assert "per GPU" not in viz_findings.verdict_html(viz_findings.diagnose(build(CASES["balanced"])))


def test_lanes_are_grouped_by_gpu(two_gpu_run):
    trace = two_gpu_run
    owner = worker_gpus(trace.meta)
    assert owner == {0: 0, 1: 0, 2: 1, 3: 1}
    lanes = set()
    for s in trace.iter_spans():
        lane, _ = base_lane(s.track, s.name, s.worker, s.attrs.get("party"), owner)
        lanes.add(lane)
    worker_lanes = {lane for lane in lanes if "worker" in lane}
    assert all(re.match(rf"gpu{owner[int(lane.split()[2])]} worker \d", lane) for lane in worker_lanes)
    # The live view's layout is the finished run's.
    assert worker_lanes <= set(expected_lanes(2, 4, gpu_workers=2))
    ordered = sorted(lanes | {"gpu0 stream 7", "gpu0 copy", "gpu1 stream 7", "gpu1 copy"}, key=lane_sort_key)
    first_gpu1 = min(i for i, lane in enumerate(ordered) if lane.startswith("gpu1"))
    assert all(lane.startswith(("run", "synth", "gpu0")) for lane in ordered[:first_gpu1])
    assert ordered[first_gpu1 - 2:first_gpu1] == ["gpu0 copy", "gpu0 stream 7"]
    assert ordered[-2:] == ["gpu1 copy", "gpu1 stream 7"]
    assert expected_lanes(2, 4, gpu_workers=2)[3:7] == [
        "gpu0 worker 0", "gpu0 worker 0 prep", "gpu0 worker 0 mutex wait", "gpu0 worker 0 mutex hold"]
    assert expected_lanes(2, 8, gpu_workers=4)[-1] == "gpu1 worker 7 mutex hold"


def test_one_gpu_lanes_keep_their_names():
    assert worker_gpus({"worker_gpu": {"0": 0, "1": 0}}) is None
    assert worker_gpus({}) is None
    assert expected_lanes(2, 2, gpu_workers=2) == expected_lanes(2, 2)
    assert base_lane("worker/1", "ntt", 1, None, {0: 0, 1: 0}) == ("worker 1", True)
    assert base_lane("mutex/gpu1", "hold", 3, None, {2: 1, 3: 1, 0: 0}) == ("gpu1 worker 3 mutex hold", False)


def test_the_gantt_groups_worker_lanes_by_gpu_for_a_two_gpu_run():
    from workbench.viz.bars import BarBuilder

    config = RunConfig(backend="cpu", gpus=2, gpu_workers=1, log2_constraints=5, partitions=4)
    trace = Pipeline(config, CpuBackend()).run().trace
    bars = BarBuilder(trace.time_range()[0]).build(trace)
    lanes = set(bars.lane.tolist())
    assert any(lane.startswith("gpu0 worker 0") for lane in lanes)
    assert any(lane.startswith("gpu1 worker 1") for lane in lanes)
    assert not any(lane.startswith("worker ") for lane in lanes)

