"""A pipeline run on a background thread, and the record a finished run leaves behind.

The notebook must stay responsive while a run goes on, and the proving key's setup alone can
take seconds, so even starting the pipeline happens off the caller's thread. This module
touches no widget and no figure: the panel's poller reads `done`, `progress` and `record`.
A run given a `trace_path` streams its records to a journal beside it while it runs (a dead
kernel loses at most the last second) and saves the trace when it ends, as `workbench run` does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.analysis.summary import RunSummary, summarize
from workbench.config import RunConfig
from workbench.pipeline.backends import select_backend
from workbench.pipeline.run import FaultHook, Pipeline, RunResult
from workbench.prover.backend import Backend
from workbench.trace import output
from workbench.trace.container import Trace
from workbench.trace.journal import Journal
from workbench.trace.recorder import Recorder


@dataclass(frozen=True)
class RunRecord:
    number: int
    config: RunConfig
    trace: Trace
    outcome: str
    error: str | None
    wall_s: float
    summary: RunSummary
    trace_path: Path | None = None  # where the trace was saved, when the run was given one

    @property
    def label(self) -> str:
        c = self.config
        return (f"run {self.number}: {c.memory_mode}, lock {c.lock_scope}, "
                f"{f'{c.gpus} GPUs × ' if c.gpus > 1 else ''}{c.gpu_workers} workers, "
                f"{c.synth_threads} synth, {c.partitions}×2^{c.log2_constraints} ({self.outcome})")


class BackgroundRun:
    """Raises at construction (ConfigError, BackendUnavailable, OutputError for a trace path
    that cannot be written) when the run cannot start. With `trace_path` the trace is saved
    there when the run ends (`fresh`: an existing file is kept and the next free name taken)."""

    def __init__(
        self, config: RunConfig, number: int = 1, backend: Backend | None = None,
        fault: FaultHook | None = None, trace_path: str | os.PathLike[str] | None = None,
        fresh: bool = False,
    ) -> None:
        self.config = config
        self.number = number
        self.pipeline = Pipeline(config, backend or select_backend(config), fault=fault)
        self.result: RunResult | None = None
        self.error: BaseException | None = None
        self.trace_path: Path | None = None  # once saved
        self.save_error: str | None = None  # why it was not (the journal stays beside it)
        self._fresh = fresh
        self._journal: Journal | None = None
        if trace_path is not None and config.trace:
            target = output.check(trace_path, "trace") if not fresh else Path(trace_path)
            self._journal = Journal.create(target, self.pipeline.recorder, config=config.to_dict())
        self._thread = threading.Thread(target=self._run, name=f"workbench-run-{number}", daemon=True)
        self._began = 0.0

    @property
    def recorder(self) -> Recorder:
        return self.pipeline.recorder

    def start(self) -> None:
        self._began = time.perf_counter()
        if self._journal is not None:
            self._journal.start()
        self._thread.start()

    def _run(self) -> None:
        try:
            self.pipeline.start()
            if self._journal is not None:
                self._journal.note(self.pipeline.facts())
            self.pipeline.wait()
        except BaseException as err:  # kept for the panel to show; the pipeline is stopped
            self.error = err
            self.pipeline.stop(f"the run itself failed: {type(err).__name__}: {err}")
            self.pipeline.wait(timeout=30)
        finally:
            try:
                self.result = self.pipeline.result(time.perf_counter() - self._began)
            finally:
                self._save()

    def _save(self) -> None:
        journal = self._journal
        if journal is None:
            return
        if self.result is None:
            journal.close()
            return
        try:
            self.trace_path = journal.finish(self.result.trace, fresh=self._fresh)
        except (OSError, ValueError) as err:
            self.save_error = f"{err}; what was recorded is kept in {journal.path}"

    def stop(self, reason: str = "stopped from the panel") -> None:
        self.pipeline.stop(reason)

    @property
    def started(self) -> bool:
        return self._began > 0

    @property
    def done(self) -> bool:
        return self.started and not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def elapsed_s(self) -> float:
        return time.perf_counter() - self._began if self._began else 0.0

    def record(self) -> RunRecord:
        """The finished run's record (call once `done`)."""
        assert self.result is not None, "the run has not finished"
        result = self.result
        return RunRecord(self.number, self.config, result.trace, result.outcome, result.error,
                         result.wall_s, summarize(result.trace), self.trace_path)


def run_to_end(config: RunConfig, number: int = 1, trace_path: str | os.PathLike[str] | None = None,
               fresh: bool = False, watch: Callable[[BackgroundRun], None] | None = None) -> RunRecord:
    """Run on the calling thread's behalf and return the record (for notebook cells); `watch`
    is called with the run about ten times a second while it goes on (a progress bar), and
    once more when it has ended."""
    run = BackgroundRun(config, number, trace_path=trace_path, fresh=fresh)
    run.start()
    try:
        while not run.join(0.1):
            if watch is not None:
                watch(run)
    except KeyboardInterrupt:
        run.stop("interrupted")
        run.join()
    if watch is not None:
        watch(run)
    return run.record()
