"""`workbench sweep` on Ray: one cluster of two nodes started here for the module (four cores
and a GPU, faked as a resource, on each; the CPU backend does the work): runs land on both
nodes, `--exclusive-host` keeps every run alone on its node, a failing run does not stop the
others, a stop keeps the finished runs, and every run's seed and proofs are those of the same
cell run directly. Apart: `workbench sweep` as a command on a local cluster of its own,
interrupted by SIGINT, keeps its finished runs and leaves no process of its cluster behind.
`workbench fleet --parallel ray` joins and leaves clusters the same way (workbench/ray_cluster.py):
on the module's nodes by address, and on a cluster it starts (the nodes again, handed over
as if started for it), which it stops after a Ctrl-C too."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from fleet_hosts import COPY_BYTES, LINK_GBPS, plant, plant_garbage

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (the cluster extra: pip install 'workbench[cluster]')")

from workbench.analysis.verdict import DiagnoseOptions  # noqa: E402
from workbench.cli import main  # noqa: E402
from workbench.fleet import expand, read_fleet  # noqa: E402
from workbench.ray_cluster import ClusterStartError, LocalCluster, start  # noqa: E402
from workbench.sweep import Driver, Listener, parse_grid, read_index  # noqa: E402
from workbench.sweep.local import LocalExecutor  # noqa: E402
from workbench.sweep.ray_executor import RayExecutor, demand  # noqa: E402
from workbench.trace import load  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
SMALL = {"backend": "cpu", "partitions": 3, "log2_constraints": 5}


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """The module's two nodes, shared by every test here (a start costs 15-50 s on two cores)."""
    with pytest.MonkeyPatch.context() as patch:
        # The nodes' workers inherit this: the proving keys and native code this session built.
        patch.setenv("WORKBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "srs-cache"))
        try:
            started = start([{"num_cpus": 4, "num_gpus": 1}, {"num_cpus": 4, "num_gpus": 1}])
        except ClusterStartError as err:
            pytest.skip(str(err))
        try:
            yield started
        finally:
            started.stop()


@pytest.fixture(scope="module")
def cluster(nodes):
    """This process connected to the nodes (as a notebook that joined a cluster is); their ids."""
    ray.init(address=nodes.address, log_to_driver=False, logging_level="error")
    try:
        yield {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()


@pytest.fixture
def unconnected(nodes):
    """The nodes, this process not connected to them: the fleet's tests, which join and leave
    the nodes themselves, come before the first test that asks for `cluster` (a connection
    made in a test's teardown would outlive the test's own check that it left no thread)."""
    assert not ray.is_initialized(), "run the tests that use `unconnected` before those that use `cluster`"
    yield nodes
    ray.shutdown()


def sweep(tmp_path: Path, data: dict, executor=None, listener: Listener | None = None, name: str = "sweep"):
    out = tmp_path / name
    out.mkdir()
    driver = Driver(parse_grid(data, "grid.toml"), out, "ray", listener)
    if listener is not None:
        listener.driver = driver  # type: ignore[attr-defined]
    return out, driver.run(executor or RayExecutor())


FLEET_OPTIONS = DiagnoseOptions(LINK_GBPS, COPY_BYTES)


def _fleet(folder: Path) -> list[str]:
    plant(folder, ("copy", "lock", "synth", "healthy"))
    plant_garbage(folder)
    return expand([folder])


def _record_key(r):
    return r.host, r.bound, round(r.cost, 9), r.evidence


def test_fleet_at_an_address_reads_what_is_read_here_and_leaves_the_cluster_running(unconnected, tmp_path):
    files = _fleet(tmp_path)
    on_ray = read_fleet(files, FLEET_OPTIONS, parallel="ray", workers=1, address=unconnected.address)
    here = read_fleet(files, FLEET_OPTIONS, parallel="serial")
    assert on_ray.parallel == f"ray (the Ray cluster at {unconnected.address})"
    assert not on_ray.interrupted and len(on_ray.records) == len(files) > 4
    assert sorted(map(_record_key, on_ray.records)) == sorted(map(_record_key, here.records))
    assert not ray.is_initialized()  # left as it found it: not connected
    assert all(n.remaining_processes_alive() for n in unconnected.cluster.list_all_nodes())


def test_fleet_stops_the_cluster_it_started_when_ctrl_c_ends_the_read(unconnected, tmp_path, monkeypatch):
    import workbench.ray_cluster as ray_cluster

    stops, cancelled = [], []

    class Started:  # the module's nodes, handed over as a cluster started for this read
        def shutdown(self) -> None:
            stops.append(ray.is_initialized())

    def ctrl_c(*args, **kwargs):  # where Ctrl-C finds the reading: waiting for the tasks
        raise KeyboardInterrupt

    def cancel(ref, **kwargs):
        cancelled.append(kwargs)
        real_cancel(ref, **kwargs)

    real_cancel = ray.cancel
    monkeypatch.setattr(ray_cluster, "start_here", lambda: LocalCluster(Started(), unconnected.address, 0.0))
    monkeypatch.setattr(ray, "wait", ctrl_c)
    monkeypatch.setattr(ray, "cancel", cancel)
    files = _fleet(tmp_path)
    read = read_fleet(files, FLEET_OPTIONS, parallel="ray", workers=2)
    assert read.interrupted and read.records == () and read.files == len(files) and read.parallel == "ray"
    assert cancelled == [{"force": True}] * 2  # the two tasks in flight ended, the others never sent
    assert stops == [False]  # stopped once, after this process left it
    assert not ray.is_initialized()
    # The same start and stop as a sweep's (whose SIGINT test below ends a real one), said so.
    connection = ray_cluster.connect(purpose="this read")
    assert connection.where.startswith("a local Ray cluster started for this read in ")
    connection.close()
    assert stops == [False, False] and not ray.is_initialized()


def test_runs_land_on_both_nodes_a_failing_run_does_not_stop_the_others_and_results_equal_direct_runs(
        cluster, tmp_path, capsys):
    assert len(cluster) == 2
    data = {"base": SMALL, "proofs": True, "cells": {
        "a": {}, "b": {"memory_mode": "zerocopy"}, "broken": {"inject_fault": "batch_add:1"},
        "c": {"seed": 9}, "d": {"memory_mode": "pinned", "seed": 4}}}
    out, index = sweep(tmp_path, data)
    status = {e.label: e.status for e in index.entries}
    assert status == {"a": "completed", "b": "completed", "broken": "failed", "c": "completed",
                      "d": "completed"}
    broken = next(e for e in index.entries if e.label == "broken")
    assert "fault injected into batch_add of partition 1" in broken.error
    assert {e.node for e in index.entries} == cluster  # both nodes ran runs
    assert len(index.entries) > len(cluster)  # so some runner ran more than one run
    assert read_index(out).status == "completed"
    # The same grid run directly, cell by cell in this process: the same seeds and proofs.
    here, direct = sweep(tmp_path, data, LocalExecutor(), name="direct")
    for e, d in zip(index.entries, direct.entries, strict=True):
        trace = load(out / e.trace)
        assert trace.config == e.config == d.config and e.seed == d.seed == e.config["seed"]
        assert e.host and e.end > e.start and e.cpu_s > 0
        if e.status == "completed":
            assert (out / e.proofs).read_bytes() == (here / d.proofs).read_bytes(), e.label
    assert (out / "c.proofs.json").read_bytes() != (out / "a.proofs.json").read_bytes()  # seeds differ
    # And one through `workbench run` itself.
    path = tmp_path / "run.json"
    assert main(["run", "--backend", "cpu", "--partitions", "3", "--log2-constraints", "5", "--seed", "9",
                 "--no-trace", "--no-progress", "--proofs", str(path)]) == 0
    capsys.readouterr()
    assert (out / "c.proofs.json").read_bytes() == path.read_bytes()
    assert not (out / ".sweep-token").exists()


def test_exclusive_host_keeps_every_run_alone_on_its_node(cluster, tmp_path):
    # Two cores each: without exclusive placement two runs would share a four-core node.
    base = {**SMALL, "synth_threads": 1, "gpu_workers": 1, "partitions": 4}
    assert demand(parse_grid({"base": base}).cells[0].config, 4, True) == {"num_cpus": 2, "num_gpus": 0}
    _, index = sweep(tmp_path, {"base": base, "repeats": 2, "cells": {"x": {}, "y": {}}},
                     RayExecutor(exclusive_host=True))
    assert [e.status for e in index.entries] == ["completed"] * 4
    assert {e.node for e in index.entries} == cluster
    for node in cluster:
        spans = sorted((e.start, e.end) for e in index.entries if e.node == node)
        assert all(end <= later for (_, end), (later, _) in itertools.pairwise(spans)), spans


def test_a_stop_keeps_the_finished_runs_and_cancels_the_rest(cluster, tmp_path):
    class StopAfterFirst(Listener):
        driver: Driver

        def finished(self, entry) -> None:
            self.driver.stop()

    # Two slow runs take both nodes; the other four wait for them.
    data = {"base": {**SMALL, "partitions": 6, "log2_constraints": 7}, "repeats": 3,
            "cells": {"quick": {"partitions": 1, "log2_constraints": 5}, "slow": {}}}
    out, index = sweep(tmp_path, data, RayExecutor(stop_grace_s=30), StopAfterFirst())
    statuses = [e.status for e in index.entries]
    assert index.status == "stopped" and "completed" in statuses
    assert set(statuses) <= {"completed", "cut_short", "not_run"} and "not_run" in statuses
    for e in index.entries:
        if e.status == "completed":
            assert load(out / e.trace).meta["outcome"] == "completed"
        if e.status == "cut_short" and e.trace:
            assert load(out / e.trace).meta["outcome"] == "stopped"
    assert read_index(out).status == "stopped"


def _tagged(tag: str) -> list[str]:
    """The processes whose environment carries `tag`: the command's and all it started."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone, or not ours to read
            continue
        if tag.encode() in environ:
            found.append(f"{pid} {command[:120]}")
    return found


def test_ctrl_c_on_ray_keeps_finished_runs_names_the_cut_ones_and_stops_the_local_cluster(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('[base]\nbackend = "cpu"\nlog2_constraints = 8\npartitions = 40\nsynth_threads = 1\n'
                    "gpu_workers = 1\n[cells.a]\npartitions = 2\n[cells.b]\n[cells.c]\n[cells.d]\n")
    out, tag = tmp_path / "sweep", uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_TEST_TAG": tag}
    command = [sys.executable, "-m", "workbench.cli", "sweep", str(grid), "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # the local cluster's start included
        while time.monotonic() < deadline and proc.poll() is None:  # a run finished, the next under way
            if (out / "index.json").exists() and read_index(out).entries[1].status == "running":
                break
            time.sleep(0.05)
        else:
            proc.kill()
            raise AssertionError(f"the sweep did not get to its second run: {proc.communicate()[1][-2000:]}")
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    index = read_index(out)
    assert index.status == "interrupted" and index.executor == "ray"
    assert [e.status for e in index.entries] == ["completed", "cut_short", "not_run", "not_run"]
    assert load(out / index.entries[0].trace).meta["partitions_done"] == 2
    cut = load(out / index.entries[1].trace)  # the stopped run's trace holds what it did
    assert cut.meta["outcome"] == "stopped" and cut.meta["partitions_done"] < 40
    assert "b: cut short" in stderr and "Traceback" not in stderr, stderr  # the cut run named
    assert "a " in stdout  # the finished run's table
    left = _tagged(f"WORKBENCH_TEST_TAG={tag}")
    for _ in range(50):  # the cluster's processes end with it; give the last of them a moment
        if not left:
            break
        time.sleep(0.1)
        left = _tagged(f"WORKBENCH_TEST_TAG={tag}")
    assert not left, left

