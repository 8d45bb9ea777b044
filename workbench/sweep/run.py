"""Running a sweep: the runs of a grid handed to an executor (this process, or a Ray cluster),
each one's trace and proofs written into the folder as it ends, the index rewritten after each.

The executor tells a `Driver` what happens (a run started on a host, partitions done, a run
ended with its outcome) and asks it whether to stop; the driver keeps the folder and tells a
`Listener` (the CLI's progress bar, the notebook's table). Ctrl-C reaches the executor, which
cancels what has not started, stops what runs (a stopped run keeps its trace) and raises it
again; the driver marks what never ran and saves the index saying the sweep was interrupted.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Protocol

from workbench.sweep.cell import CUT_SHORT, CellOutcome
from workbench.sweep.grid import Cell, Grid
from workbench.sweep.index import INDEX, NOT_RUN, PENDING, RUNNING, Entry, SweepIndex
from workbench.trace import output


class Listener:
    """What a view of a sweep hears; every method is optional."""

    def began(self, index: SweepIndex) -> None:
        pass

    def started(self, entry: Entry) -> None:
        pass

    def progress(self, entry: Entry) -> None:
        pass

    def finished(self, entry: Entry) -> None:
        pass

    def ended(self, index: SweepIndex) -> None:
        pass


class Executor(Protocol):
    name: str

    def open(self) -> list[str]:
        """Get ready (start or join a cluster); returns notes to show, one line each."""

    def execute(self, runs: list[Cell], keep_proofs: bool, driver: Driver) -> None:
        """Run every run, telling `driver`; returns when all ended or the driver asked to stop."""

    def close(self) -> None: ...


class SweepExists(ValueError):
    pass


class Driver:
    def __init__(self, grid: Grid, folder: Path, executor_name: str,
                 listener: Listener | None = None) -> None:
        self.grid = grid
        self.folder = folder
        self.listener = listener or Listener()
        self.runs = grid.runs()
        entries = [Entry(k, c.label, c.name, c.repeat, c.config.to_dict(), c.config.seed, c.spec.fault,
                         partitions=c.config.partitions) for k, c in enumerate(self.runs)]
        self.index = SweepIndex(grid.to_dict(), executor_name, entries)
        self._stop = threading.Event()
        self._lock = threading.Lock()

    # -- what the executor calls -----------------------------------------------------------
    def started(self, k: int, host: str, gpus: list[object] | None = None, node: str | None = None) -> None:
        entry = self.index.entries[k]
        entry.status, entry.host, entry.gpus, entry.node = RUNNING, host, list(gpus or []), node
        entry.start = time.time()
        with self._lock:
            self.index.write(self.folder)  # the index says what runs, too
        self.listener.started(entry)

    def progress(self, k: int, done: int, total: int) -> None:
        entry = self.index.entries[k]
        entry.partitions_done, entry.partitions = done, total
        self.listener.progress(entry)

    def finished(self, k: int, outcome: CellOutcome) -> None:
        entry = self.index.entries[k]
        entry.status, entry.error = outcome.status, outcome.error
        entry.host, entry.node = outcome.host or entry.host, outcome.node or entry.node
        entry.gpus = list(outcome.gpus) or entry.gpus
        if outcome.host:  # the run's own clock; an outcome made for a lost task only has its end
            entry.start, entry.wall_s = outcome.start, outcome.wall_s
        entry.end = outcome.end
        entry.partitions_done, entry.notices = outcome.partitions_done, list(outcome.notices)
        entry.cpu_s = outcome.cpu_s
        entry.trace, entry.proofs = outcome.trace_file, outcome.proofs_file  # written there by the run
        if outcome.trace is not None:
            entry.trace = output.write_bytes(self.folder / f"{entry.label}.wbtrace", outcome.trace).name
        if outcome.proofs is not None:
            entry.proofs = output.write_text(self.folder / f"{entry.label}.proofs.json", outcome.proofs).name
        with self._lock:
            self.index.write(self.folder)
        self.listener.finished(entry)

    def stop(self) -> None:
        """Ask the sweep to end (the notebook's Stop); safe from any thread."""
        self._stop.set()

    def stop_requested(self) -> bool:
        return self._stop.is_set()

    # -- running -----------------------------------------------------------------------------
    def run(self, executor: Executor) -> SweepIndex:
        index = self.index
        index.notes.extend(executor.open())
        index.started = time.time()
        index.write(self.folder)
        self.listener.began(index)
        interrupted = False
        try:
            executor.execute(self.runs, self.grid.proofs, self)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            for entry in index.entries:
                if entry.status == PENDING:
                    entry.status = NOT_RUN
                elif entry.status == RUNNING:  # the executor could not bring its outcome back
                    entry.status, entry.error = CUT_SHORT, entry.error or "stopped before it ended"
            index.status = ("interrupted" if interrupted else "stopped" if self.stop_requested()
                            else "completed")
            index.ended = time.time()
            index.write(self.folder)
            executor.close()
        self.listener.ended(index)
        if interrupted:
            raise KeyboardInterrupt
        return index


def prepare_folder(folder: str | Path | None, grid_name: str, create: bool = True) -> Path:
    """The sweep's folder: the one given (created, and refused when it holds a sweep already),
    else a new one under sweeps/. Without `create`, only checked."""
    if folder is None:
        if not create:
            output.check_folder(Path("sweeps"), "default folder sweeps/", created=True)
            return Path("sweeps")
        folder = output.fresh_run_path("sweeps", prefix=Path(grid_name).stem, suffix="")
    path = Path(folder)
    if (path / INDEX).exists():
        raise SweepExists(f"{path} holds a sweep already ({INDEX}); give a new folder with --out")
    if path.exists() and not path.is_dir():
        raise SweepExists(f"{path} is not a folder")
    output.check_folder(path, f"--out {path}", created=True)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
