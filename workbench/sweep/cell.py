"""One run of a sweep, wherever it runs: in this process, or in a Ray worker on another host.

`execute_cell` never raises for what a run can do wrong (a bad config for this host, a phase
that raises, a stop): the outcome says so, with the message. Its files go one of two ways:
written straight into the sweep's folder when the host that ran the cell sees it (`into`:
the same host, or a shared file system), else carried back as plain data (the .wbtrace
file's bytes, the proofs' JSON text) for the driver to write.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.config import RunConfig

COMPLETED, FAILED, CUT_SHORT = "completed", "failed", "cut_short"
STOP_REASON = "cut short: the sweep was stopped"


@dataclass
class CellOutcome:
    status: str  # completed | failed | cut_short
    error: str | None
    host: str
    start: float  # seconds since the epoch, on the host that ran it
    end: float
    partitions_done: int = 0
    trace: bytes | None = None  # the .wbtrace file's bytes
    proofs: str | None = None  # proofs JSON (`workbench run --proofs`), when asked for
    trace_file: str | None = None  # or the name they were written under in the sweep's folder
    proofs_file: str | None = None
    cpu_s: float | None = None  # CPU time of the process that ran it, during the run
    gpus: list[Any] = field(default_factory=list)  # the GPU ids the scheduler gave the cell
    node: str | None = None  # the scheduler's node id
    notices: list[str] = field(default_factory=list)
    interrupted: bool = False  # Ctrl-C reached the run (the local executor then stops the sweep)

    @property
    def wall_s(self) -> float:
        return self.end - self.start


Progress = Callable[[int, int], None]  # (partitions done, partitions)


def execute_cell(config: RunConfig, fault: str | None = None, keep_proofs: bool = False,
                 progress: Progress | None = None, should_stop: Callable[[], bool] | None = None,
                 gpus: list[Any] | None = None, node: str | None = None,
                 into: tuple[Path, str] | None = None) -> CellOutcome:
    """Run one configuration to its end; `progress` is told the partitions done about ten times
    a second, and `should_stop` asked as often (true: stop, keeping what was recorded).
    `into` (folder, label): write the trace and proofs there as `label.wbtrace` and
    `label.proofs.json` instead of returning their bytes."""
    from workbench.pipeline.backends import select_backend
    from workbench.pipeline.faults import fault_hook
    from workbench.pipeline.run import Pipeline

    host, start, cpu = socket.gethostname(), time.time(), time.process_time()

    def failed(message: str) -> CellOutcome:
        return CellOutcome(FAILED, message, host, start, time.time(), gpus=list(gpus or []), node=node)

    try:
        pipeline = Pipeline(config, select_backend(config), fault=fault_hook(fault))
    except Exception as err:  # no backend here, too little memory, a fault spec: the cell fails
        return failed(f"{type(err).__name__}: {err}")
    last = [-1]

    def tick() -> None:
        done = pipeline.progress.done
        if progress is not None and done != last[0]:
            last[0] = done
            progress(done, config.partitions)
        if should_stop is not None and should_stop():
            pipeline.stop(STOP_REASON)

    result = pipeline.run(tick)
    end = time.time()
    cut = pipeline.interrupted or result.error == STOP_REASON
    status = CUT_SHORT if cut else COMPLETED if result.ok else FAILED
    outcome = CellOutcome(status, None if result.ok else result.error, host, start, end,
                          pipeline.progress.done, gpus=list(gpus or []), node=node,
                          notices=list(pipeline.notices), interrupted=pipeline.interrupted,
                          cpu_s=time.process_time() - cpu)
    if config.trace:
        if into is None:
            outcome.trace = trace_bytes(result.trace)
        else:
            from workbench.trace import store

            outcome.trace_file = store.save(result.trace, into[0] / f"{into[1]}.wbtrace").name
    if keep_proofs and result.proofs:
        from workbench.pipeline.proofs import proofs_json

        try:
            text = proofs_json(pipeline, result.proofs)[0]
        except ValueError as err:
            outcome.notices.append(f"proofs not kept: {err}")
        else:
            if into is None:
                outcome.proofs = text
            else:
                from workbench.trace import output

                outcome.proofs_file = output.write_text(into[0] / f"{into[1]}.proofs.json", text).name
    if progress is not None:
        progress(pipeline.progress.done, config.partitions)
    return outcome


def trace_bytes(trace: Any) -> bytes:
    from workbench.trace import store

    with tempfile.TemporaryDirectory(prefix="workbench-cell-") as folder:
        path = store.save(trace, Path(folder) / f"cell-{os.getpid()}.wbtrace")
        return path.read_bytes()
