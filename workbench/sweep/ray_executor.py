"""The Ray executor: the runs spread over a cluster joined by address, or over a local one
started for the sweep and shut down after (workbench/ray_cluster.py, which fleets use too).
Ray is imported here alone, and only when used.

What a run asks of the scheduler: a GPU run one GPU per GPU it drives (`gpus`); every run the
cores its threads keep busy (synthesis threads, GPU workers, host-load threads), capped at the
node's, so that two runs on one host do not share cores unknowingly. With `exclusive_host` a
run is alone on its host, as memory-contention measurements need.

The runs go to long-lived runners (ray_runner.py), a process each holding its GPUs, placed
by the executor itself (ray_pool.py, which also counts every run's cores) with a hard node
affinity: a runner imports the package once and runs one run after another, so a run pays
neither a process start nor the imports (a Ray task for GPUs gets a fresh process every
time: about 2.6 s of CPU on the development machine, against 2% of a run's wall to spend).
Its trace goes straight into the sweep's folder when the runner's host sees it. Ctrl-C (or
a stop) ends the runners whose run has not begun, asks the others to stop (each keeps its
trace) and waits a while for them.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from typing import Any

from workbench.config import RunConfig
from workbench.ray_cluster import Connection
from workbench.sweep.cell import CUT_SHORT, FAILED, CellOutcome
from workbench.sweep.grid import Cell
from workbench.sweep.ray_pool import Pool, Shape, Slot
from workbench.sweep.ray_runner import TOKEN, Runner
from workbench.sweep.run import Driver
from workbench.trace import output

POLL_S = 0.2  # the longest wait for a run's end before looking at a stop or the runners' news
NEWS_S = 0.5  # how often the busy runners are asked for their news (a run started, partitions done)
NEWS_WAIT_S = 2.0  # on a stop, how long the runners get to say whether their run has begun
STOP_GRACE_S = 60.0  # how long stopped runs get to bring their traces back before they are ended
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


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, exclusive_host: bool = False,
                 stop_grace_s: float = STOP_GRACE_S) -> None:
        self.address = address
        self.exclusive_host = exclusive_host
        self.stop_grace_s = stop_grace_s
        self._connection: Connection | None = None  # the cluster joined, or started, for the sweep
        self.nodes: dict[str, dict[str, float]] = {}
        self._notes: list[str] | None = None

    def open(self) -> list[str]:
        """Start or join the cluster (once: a notebook opens it on its own thread, where Ray
        may set its signal handlers, before the sweep's thread runs)."""
        import ray

        from workbench.ray_cluster import RayUnreachable, connect

        if self._notes is not None:
            return self._notes
        try:
            self._connection = connect(self.address, purpose="this sweep")
        except RayUnreachable as err:
            raise ExecutorUnavailable(f"{err} (--local runs the cells here without Ray)") from None
        self.nodes = {n["NodeID"]: dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")}
        cpus = sum(r.get("CPU", 0) for r in self.nodes.values())
        gpus = sum(r.get("GPU", 0) for r in self.nodes.values())
        placement = ", each run alone on its host" if self.exclusive_host else ""
        self._notes = [f"on {self._connection.where}: {len(self.nodes)} nodes, {cpus:g} CPUs, {gpus:g} GPUs"
                       f"{placement}"]
        return self._notes

    def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()
        self._notes = None

    # -- scheduling ---------------------------------------------------------------------------
    def execute(self, runs: list[Cell], keep_proofs: bool, driver: Driver) -> None:
        import ray

        token = uuid.uuid4().hex
        output.write_text(driver.folder / TOKEN, token)
        state = _Sweep(ray, self, runs, keep_proofs, driver, token)
        try:
            state.run()
        finally:
            state.end_all()
            (driver.folder / TOKEN).unlink(missing_ok=True)


class _Sweep:
    """One execute(): the waiting runs, the runners and what each works on."""

    def __init__(self, ray: Any, executor: RayExecutor, runs: list[Cell], keep_proofs: bool,
                 driver: Driver, token: str) -> None:
        self.ray, self.executor, self.runs, self.keep_proofs = ray, executor, runs, keep_proofs
        self.driver, self.token = driver, token
        nodes = executor.nodes
        self.pool = Pool(nodes, executor.exclusive_host)
        self.has_gpus = any(r.get("GPU", 0.0) > 0 for r in nodes.values())
        self.most_gpus = max((r.get("GPU", 0.0) for r in nodes.values()), default=0.0)
        self.runner_class = ray.remote(Runner)
        self.handles: dict[int, Any] = {}  # slot key -> runner actor
        self.waiting = deque(range(len(runs)))
        self.inflight: dict[Any, Slot] = {}  # a run's outcome ref -> the slot that runs it
        self.seen: set[int] = set()  # runs whose start arrived
        self.ended: set[int] = set()
        self.asked = 0.0
        self.news: dict[Any, int] = {}  # a runner's news ref -> its slot key

    def run(self) -> None:
        try:
            self.fill()
            while self.inflight or self.waiting:
                self.collect(POLL_S)
                self.fill()
                if self.driver.stop_requested():
                    break
        except KeyboardInterrupt:
            self.stop()
            raise
        if self.inflight or self.waiting:
            self.stop()

    def shape_of(self, k: int) -> Any:
        config = self.runs[k].config

        def shape_on(node_cpus: float) -> Shape:
            asked = demand(config, node_cpus, self.has_gpus)
            return asked["num_cpus"], asked["num_gpus"]
        return shape_on

    def fill(self) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        while self.waiting:
            k = self.waiting[0]
            shape_on = self.shape_of(k)
            if not self.pool.feasible(shape_on):
                self.waiting.popleft()
                gpus = shape_on(float("inf"))[1]
                now = time.time()
                said = f"needs {gpus:g} GPUs and no node of the cluster has " + \
                    ("that many" if self.most_gpus else "any")
                self.finish(k, CellOutcome(FAILED, said, "", now, now))
                continue
            placement = self.pool.place(shape_on)
            if placement is None:
                return
            self.waiting.popleft()
            for slot in placement.end:
                self.end_runner(slot)
            slot = self.pool.take(placement, k)
            if slot.key not in self.handles:
                # No cores asked of Ray: the pool counts them per run (a runner outlives its run).
                self.handles[slot.key] = self.runner_class.options(
                    num_cpus=0, num_gpus=slot.gpus, max_concurrency=2,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(slot.node, soft=False)).remote()
            cell = self.runs[k]
            ref = self.handles[slot.key].run.remote(
                k, cell.config.to_dict(), cell.spec.fault, self.keep_proofs, int(placement.shape[1]),
                cell.label, str(self.driver.folder), self.token)
            self.inflight[ref] = slot

    def finish(self, k: int, outcome: CellOutcome, slot: Slot | None = None) -> None:
        self.ended.add(k)
        if k not in self.seen and outcome.host:
            self.driver.started(k, outcome.host, outcome.gpus, outcome.node)
        self.driver.finished(k, outcome)
        if slot is not None:
            if outcome.status == FAILED:  # a run that failed may leave its process unfit: a fresh one next
                self.end_runner(slot)
            else:
                self.pool.release(slot)

    def ask(self) -> None:
        """Take the news that came back, and ask every busy runner not yet asked. Never waits:
        a runner still starting answers only once started."""
        self.asked = time.monotonic()
        self.take_news(0.0)
        asked = set(self.news.values())
        for slot in self.inflight.values():
            if slot.key in self.handles and slot.key not in asked:
                self.news[self.handles[slot.key].news.remote()] = slot.key

    def take_news(self, timeout: float) -> None:
        if not self.news:
            return
        ready, _ = self.ray.wait(list(self.news), num_returns=len(self.news), timeout=timeout)
        for ref in ready:
            self.news.pop(ref)
            try:
                news = self.ray.get(ref)
            except self.ray.exceptions.RayError:  # the runner died: its run's outcome says how
                continue
            if news is None or news[0] in self.ended:
                continue
            k, host, gpus, node, done, total = news
            if k not in self.seen:
                self.seen.add(k)
                self.driver.started(k, host, gpus, node)
            self.driver.progress(k, done, total)

    def collect(self, timeout: float) -> None:
        if not self.inflight:
            return
        ready, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=timeout)
        if not ready and time.monotonic() - self.asked >= NEWS_S:
            self.ask()
        for ref in ready:
            slot = self.inflight.pop(ref)
            assert slot.run is not None
            self.finish(slot.run, _outcome(self.ray, ref), slot)

    def stop(self) -> None:
        """End the runners whose run has not begun, ask the rest to stop, and wait a while for
        their traces."""
        self.waiting.clear()
        try:
            self.news.clear()
            self.ask()  # which runs have begun: a runner still starting has not begun its run
            self.take_news(NEWS_WAIT_S)
            for ref, slot in list(self.inflight.items()):
                if slot.run not in self.seen:
                    self.inflight.pop(ref)
                    self.end_runner(slot)
                else:
                    self.handles[slot.key].stop.remote()
            deadline = time.monotonic() + self.executor.stop_grace_s
            while self.inflight and time.monotonic() < deadline:
                self.collect(POLL_S)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting for the stopped runs
            pass
        for slot in list(self.inflight.values()):
            self.end_runner(slot)
        self.inflight.clear()

    def end_runner(self, slot: Slot) -> None:
        self.pool.drop(slot)
        handle = self.handles.pop(slot.key, None)
        if handle is not None:
            self.ray.kill(handle)

    def end_all(self) -> None:
        for slot in list(self.pool.slots):
            self.end_runner(slot)


def _outcome(ray: Any, ref: Any) -> CellOutcome:
    """A run's outcome; a run whose runner died or was ended still gets one, saying how."""
    now = time.time()
    try:
        outcome: CellOutcome = ray.get(ref)
        return outcome
    except ray.exceptions.TaskCancelledError:
        return CellOutcome(CUT_SHORT, "cancelled", "", now, now)
    except ray.exceptions.RayError as err:
        said = (str(err).strip().splitlines() or [type(err).__name__])[-1]
        return CellOutcome(FAILED, f"{type(err).__name__}: {said}", "", now, now)
