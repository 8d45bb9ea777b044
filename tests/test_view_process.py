"""The live view in a process of its own (viz/view_process.py, view_child.py): the run's
process ships its rows and nothing more; the child builds what the view in the run's process
would have built; the run survives the child's death; the child never outlives its parent."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")
pytest.importorskip("tornado", reason="the notebook extra is not installed")

from conftest import wait_until
from front_end import FrontEnd

from workbench.config import RunConfig
from workbench.pipeline.backends import select_backend
from workbench.pipeline.run import Pipeline
from workbench.trace.recorder import Recorder
from workbench.viz.lanes import expected_lanes
from workbench.viz.live import FULL_RATE_BARS, LiveView
from workbench.viz.live_summary import RunningSummary
from workbench.viz.view_process import PACKAGE_ROOT, ViewProcess


def pipeline(partitions: int, log2: int = 6) -> tuple[Pipeline, list[str]]:
    config = RunConfig(backend="cpu", partitions=partitions, log2_constraints=log2)
    return Pipeline(config, select_backend(config)), expected_lanes(config.synth_threads, config.workers,
                                                                     config.gpu_workers)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie (ended, not yet waited for by a parent) has left too
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_run_watched_through_the_child_shows_what_the_view_in_the_run_would():
    run, lanes = pipeline(5)
    view = ViewProcess(run.recorder, lanes, name="live", label="run 1", summary=True,
                       report_bars=True).start()
    try:
        outcome = run.run()
        report = view.finish(60)
    finally:
        view.close()
    assert outcome.ok and report is not None and view.error is None
    # The same bars, from the same spans, as the view in the run's process builds.
    here = LiveView(run.recorder, lanes, name="here", label="run 1")
    here.update(final=True)
    mine = here.spans_built()
    assert len(mine) == len(outcome.trace.spans) == view.shipped == report["spans"] > 5 * 10
    bars = report["bars"]
    assert bars["lane"] == mine.lane.tolist() and bars["phase"] == mine.phase.tolist()
    assert bars["left"] == mine.left.tolist() and bars["right"] == mine.right.tolist()
    assert bars["partition"] == mine.partition.tolist()
    assert report["views"][0]["bars"] == here.gantt.bar_count() and report["views"][0]["final"]
    # The running summary over every row: the one the run's process would have shown.
    assert report["summary_html"] == RunningSummary(run.recorder).html()
    assert "running: 5 partitions" in report["summary_html"]


def test_the_views_work_is_in_the_child_not_in_the_runs_process():
    run, lanes = pipeline(40)
    view = ViewProcess(run.recorder, lanes, summary=True).start()
    assert view.pid is not None
    # Its own session: a terminal's Ctrl-C to the run's process group does not reach it.
    assert os.getsid(view.pid) != os.getsid(0)
    try:
        outcome = run.run()
        report = view.finish(60)
    finally:
        view.close()
    assert outcome.ok and report is not None
    updates = report["views"][0]["updates"]
    assert updates >= 2 and report["summaries"] >= 1
    assert report["views"][0]["bars"] == len(outcome.trace.spans)
    # The child built, binned and served the view; the run's process only shipped the rows:
    # its feeding thread spent a small part of what the child did.
    assert view.batches >= 2 and view.cpu_s < 0.25 * report["cpu_s"], (view.cpu_s, report["cpu_s"])
    # No Bokeh document and no server loop in the run's process.
    assert not [t.name for t in threading.enumerate() if t.name == "workbench-live-server"]


def test_the_run_goes_on_and_says_one_line_when_the_view_process_dies():
    run, lanes = pipeline(60)
    said: list[str] = []
    view = ViewProcess(run.recorder, lanes, say=said.append).start()
    outcome: list = []
    runner = threading.Thread(target=lambda: outcome.append(run.run()))
    runner.start()
    try:
        wait_until(lambda: view.shipped > 0, 60)
        os.kill(view.pid, signal.SIGKILL)
        runner.join(120)
        assert not runner.is_alive()
        assert view.finish(10) is None
    finally:
        view.close()
    assert outcome[0].ok and outcome[0].trace.meta["outcome"] == "completed"
    assert len(said) == 1 and "the live view's process ended" in said[0] and "the run goes on" in said[0]
    assert view.error == said[0]


CHILD_OF_A_KILLED_PARENT = textwrap.dedent("""
    import os, sys, time
    from workbench.trace.recorder import Recorder
    from workbench.viz.view_process import ViewProcess
    view = ViewProcess(Recorder(nvtx=False)).start()
    if os.fork() == 0:  # as a synthesis pool forks: a process that holds the pipe's write end
        time.sleep(60)
        os._exit(0)
    print(view.pid, flush=True)
    time.sleep(60)
""")


def test_the_view_process_never_outlives_a_parent_killed_outright():
    parent = subprocess.Popen([sys.executable, "-c", CHILD_OF_A_KILLED_PARENT], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": PACKAGE_ROOT})
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    holder = None
    try:
        holders = [int(p) for p in Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()]
        holder = next(p for p in holders if p != child)
        assert not gone(child)
        parent.kill()
        parent.wait(10)
        # Its input stays open (the forked process holds it): the child sees its parent go.
        wait_until(lambda: gone(child), 10)
    finally:
        parent.kill()
        parent.wait(10)
        parent.stdout.close()
        for pid in (child, holder):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_a_row_that_does_not_encode_stops_the_view_with_one_line_not_the_run():
    from workbench.trace.recorder import Recorder

    recorder = Recorder(nvtx=False)
    said: list[str] = []
    view = ViewProcess(recorder, say=said.append, period=3600).start()  # fed by hand below
    try:
        recorder.add_span("worker/0", "finish", 1, 2, 0, 0)
        assert view.ship() and view.shipped == 1
        recorder.add_span("worker/0", "finish", 3, 4, 1, 0, attrs={(1, 2): "a key JSON cannot hold"})
        assert not view.ship() and not view.ship()  # stopped: said once
        assert len(said) == 1 and "does not encode" in said[0] and "the run goes on" in said[0]
        assert not view.alive and view.finish(5) is None
    finally:
        view.close()


def test_a_relayed_view_reaches_a_front_end_whole_and_takes_its_zoom_back():
    """The child's patches, handed on as they came, rebuild in a front end the view the child
    holds: every bar, binned as the child bins them; a zoom the browser makes reaches the
    child's document (its Python callbacks run there: the view stops following the run)."""
    run, lanes = pipeline(6)
    view = ViewProcess(run.recorder, lanes, name="live", summary=True, relay=True).start()
    front = FrontEnd(view.bundle)
    assert front.bars() == 0
    bundles: list[str] = []
    view.attach(front.take, bundles.append)
    try:
        outcome = run.run()
        wait_until(lambda: front.bars() > 0, 30)
        x_range = front.x_range()
        x_range.start = 0.125  # the browser's zoom, then its event
        view.send_event({"kind": "ModelChanged", "model": {"id": x_range.id}, "attr": "start", "new": 0.125})
        report = view.finish(60)
    finally:
        view.close()
    assert outcome.ok and report is not None and view.error is None
    first = report["views"][0]
    assert first["final"] and not first["following"]  # the zoom was made there
    assert front.patches == view.relayed == report["relayed"] > 1
    assert front.bars() == first["bars"] == len(outcome.trace.spans)
    assert x_range.start == 0.125  # nothing the child sent after put it back
    # After the run: the whole last view, for a browser that draws it afresh.
    assert len(bundles) == 1 and FrontEnd(bundles[0]).bars() == first["bars"]
    # The running summary is in the relayed document too, as the child last made it.
    assert any("running: 6 partitions" in m.text for m in front.doc.models if type(m).__name__ == "Div")


def test_unpaced_the_views_process_updates_at_every_poll(monkeypatch):
    """For measuring the view's cost at ten updates a second: unpaced, no poll is left for a
    later update, however many bars the view holds."""
    from workbench.viz.view_child import UNPACED_ENV

    monkeypatch.setenv(UNPACED_ENV, "1")  # the child's environment is the run's
    run, lanes = pipeline(120)
    view = ViewProcess(run.recorder, lanes, name="live", relay=True).start()
    front = FrontEnd(view.bundle)
    view.attach(front.take)
    try:
        outcome = run.run()
        report = view.finish(60)
    finally:
        view.close()
    first = report["views"][0]
    assert outcome.ok and first["deferred"] == 0 and first["updates"] >= 3
    assert front.bars() == first["bars"] == len(outcome.trace.spans) > FULL_RATE_BARS


def test_relayed_views_share_no_id_with_each_other_or_the_kernel():
    """A notebook's page holds a run's relayed view beside earlier runs' and the kernel's own
    figures; Bokeh keys models and root views by id, and every process's counter starts at the
    same number: two runs' views, and a kernel figure, clashed (one run's patch resolved its new
    legend's renderer to another's title)."""
    from bokeh.plotting import figure

    ids = []
    for _ in range(2):
        view = ViewProcess(Recorder(nvtx=False), relay=True, period=3600).start()
        try:
            (doc,) = json.loads(view.bundle)["docs_json"].values()
            ids.append({m["id"] for m in doc["roots"]} | set(re.findall(r'"id":"([^"]+)"', view.bundle)))
        finally:
            view.close()
    kernel = {m.id for m in figure().references()}
    assert ids[0] and ids[1] and not ids[0] & ids[1] and not (ids[0] | ids[1]) & kernel
