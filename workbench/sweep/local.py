"""The local executor: the runs one after another in this process, each a pipeline of its own.
What `workbench sweep` uses where Ray is not installed (or with --local)."""

from __future__ import annotations

import socket

from workbench.sweep.cell import execute_cell
from workbench.sweep.grid import Cell
from workbench.sweep.run import Driver


class LocalExecutor:
    name = "local"

    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason  # why not on Ray, said once

    def open(self) -> list[str]:
        return [self.reason] if self.reason else []

    def execute(self, runs: list[Cell], keep_proofs: bool, driver: Driver) -> None:
        host = socket.gethostname()
        for k, cell in enumerate(runs):
            if driver.stop_requested():
                return
            driver.started(k, host)

            def progress(done: int, total: int, k: int = k) -> None:
                driver.progress(k, done, total)

            outcome = execute_cell(cell.config, cell.spec.fault, keep_proofs, progress, driver.stop_requested,
                                   into=(driver.folder, cell.label))
            driver.finished(k, outcome)
            if outcome.interrupted:  # the pipeline kept Ctrl-C to itself to save its trace: pass it on
                raise KeyboardInterrupt

    def close(self) -> None:
        pass
