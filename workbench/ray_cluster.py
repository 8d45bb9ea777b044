"""Ray, for whatever in the workbench runs on it (a sweep's runs, a fleet's reads): `connect`
joins a cluster by address (or the one this process is connected to already), or starts one
on this machine (one node: every core, the GPUs found) and, on `close()`, shuts down what it
started and nothing else. The tests start nodes with faked GPUs (`start`). Nothing of a
cluster started here outlives `stop()`, Ctrl-C during its start included.

Why not `ray.init()`: each node's raylet gives its dashboard agent a fixed 15 s to report the
port it bound, and then aborts; and a node gets a fixed 30 s to register. A loaded machine
misses both (the agent is a Python process importing Ray, about 3 s of CPU: 20 s and more on
two busy cores), and `ray.init()` ends in "the current node timed out during startup". Here
fewer processes compete with the agents while a node starts: the log monitor and the
autoscaler's monitor (nothing here reads the one, a cluster of this machine has nothing to
scale) are left out, and no worker processes are started ahead of need (Ray starts one per
core when a driver connects, each importing Ray: a sweep's runners are all the workers it
needs); the agents' ports that Ray lets a caller pick are picked beforehand. A node that
still misses a wait is ended and started again, up to `ATTEMPTS` times.

Each node started from the main thread is tied to this process as `ray.init()` ties its own
(a reaper ends them if this process dies); Ray's SIGTERM handler, which would end the
process at once, is taken back out so that a stop signal still lets the sweep keep its runs.

`ray.cluster_utils.Cluster` is Ray's own way to start nodes from Python (its test harness).
Ray is imported inside the functions alone: importing this module needs no Ray.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

ATTEMPTS = 3
AGENT_PORTS = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port",
               "runtime_env_agent_port")


class ClusterStartError(RuntimeError):
    pass


class RayUnreachable(RuntimeError):
    """No cluster at the address, or none could be started here; the message is one line."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def local_gpus() -> int:
    """The GPUs Ray would find on this machine (capped by CUDA_VISIBLE_DEVICES, as Ray does)."""
    try:
        from ray._private.accelerators import get_accelerator_manager_for_resource

        manager = get_accelerator_manager_for_resource("GPU")
        if manager is None:
            return 0
        found = int(manager.get_current_node_num_accelerators())
        visible = manager.get_current_process_visible_accelerator_ids()
    except Exception:  # Ray moved its detection: no GPUs rather than no sweep
        return 0
    return min(found, len(visible)) if visible is not None else found


@dataclass
class LocalCluster:
    """Nodes started here; `address` is what `ray.init(address=...)` joins."""

    cluster: Any
    address: str
    started_s: float  # how long the nodes took to start, retries included
    attempts: int = 1
    notes: list[str] = field(default_factory=list)

    def stop(self) -> None:
        self.cluster.shutdown()


def _node_args(node: dict[str, Any], head: bool) -> dict[str, Any]:
    args: dict[str, Any] = {port: _free_port() for port in AGENT_PORTS}
    if head:
        args.update(include_dashboard=False, include_log_monitor=False, no_monitor=True, _system_config={
            "prestart_worker_first_driver": False, "enable_worker_prestart": False})
    return {**args, **node}


def _end_failed(err: BaseException) -> None:
    """End the processes of a node whose start raised: the node object is in the traceback's
    frames only (its constructor raised), and its processes would run on until this process
    exits, taking the cores from the next attempt."""
    from ray._private.node import Node

    tb = err.__traceback__
    while tb is not None:
        node = tb.tb_frame.f_locals.get("self")
        if isinstance(node, Node):
            with contextlib.suppress(Exception):
                node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
        tb = tb.tb_next


def start(nodes: list[dict[str, Any]], attempts: int = ATTEMPTS) -> LocalCluster:
    """Start a cluster of `nodes` (each `num_cpus`, `num_gpus`, ...; the first is the head).
    Raises ClusterStartError, in one line, when it cannot start in `attempts` tries."""
    from ray.cluster_utils import Cluster

    began = time.perf_counter()
    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGTERM) if main else None
    said = ""
    for attempt in range(1, attempts + 1):
        cluster = None
        try:
            cluster = Cluster(shutdown_at_exit=main)
            cluster.add_node(**_node_args(nodes[0], head=True))
            for node in nodes[1:]:
                cluster.add_node(**_node_args(node, head=False))
            cluster.wait_for_nodes(timeout=120)
            return LocalCluster(cluster, cluster.address, time.perf_counter() - began, attempt)
        except BaseException as err:  # a node that missed Ray's fixed wait: stop what started, again
            _end_failed(err)
            if cluster is not None:
                with contextlib.suppress(Exception):  # the next attempt or the error below says it
                    cluster.shutdown()
            if not isinstance(err, Exception):  # Ctrl-C while the nodes start: none is left behind
                raise
            said = first_line(err)
        finally:
            if main and handler is not None:
                signal.signal(signal.SIGTERM, handler)
    load = os.getloadavg()[0]
    raise ClusterStartError(f"a local Ray cluster did not start in {attempts} attempts "
                            f"({time.perf_counter() - began:.0f} s, load average {load:.1f}): {said}")


def start_here() -> LocalCluster:
    """One node: this machine's cores and GPUs."""
    return start([{"num_cpus": os.cpu_count() or 1, "num_gpus": local_gpus()}])


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


@dataclass
class Connection:
    """This process's hold on a cluster; `close()` undoes what `connect` did, no more."""

    where: str  # in words, for the notes: "the Ray cluster at ADDR", "a local Ray cluster started ..."
    joined: bool  # ray.init was called here (else this process was connected already)
    cluster: LocalCluster | None = None  # the one started here

    def close(self) -> None:
        if self.joined:
            import ray

            self.joined = False
            ray.shutdown()
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            cluster.stop()


def connect(address: str | None = None, purpose: str = "this run") -> Connection:
    """Join the cluster at `address`; without one, the cluster this process is connected to,
    else one started here for `purpose` (stopped by `close()`). Raises RayUnreachable in one
    line; whatever stops it (Ctrl-C too) leaves no cluster of its own running."""
    import ray

    if ray.is_initialized():
        return Connection("the Ray cluster this process is connected to", joined=False)
    where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
    cluster: LocalCluster | None = None
    try:
        if address is None:
            cluster = start_here()
        ray.init(address=address if cluster is None else cluster.address, logging_level=logging.ERROR,
                 log_to_driver=False)
    except BaseException as err:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.stop()
        if not isinstance(err, Exception):
            raise
        raise RayUnreachable(f"cannot start or join {where}: {first_line(err)}") from None
    if cluster is not None:
        where = f"a local Ray cluster started for {purpose} in {cluster.started_s:.0f} s"
    return Connection(where, joined=True, cluster=cluster)
