"""Where the Ray executor puts a run (workbench/sweep/ray_pool.py), without Ray: an idle runner of
the run's GPU count is reused while its node has the cores; cores are counted per run, GPUs per
runner; idle runners holding GPUs are ended only to make room; with `exclusive` a node takes one
run at a time and keeps one runner holding all its GPUs."""

from __future__ import annotations

from workbench.config import RunConfig
from workbench.sweep.ray_executor import demand
from workbench.sweep.ray_pool import Pool

NODES = {"a": {"CPU": 8.0, "GPU": 2.0}, "b": {"CPU": 4.0, "GPU": 0.0}}


def shape(cpus: float, gpus: float = 0.0):
    return lambda node_cpus: (min(cpus, node_cpus), gpus)


def test_an_idle_runner_of_the_runs_gpu_count_is_reused_while_its_node_has_the_cores():
    pool = Pool(NODES)
    first = pool.take(pool.place(shape(4)), 0)
    assert (first.node, first.gpus, first.cpus) == ("a", 0.0, 4)
    pool.release(first)
    again = pool.place(shape(6))  # another run's cores, the same GPU count: the same runner
    assert again.slot is first and not again.end
    pool.take(again, 1)
    second = pool.take(pool.place(shape(4)), 2)  # a has 2 cores left: a new runner on b
    assert second.node == "b" and second is not first
    assert pool.room("a") == (2.0, 2.0) and pool.room("b") == (0.0, 0.0)
    assert pool.place(shape(4)) is None  # nowhere: it waits, in the grid's order


def test_runners_hold_gpus_for_life_and_idle_ones_are_ended_only_to_make_room():
    pool = Pool(NODES)
    one = pool.take(pool.place(shape(2, 1)), 0)
    two = pool.take(pool.place(shape(2, 1)), 1)
    assert (one.node, two.node) == ("a", "a") and pool.room("a") == (4.0, 0.0)
    pool.release(one)
    pool.release(two)
    assert pool.room("a") == (8.0, 0.0)  # idle: the cores are free, the GPUs still held
    reuse = pool.place(shape(2, 1))
    assert reuse.slot is one and not reuse.end
    both = pool.place(shape(2, 2))  # two GPUs in one runner: the idle one-GPU runners make way
    assert both.slot is None and both.node == "a" and len(both.end) == 2
    pool.take(both, 2)
    assert len(pool.slots) == 1 and pool.slots[0].gpus == 2.0
    assert pool.place(shape(1, 1)) is None  # the GPUs are busy


def test_exclusive_one_run_a_node_and_one_runner_a_node_holding_all_its_gpus():
    pool = Pool(NODES, exclusive=True)
    first = pool.take(pool.place(shape(2, 1)), 0)
    assert (first.node, first.gpus) == ("a", 2.0)  # all of a's GPUs, whatever the run asks
    second = pool.take(pool.place(shape(2)), 1)
    assert second.node == "b"  # a has cores left, but a run there already
    assert pool.place(shape(1)) is None
    pool.release(first)
    again = pool.place(shape(4, 2))  # another run's size: a's runner serves it
    assert again.slot is first
    pool.take(again, 2)
    assert pool.place(shape(1)) is None


def test_a_run_no_node_can_hold_is_told_apart_from_one_that_waits():
    pool = Pool(NODES)
    assert not pool.feasible(shape(1, 3))
    assert pool.feasible(shape(64, 2))  # cores are capped at the node's
    exclusive = Pool(NODES, exclusive=True)
    assert exclusive.place(shape(1, 2)).node == "a"
    assert Pool({"b": NODES["b"]}, exclusive=True).place(shape(1, 1)) is None


def test_demand_counts_the_runs_threads_capped_at_the_node_and_gpus_only_for_gpu_runs():
    config = RunConfig(backend="gpu", gpus=2, gpu_workers=2, synth_threads=6, host_load_threads=1)
    assert demand(config, 64, True) == {"num_cpus": 11.0, "num_gpus": 2.0}  # 6 + 2*2 + 1
    assert demand(config, 8, True)["num_cpus"] == 8.0
    cpu = RunConfig(backend="cpu", synth_threads=1, gpu_workers=1)
    assert demand(cpu, 8, True) == {"num_cpus": 2.0, "num_gpus": 0.0}
    assert demand(RunConfig(backend="auto"), 8, True)["num_gpus"] == 1.0
    assert demand(RunConfig(backend="auto"), 8, False)["num_gpus"] == 0.0
