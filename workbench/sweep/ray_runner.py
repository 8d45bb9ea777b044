"""What the Ray executor runs on the cluster's nodes: `Runner`, a long-lived process that runs
runs one after another (the package, numpy and the pipeline imported once, not once a run).
The driver asks a runner for its news (`news`: the run it works on, where, its partitions
done) and to stop (`stop`), both served on a second thread while `run` works, so a run never
waits on the driver nor on Ray: blocking on Ray inside a run would also hand its cores back
to Ray for the time of the wait, and another run would start on them. (No actor in between
to carry the news: it would be one more process, its start alone about 3 s of CPU.)

A runner writes its run's trace and proofs straight into the sweep's folder when it sees that
folder (the same host, or a file system shared with the driver: the folder holds the token
the driver put there); else they come back as bytes through Ray's object store.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

from workbench.config import RunConfig
from workbench.sweep.cell import CellOutcome, execute_cell

TOKEN = ".sweep-token"  # in the sweep's folder while the executor runs


class Runner:
    """Runs on one node, with the GPUs it was created with, for the whole sweep."""

    def __init__(self) -> None:
        import ray

        import workbench.pipeline.backends
        import workbench.pipeline.run
        import workbench.trace.store  # noqa: F401 - imported once here rather than in the first run

        context = ray.get_runtime_context()
        self.node = context.get_node_id()
        self.gpus = list(ray.get_gpu_ids())
        self.host = socket.gethostname()
        self._stop = threading.Event()  # never cleared: a stopped runner is not used again
        self._shared: dict[str, bool] = {}
        self._now: list[Any] | None = None  # [run, GPU ids, partitions done, partitions] while it runs

    def ready(self) -> tuple[str, str, list[Any]]:
        return self.host, self.node, self.gpus

    def run(self, k: int, config: dict[str, Any], fault: str | None, keep_proofs: bool, gpus: int,
            label: str, folder: str, token: str) -> CellOutcome:
        """Run `k`, on the first `gpus` of the runner's GPUs (devices 0.. as the run sees them)."""
        cell = RunConfig.from_dict(config)
        used = self.gpus[:gpus]
        now = self._now = [k, used, 0, cell.partitions]

        def progress(done: int, total: int) -> None:
            now[2:] = [done, total]

        into = (Path(folder), label) if self._sees(folder, token) else None
        try:
            return execute_cell(cell, fault, keep_proofs, progress, self._stop.is_set, used, self.node, into)
        finally:
            self._now = None

    def news(self) -> tuple[Any, ...] | None:
        """(run, host, GPU ids, node, partitions done, partitions) of the run under way, if any."""
        now = self._now
        return None if now is None else (now[0], self.host, now[1], self.node, now[2], now[3])

    def stop(self) -> None:
        self._stop.set()

    def _sees(self, folder: str, token: str) -> bool:
        if folder not in self._shared:
            try:
                self._shared[folder] = (Path(folder) / TOKEN).read_text(encoding="utf-8") == token
            except OSError:
                self._shared[folder] = False
        return self._shared[folder]
