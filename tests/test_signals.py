"""SIGTERM and SIGHUP stop `workbench run` as Ctrl-C does: exit 130 within moments, the trace
of what ran saved and loadable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.trace import store


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_a_stopping_signal_saves_the_trace_and_exits_130(tmp_path: Path, signum: int) -> None:
    trace = tmp_path / "run.wbtrace"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "run", "--backend", "cpu", "--partitions", "400",
         "--log2-constraints", "10", "--no-progress", "--trace", str(trace)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the run's announcement: setup is under way or done
    assert first.startswith("workbench run:"), first
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert f"interrupted by {signal.Signals(signum).name}" in err
    assert "Traceback" not in err and "Traceback" not in out
    assert took < 30
    saved = store.load(trace)
    assert saved.meta.get("outcome") == "stopped"
    assert len(saved.spans) > 0


@pytest.mark.parametrize("when", ["result", "save"])
def test_signals_once_the_run_ended_wait_for_the_trace_to_be_saved(when, tmp_path, monkeypatch, capsys):
    """A second Ctrl-C (or a first SIGTERM) while the trace is made or written must not lose
    it: the save ends whole, then the command exits 130. The signals are sent from inside the
    step, so they land there for certain."""
    from workbench import cli
    from workbench.pipeline.run import Pipeline

    def signalled(real):
        def step(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            return real(*args, **kwargs)

        return step

    if when == "result":
        monkeypatch.setattr(Pipeline, "result", signalled(Pipeline.result))
    else:
        monkeypatch.setattr(store, "save", signalled(store.save))
    trace = tmp_path / "run.wbtrace"
    code = cli.main(["run", "--backend", "cpu", "--partitions", "2", "--log2-constraints", "8",
                     "--no-progress", "--trace", str(trace)])
    out, err = capsys.readouterr()
    assert code == 130, err
    assert err.splitlines()[-1] == "workbench: interrupted by SIGTERM" and "Traceback" not in err
    assert f"trace: {trace}" in out
    saved = store.load(trace)
    assert saved.meta["outcome"] == "completed" and saved.meta["partitions_done"] == 2
    assert not list(tmp_path.glob(".*.tmp"))
