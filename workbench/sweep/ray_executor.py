"""The Ray executor: every run a Ray task, on a cluster joined by address or on a local one
started for the sweep and shut down after. Ray is imported here alone, and only when used.

What a run asks of the scheduler: a GPU run one GPU per GPU it drives (`gpus`); every run the
cores its threads keep busy (synthesis threads, GPU workers, host-load threads), capped at the
largest node's, so that two runs on one host do not share cores unknowingly. With
`exclusive_host` a run is alone on its host, as memory-contention measurements need; Ray has
no resource for that on an existing cluster, so the executor keeps the set of free nodes and
pins each run to one with a hard node affinity, freeing it when the run ends.

Each task sends what it does through a small actor (`_Channel`): its start (host, node, GPU
ids) and its partitions done; it asks the same actor whether the sweep is stopping, so a
stopped run ends at its next step with its trace, which comes back as bytes (no file system
is assumed to be shared). Ctrl-C cancels the tasks that have not started and stops the rest.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from workbench.config import RunConfig
from workbench.sweep.cell import CUT_SHORT, FAILED, CellOutcome, execute_cell
from workbench.sweep.grid import Cell
from workbench.sweep.run import Driver

POLL_S = 0.2
STOP_POLL_S = 0.5  # how often a running task asks whether the sweep is stopping
STOP_GRACE_S = 60.0  # how long stopped runs get to bring their traces back before they are killed
EXTRA_HINT = "pip install 'workbench[cluster]'"


class ExecutorUnavailable(RuntimeError):
    pass


def ray_unavailable_reason() -> str | None:
    try:
        import ray  # noqa: F401
    except ImportError:
        return f"Ray is not installed ({EXTRA_HINT})"
    return None


def demand(config: RunConfig, node_cpus: float, gpus_in_cluster: bool) -> dict[str, float]:
    """The resources one run asks Ray for (see the module's docstring)."""
    threads = config.synth_threads + config.workers + config.host_load_threads
    wants_gpu = config.backend == "gpu" or (config.backend == "auto" and gpus_in_cluster)
    return {"num_cpus": max(1.0, min(float(threads), node_cpus)),
            "num_gpus": float(config.gpus) if wants_gpu else 0.0}


class _Channel:
    """Events from the running tasks to the driver, and the stop flag the other way."""

    def __init__(self) -> None:
        self._events: list[tuple[Any, ...]] = []
        self._stop = False

    def tell(self, event: tuple[Any, ...]) -> None:
        self._events.append(event)

    def drain(self) -> list[tuple[Any, ...]]:
        events, self._events = self._events, []
        return events

    def stop(self) -> None:
        self._stop = True

    def stopped(self) -> bool:
        return self._stop


def _cell_task(k: int, config: dict[str, Any], fault: str | None, keep_proofs: bool,
               channel: Any) -> CellOutcome:
    import ray

    node = ray.get_runtime_context().get_node_id()
    gpus = list(ray.get_gpu_ids())
    channel.tell.remote(("start", k, socket.gethostname(), gpus, node))
    polled = [0.0, False]

    def progress(done: int, total: int) -> None:
        channel.tell.remote(("progress", k, done, total))

    def should_stop() -> bool:
        now = time.monotonic()
        if now - polled[0] >= STOP_POLL_S:
            polled[0], polled[1] = now, bool(ray.get(channel.stopped.remote()))
        return bool(polled[1])

    return execute_cell(RunConfig.from_dict(config), fault, keep_proofs, progress, should_stop, gpus, node)


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, exclusive_host: bool = False,
                 stop_grace_s: float = STOP_GRACE_S) -> None:
        self.address = address
        self.exclusive_host = exclusive_host
        self.stop_grace_s = stop_grace_s
        self._owns = False
        self.nodes: dict[str, dict[str, float]] = {}
        self._notes: list[str] | None = None

    def open(self) -> list[str]:
        """Start or join the cluster (once: a notebook opens it on its own thread, where Ray
        may set its signal handlers, before the sweep's thread runs)."""
        import ray

        if self._notes is not None:
            return self._notes
        if ray.is_initialized():
            where = "the Ray cluster this process is connected to"
        else:
            options: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
            if self.address is None:
                options["include_dashboard"] = False
            try:
                ray.init(address=self.address, **options)
            except Exception as err:  # a cluster that cannot be reached or a node that did not start
                said = (str(err).strip().splitlines() or [type(err).__name__])[0]
                where = f"the Ray cluster at {self.address}" if self.address else "a local Ray cluster"
                raise ExecutorUnavailable(f"cannot start or join {where}: {said} (--local runs the cells "
                                          "here without Ray)") from None
            self._owns = True
            where = f"the Ray cluster at {self.address}" if self.address else \
                "a local Ray cluster started for this sweep"
        self.nodes = {n["NodeID"]: dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")}
        cpus = sum(r.get("CPU", 0) for r in self.nodes.values())
        gpus = sum(r.get("GPU", 0) for r in self.nodes.values())
        placement = ", each run alone on its host" if self.exclusive_host else ""
        self._notes = [f"on {where}: {len(self.nodes)} nodes, {cpus:g} CPUs, {gpus:g} GPUs{placement}"]
        return self._notes

    def close(self) -> None:
        if self._owns:
            import ray

            ray.shutdown()
            self._owns = False
        self._notes = None

    # -- scheduling ---------------------------------------------------------------------------
    def execute(self, runs: list[Cell], keep_proofs: bool, driver: Driver) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        channel: Any = ray.remote(num_cpus=0)(_Channel).remote()
        task = ray.remote(_cell_task)
        largest = max((r.get("CPU", 0.0) for r in self.nodes.values()), default=1.0)
        most_gpus = max((r.get("GPU", 0.0) for r in self.nodes.values()), default=0.0)
        has_gpus = most_gpus > 0
        waiting = list(range(len(runs)))
        inflight: dict[Any, int] = {}
        pinned: dict[int, str] = {}
        free = {n for n, r in self.nodes.items() if r.get("CPU", 0.0) >= 1}  # a head node may have none
        seen: set[int] = set()  # runs whose start arrived
        ended: set[int] = set()

        def submit(k: int, node: str | None) -> None:
            config = runs[k].config
            options: dict[str, Any] = demand(config, self.nodes[node].get("CPU", 1.0) if node else largest,
                                             has_gpus)
            if node is not None:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
            ref = task.options(**options).remote(k, config.to_dict(), runs[k].spec.fault, keep_proofs,
                                                 channel)
            inflight[ref] = k

        def fill() -> None:
            while waiting:
                k = waiting[0]
                gpus = demand(runs[k].config, largest, has_gpus)["num_gpus"]
                if gpus > most_gpus:
                    waiting.pop(0)
                    finish(k, CellOutcome(FAILED, f"needs {gpus:g} GPUs and no node of the cluster has "
                                                  f"{'that many' if most_gpus else 'any'}", "", time.time(),
                                          time.time()))
                    continue
                if not self.exclusive_host:
                    submit(waiting.pop(0), None)
                    continue
                fitting = sorted(n for n in free if self.nodes[n].get("GPU", 0.0) >= gpus)
                if not fitting:
                    return
                waiting.pop(0)
                free.discard(fitting[0])
                pinned[k] = fitting[0]
                submit(k, fitting[0])

        def finish(k: int, outcome: CellOutcome) -> None:
            ended.add(k)
            if k not in seen and outcome.host:
                driver.started(k, outcome.host, outcome.gpus, outcome.node)
            driver.finished(k, outcome)
            if k in pinned:
                free.add(pinned.pop(k))

        def drain() -> None:
            events: list[tuple[Any, ...]] = ray.get(channel.drain.remote())
            for event in events:
                kind, k = event[0], event[1]
                if k in ended:
                    continue
                if kind == "start":
                    seen.add(k)
                    driver.started(k, event[2], event[3], event[4])
                elif kind == "progress":
                    driver.progress(k, event[2], event[3])

        def collect(timeout: float) -> None:
            if not inflight:
                return
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=timeout)
            drain()
            for ref in ready:
                k = inflight.pop(ref)
                finish(k, _outcome(ray, ref))

        try:
            fill()
            while inflight or waiting:
                collect(POLL_S)
                fill()
                if driver.stop_requested():
                    break
        except KeyboardInterrupt:
            self._stop(ray, channel, inflight, seen, waiting, collect)
            raise
        if inflight or waiting:
            self._stop(ray, channel, inflight, seen, waiting, collect)

    def _stop(self, ray: Any, channel: Any, inflight: dict[Any, int], seen: set[int], waiting: list[int],
              collect: Any) -> None:
        """Cancel what has not started, ask the rest to stop, and wait a while for their traces."""
        waiting.clear()
        try:
            for ref in [r for r, k in inflight.items() if k not in seen]:
                ray.cancel(ref)
                inflight.pop(ref)
            ray.get(channel.stop.remote())
            deadline = time.monotonic() + self.stop_grace_s
            while inflight and time.monotonic() < deadline:
                collect(POLL_S)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting for the stopped runs
            pass
        for ref in inflight:
            ray.cancel(ref, force=True)
        inflight.clear()


def _outcome(ray: Any, ref: Any) -> CellOutcome:
    """A task's outcome; a task that died or was cancelled still gets one, saying how."""
    now = time.time()
    try:
        outcome: CellOutcome = ray.get(ref)
        return outcome
    except ray.exceptions.TaskCancelledError:
        return CellOutcome(CUT_SHORT, "cancelled", "", now, now)
    except ray.exceptions.RayError as err:
        said = (str(err).strip().splitlines() or [type(err).__name__])[-1]
        return CellOutcome(FAILED, f"{type(err).__name__}: {said}", "", now, now)
