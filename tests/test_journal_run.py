"""A real `workbench run` killed with SIGKILL leaves a journal holding everything up to its last
flush, which `workbench recover` and plain loading read; a run that ends (normally, or by a
Ctrl-C pressed again and again while it saves) leaves its trace and no journal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import wait_until
from journal_frames import counts, frames

from workbench.cli import main
from workbench.commands.recover import say_left_behind
from workbench.model.pipeline import PROVER
from workbench.trace import store

ROOT = Path(__file__).parent.parent


def start_run(tmp_path: Path, *flags: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "run", "--backend", "cpu", "--no-progress", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )


def test_sigkill_loses_at_most_the_last_flush_and_recover_reads_the_rest(tmp_path, capsys):
    trace = tmp_path / "run.wbtrace"
    journal = tmp_path / "run.wbtrace.wbjournal"
    proc = start_run(tmp_path, "--partitions", "60", "--log2-constraints", "10", "--trace", str(trace))
    try:
        # A record beyond the header: setup is done and the run records (a sequencer, not a sleep).
        wait_until(lambda: journal.exists() and len(frames(journal)) >= 2, timeout=60)
        recording = time.monotonic()
        # Then at least one partition done (its name in the strings a record brought) and a
        # second of recording: two flushes or more.
        wait_until(lambda: any(PROVER.done in f.part.get("strings", ()) for f in frames(journal)), timeout=60)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - recording)))
        killed_ns = time.perf_counter_ns()  # CLOCK_MONOTONIC, the clock the run records with
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL and not trace.exists()
    found = frames(journal)
    spans, instants, _ = counts(found)
    # A kill lands between two writes, or (rarely) cuts one short: then its record is dropped.
    torn = found[-1].end != journal.stat().st_size
    assert spans > 0
    (line,) = say_left_behind(tmp_path)  # what the next run says
    assert f"{journal} was left by a run that did not finish" in line

    as_is = store.load(journal)  # plain loading reads what the killed run left
    assert main(["recover", str(journal)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"recovered {trace}: {spans} spans, {instants} instants, 0 counters up to ")
    assert ("a torn last record" if torn else "no torn or damaged record") in said
    assert said.rstrip().endswith("; journal removed") and not journal.exists()
    recovered = store.load(trace)
    assert len(recovered.spans) == len(as_is.spans) == spans
    assert int(recovered.spans.end_ns.max()) <= killed_ns
    assert recovered.meta["outcome"] == "unfinished" and recovered.meta["backend"] == "cpu"
    done = {s.partition for s in recovered.select(name=PROVER.done)}
    assert done, done  # partitions finished before the kill, with every phase of theirs
    phases = [p for p in PROVER.phases if p != "verify"]
    for partition in done:
        names = [s.name for s in recovered.select(partition=partition)]
        assert all(names.count(phase) == 1 for phase in phases), (partition, names)
    assert main(["summary", str(trace)]) == 0
    assert capsys.readouterr().out.startswith("unfinished: ")


def test_ctrl_c_again_and_again_while_saving_loses_nothing(tmp_path):
    trace = tmp_path / "run.wbtrace"
    proc = start_run(tmp_path, "--partitions", "400", "--log2-constraints", "10", "--trace", str(trace))
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("workbench run:")
    journal = tmp_path / "run.wbtrace.wbjournal"
    wait_until(lambda: journal.exists() and len(frames(journal)) >= 3, timeout=60)
    proc.send_signal(signal.SIGINT)
    line = proc.stderr.readline()
    assert "interrupted; saving the trace of what ran" in line, line
    proc.send_signal(signal.SIGINT)  # lands in the save, or in the printing right after it
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err + out
    assert "it is written whole first" in err or err.rstrip().endswith("workbench: interrupted"), err
    assert len(store.load(trace).spans) > 0
    assert not list(tmp_path.glob("*.wbjournal"))


def test_a_run_that_ends_leaves_its_trace_and_no_journal(tmp_path, capsys):
    trace = tmp_path / "runs" / "x.wbtrace"
    trace.parent.mkdir()
    assert main(["run", "--backend", "cpu", "--partitions", "2", "--log2-constraints", "10", "--no-progress",
                 "--trace", str(trace)]) == 0
    assert f"trace: {trace}" in capsys.readouterr().out
    assert store.load(trace).meta["outcome"] == "completed"
    assert list(trace.parent.iterdir()) == [trace]


def test_a_notebook_run_journals_while_it_runs_and_saves_its_trace(tmp_path):
    from workbench.config import RunConfig
    from workbench.viz.runner import BackgroundRun

    trace = tmp_path / "nb.wbtrace"
    journal = tmp_path / "nb.wbtrace.wbjournal"
    run = BackgroundRun(RunConfig(backend="cpu", partitions=20, log2_constraints=10), trace_path=trace)
    run.start()
    seen: list[int] = []

    def journaled() -> bool:
        try:
            seen.append(len(frames(journal)))
        except FileNotFoundError:  # removed: the run has saved its trace
            return True
        return seen[-1] >= 3

    wait_until(journaled, timeout=60)
    assert max(seen) >= 3  # records streamed while it ran
    assert run.join(60)
    record = run.record()
    assert record.trace_path == trace and run.save_error is None
    assert not journal.exists()
    assert len(store.load(trace).spans) == len(record.trace.spans) > 0
