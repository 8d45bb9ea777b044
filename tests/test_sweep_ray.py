"""`workbench sweep` on a Ray cluster of two nodes started here (`ray.cluster_utils.Cluster`, a
GPU on each faked as a resource, the CPU backend doing the work): runs land on both nodes,
`--exclusive-host` keeps every run alone on its node, a failing run does not stop the others,
a stop keeps the finished runs, and the proofs are those of `workbench run` of the same config."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (the cluster extra: pip install 'workbench[cluster]')")

from workbench.cli import main  # noqa: E402
from workbench.sweep import Driver, Listener, parse_grid, read_index  # noqa: E402
from workbench.sweep.ray_executor import RayExecutor, demand  # noqa: E402
from workbench.trace import load  # noqa: E402

pytestmark = pytest.mark.slow
SMALL = {"backend": "cpu", "partitions": 3, "log2_constraints": 5}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        # The nodes' workers inherit this: proving keys stay out of the user's cache.
        patch.setenv("WORKBENCH_CACHE", str(tmp_path_factory.mktemp("ray-srs-cache")))
        nodes = None
        try:
            nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 1})
            nodes.add_node(num_cpus=4, num_gpus=1)
        except Exception as err:  # Ray gives a node 30 s to start, fixed; a saturated host misses it
            if nodes is not None:
                nodes.shutdown()
            if "timed out during startup" not in str(err):
                raise
            pytest.skip(f"the Ray test cluster did not start in Ray's fixed 30 s (host load "
                        f"{os.getloadavg()[0]:.0f}): {str(err).splitlines()[0]}")
        nodes.wait_for_nodes()
        ray.init(address=nodes.address, log_to_driver=False, logging_level="error")
        try:
            yield {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        finally:
            ray.shutdown()
            nodes.shutdown()


def sweep(tmp_path: Path, data: dict, exclusive: bool = False, listener: Listener | None = None):
    out = tmp_path / "sweep"
    out.mkdir()
    driver = Driver(parse_grid(data, "grid.toml"), out, "ray", listener)
    return out, driver, driver.run(RayExecutor(exclusive_host=exclusive))


def test_runs_land_on_both_nodes_a_failing_run_does_not_stop_the_others_and_proofs_match(
        cluster, tmp_path, capsys):
    assert len(cluster) == 2
    data = {"base": SMALL, "proofs": True, "cells": {
        "a": {}, "b": {"memory_mode": "zerocopy"}, "broken": {"inject_fault": "batch_add:1"},
        "c": {"seed": 9}, "d": {"memory_mode": "pinned"}}}
    out, _, index = sweep(tmp_path, data)
    status = {e.label: e.status for e in index.entries}
    assert status == {"a": "completed", "b": "completed", "broken": "failed", "c": "completed",
                      "d": "completed"}
    broken = next(e for e in index.entries if e.label == "broken")
    assert "fault injected into batch_add of partition 1" in broken.error
    assert {e.node for e in index.entries} == cluster  # both nodes ran runs
    assert read_index(out).status == "completed"
    for e in index.entries:  # each trace came back over the object store and was written here
        trace = load(out / e.trace)
        assert trace.config == e.config and e.host and e.end > e.start
    direct = tmp_path / "direct.json"
    assert main(["run", "--backend", "cpu", "--partitions", "3", "--log2-constraints", "5", "--seed", "9",
                 "--no-trace", "--no-progress", "--proofs", str(direct)]) == 0
    capsys.readouterr()
    assert (out / "c.proofs.json").read_bytes() == direct.read_bytes()


def test_exclusive_host_keeps_every_run_alone_on_its_node(cluster, tmp_path):
    # Two cores each: without exclusive placement two runs would share a four-core node.
    base = {**SMALL, "synth_threads": 1, "gpu_workers": 1, "partitions": 4}
    assert demand(parse_grid({"base": base}).cells[0].config, 4, True) == {"num_cpus": 2, "num_gpus": 0}
    _, _, index = sweep(tmp_path, {"base": base, "repeats": 3, "cells": {"x": {}, "y": {}}}, exclusive=True)
    assert [e.status for e in index.entries] == ["completed"] * 6
    assert {e.node for e in index.entries} == cluster
    for node in cluster:
        spans = sorted((e.start, e.end) for e in index.entries if e.node == node)
        assert all(end <= later for (_, end), (later, _) in itertools.pairwise(spans)), spans


def test_a_stop_keeps_the_finished_runs_and_cancels_the_rest(cluster, tmp_path):
    class StopAfterFirst(Listener):
        def __init__(self) -> None:
            self.driver: Driver | None = None

        def finished(self, entry) -> None:
            assert self.driver is not None
            self.driver.stop()

    listener = StopAfterFirst()
    out = tmp_path / "sweep"
    out.mkdir()
    # Two slow runs take both nodes; the other four wait for them.
    data = {"base": {**SMALL, "partitions": 6, "log2_constraints": 7}, "repeats": 3,
            "cells": {"quick": {"partitions": 1, "log2_constraints": 5}, "slow": {}}}
    driver = Driver(parse_grid(data), out, "ray", listener)
    listener.driver = driver
    index = driver.run(RayExecutor(stop_grace_s=30))
    statuses = [e.status for e in index.entries]
    assert index.status == "stopped" and "completed" in statuses
    assert set(statuses) <= {"completed", "cut_short", "not_run"} and "not_run" in statuses
    for e in index.entries:
        if e.status == "completed":
            assert load(out / e.trace).meta["outcome"] == "completed"
        if e.status == "cut_short" and e.trace:
            assert load(out / e.trace).meta["outcome"] == "stopped"
    assert read_index(out).status == "stopped"
