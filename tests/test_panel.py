"""The control panel driven as a person would: set knobs, click Run, wait, click Stop."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import pytest

pytest.importorskip("ipywidgets", reason="the notebook extra is not installed")
pytest.importorskip("jupyter_bokeh", reason="the notebook extra is not installed")

from conftest import wait_until
from front_end import FrontEnd
from pipeline_checks import (
    every_partition_passes_every_phase_once_in_order,
    mutex_holds_never_overlap,
)

from workbench.config import RunConfig
from workbench.viz import panel as panel_module
from workbench.viz.comm_relay import RelayedView
from workbench.viz.kernel_widget import KernelDocument
from workbench.viz.knobs import check, host_bytes_needed
from workbench.viz.panel import ControlPanel

SMALL = RunConfig(backend="cpu", partitions=3, log2_constraints=6)


def our_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("workbench-")]


@pytest.fixture
def panel(tmp_path) -> ControlPanel:
    return ControlPanel(SMALL, report_dir=tmp_path / "reports")


def test_a_run_from_the_panel_goes_in_the_background_and_records_a_full_trace(panel):
    panel.knobs.set(memory_mode="zerocopy", lock_scope="compute", partitions=4)
    began = time.monotonic()
    panel.run_button.click()
    assert time.monotonic() - began < 5  # the click returns while the run goes on
    assert panel.running and panel.stop_button.disabled is False and panel.run_button.disabled
    assert panel.wait(60)
    record = panel.last
    assert record is not None and record.outcome == "completed"
    assert record.config.memory_mode == "zerocopy" and record.config.lock_scope == "compute"
    every_partition_passes_every_phase_once_in_order(record.trace, 4)
    mutex_holds_never_overlap(record.trace)
    assert "run 1 completed: 4/4 partitions" in panel.status.value
    assert "phases" in panel.summary.value and "verdict" in panel.summary.value
    # The default view: made in a process of its own, relayed by the kernel, ended with the run.
    view = panel.view_process
    assert panel.live is None and view is not None and view.report is not None and not view.alive
    assert view.report["views"][0]["bars"] == len(record.trace.spans)
    shown = panel.view_box.children[0]
    assert isinstance(shown, RelayedView) and shown.relayed == view.relayed == view.report["relayed"] > 0
    assert not panel.run_button.disabled and panel.stop_button.disabled
    assert not our_threads()


def test_the_panels_default_view_reaches_the_notebook_whole_through_the_kernel(tmp_path, monkeypatch):
    """What the kernel sends the notebook's front end, rebuilt as that front end does, holds
    every span of the run, and so does the state a front end drawing it after the run gets."""
    sent: list[tuple[dict, list]] = []
    monkeypatch.setattr(RelayedView, "send",
                        lambda self, content, buffers=None: sent.append((content, buffers)))
    synced: list[str] = []  # the traits sent to the front end after the widget was opened
    send_state = RelayedView.send_state
    monkeypatch.setattr(RelayedView, "send_state", lambda self, key=None: (
        synced.extend([key] if isinstance(key, str) else key or []), send_state(self, key)))
    panel = ControlPanel(SMALL, report_dir=tmp_path / "reports")
    panel.run_button.click()
    shown = panel.view_box.children[0]
    first = shown.render_bundle
    front = FrontEnd(first)
    assert panel.wait(60)
    record = panel.last
    assert record is not None and record.outcome == "completed"
    pieces: list = []
    for content, buffers in sent:
        assert content["msg"] == "patch"
        pieces.append(content["payload"] if "payload" in content else buffers[0])
        if len(pieces) >= 3 and json.loads(pieces[0]).get("num_buffers", 0) * 2 + 3 == len(pieces):
            front.take(pieces)
            pieces = []
    assert not pieces and front.patches == shown.relayed
    assert front.bars() == len(record.trace.spans)
    # The whole last view is the state a front end drawing it later gets; the front end showing
    # it is not sent it again (it would draw it all afresh).
    assert shown.get_state()["render_bundle"] != first
    assert FrontEnd(shown.get_state()["render_bundle"]).bars() == len(record.trace.spans)
    assert "render_bundle" not in synced


def test_a_zoom_in_the_notebook_reaches_the_view_in_its_process(tmp_path):
    panel = ControlPanel(SMALL.replace(partitions=400), report_dir=tmp_path / "reports")
    panel.run_button.click()
    shown = panel.view_box.children[0]
    axis = FrontEnd(shown.render_bundle).x_range()
    # Mid-run (a zoom after the run's end reaches a view that has made its last update).
    assert panel.current is not None and not panel.current.done
    # As the front end sends a change the browser made (the widget's message from the browser).
    shown._handle_custom_msg({"event": "jsevent", "kind": "ModelChanged", "model": {"id": axis.id},
                              "attr": "end", "new": 0.37}, [])
    panel.stop()  # its end follows the zoom down the pipe
    assert panel.wait(60)
    assert panel.view_process is not None and panel.view_process.report is not None
    assert panel.view_process.report["views"][0]["following"] is False


def test_a_run_from_the_panel_with_its_live_view_in_the_kernel(tmp_path):
    panel = ControlPanel(SMALL, report_dir=tmp_path / "reports", live_view="kernel")
    panel.run_button.click()
    assert panel.wait(60)
    record = panel.last
    assert record is not None and record.outcome == "completed" and panel.view_process is None
    assert panel.live is not None and panel.live.gantt.bar_count() == len(record.trace.spans)
    assert not our_threads()


def test_a_run_from_the_panel_with_its_live_view_a_page_of_its_own(tmp_path):
    panel = ControlPanel(SMALL, report_dir=tmp_path / "reports", live_view="page")
    panel.knobs.set(partitions=4)
    panel.run_button.click()
    assert panel.wait(60)
    record, view = panel.last, panel.view_process
    assert record is not None and record.outcome == "completed" and view is not None
    assert panel.live is None  # no Bokeh document in the kernel
    assert view.report is not None
    assert view.report["views"][0]["bars"] == len(record.trace.spans) == view.shipped
    assert f"src='{view.url}'" in panel.view_box.children[0].value  # the page is the child's
    with urllib.request.urlopen(view.url, timeout=20) as page:
        assert page.status == 200 and "workbench: run 1" in page.read().decode()
    assert "run 1 completed: 4/4 partitions" in panel.status.value and "verdict" in panel.summary.value
    child = view.pid
    assert child is not None
    panel.close_view()
    assert view.alive is False and panel.view_process is None
    assert not our_threads()


def test_the_live_view_setting_is_checked_and_taken_from_the_environment(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="live_view is 'browser': one of process, kernel, page"):
        ControlPanel(SMALL, report_dir=tmp_path, live_view="browser")
    assert ControlPanel(SMALL, report_dir=tmp_path).live_view == "process"
    monkeypatch.setenv("WORKBENCH_LIVE_VIEW", "page")
    assert ControlPanel(SMALL, report_dir=tmp_path).live_view == "page"
    assert ControlPanel(SMALL, report_dir=tmp_path, live_view="kernel").live_view == "kernel"


def test_stop_mid_run_ends_the_run_and_leaves_no_thread(panel):
    panel.knobs.set(partitions=200, log2_constraints=8)
    panel.run_button.click()
    wait_until(lambda: panel.current is not None and panel.current.pipeline.progress.done >= 1, 60)
    panel.stop_button.click()
    assert panel.wait(60)
    record = panel.last
    assert record is not None and record.outcome == "stopped"
    assert record.summary.partitions_done < 200
    assert "stopped" in panel.status.value
    mutex_holds_never_overlap(record.trace)
    assert not our_threads()
    assert not panel.run_button.disabled


def test_settings_that_cannot_run_are_explained_and_run_is_disabled(panel):
    panel.knobs.set(backend="gpu")
    assert panel.run_button.disabled and "cannot run" in panel.message.value
    panel.knobs.set(backend="cpu", log2_constraints=20)
    assert panel.run_button.disabled and "at most 18 on the CPU backend" in panel.message.value
    panel.run_button.click()  # a click anyway (e.g. a stale button) starts nothing
    assert panel.current is None and not panel.history
    panel.knobs.set(log2_constraints=6)
    assert not panel.run_button.disabled and "emulated" in panel.message.value


def test_a_size_too_big_for_host_memory_is_explained():
    config = RunConfig(backend="cpu", log2_constraints=18, synth_lookahead=16)
    result = check(config.to_dict(), memory_bytes=host_bytes_needed(config))
    assert not result.ok and "GiB of host memory" in result.problem


def test_the_host_load_knob_counts_its_buffers_and_reaches_the_run(panel):
    from workbench.pipeline import host_load

    quiet = RunConfig(backend="cpu", log2_constraints=6)
    loaded = quiet.replace(host_load_threads=3)
    assert host_bytes_needed(loaded) - host_bytes_needed(quiet) == 3 * 2 * host_load.BLOCK_BYTES
    panel.knobs.set(host_load_threads=3)
    assert panel.knobs.values()["host_load_threads"] == 3


def test_a_failure_while_starting_shows_in_the_panel_not_as_a_traceback(panel, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no more threads")

    monkeypatch.setattr(panel_module, "BackgroundRun", broken)
    panel.run_button.click()
    assert "RuntimeError: no more threads" in panel.message.value
    assert not panel.running


def test_report_and_compare_after_two_runs(panel):
    panel.run_button.click()
    assert panel.wait(60)
    panel.knobs.set(memory_mode="pinned")
    panel.run_button.click()
    assert panel.wait(60)
    assert [r.number for r in panel.history] == [1, 2]
    panel.report_button.click()
    written = panel.report_dir / "run-2.html"
    assert written.exists() and "report written" in panel.message.value
    assert not panel.compare_button.disabled
    assert (panel.compare_a.value, panel.compare_b.value) == (0, 1)
    panel.compare_button.click()
    summaries, chart = panel.compare_box.children
    assert "pageable" in summaries.value and "pinned" in summaries.value
    assert isinstance(chart, KernelDocument)


def test_the_live_summary_of_a_run_says_running_not_unknown(panel):
    from types import SimpleNamespace

    from workbench.model.pipeline import PROVER
    from workbench.pipeline.backends import select_backend
    from workbench.pipeline.run import Pipeline

    pipeline = Pipeline(SMALL, select_backend(SMALL))
    pipeline.run()
    finished = sum(1 for track, name, *_ in pipeline.recorder.spans
                   if name == PROVER.done and track.startswith("worker"))
    panel._show_live_summary(SimpleNamespace(recorder=pipeline.recorder))  # what the poller shows
    assert "unknown" not in panel.summary.value
    assert f"running: {finished} partitions in" in panel.summary.value and finished == 3


def test_the_progress_bar_moves_during_a_run_and_ends_on_the_summarys_rate(panel):
    # Long enough (about a second here) that the bar is seen part-way on a loaded machine too:
    # 6 partitions of 2^7 once went from none to all between two looks.
    panel.knobs.set(partitions=12, log2_constraints=8)
    seen: list[tuple[int, int, str]] = []
    panel.run_button.click()
    while panel.running:
        seen.append((panel.progress.bar.value, panel.progress.bar.max, panel.progress.line.value))
        time.sleep(0.02)
    assert panel.wait(60)
    s = panel.last.summary
    assert (panel.progress.bar.value, panel.progress.bar.max) == (12, 12)
    assert panel.progress.bar.bar_style == "success"
    line = panel.progress.line.value
    rate = f"{s.throughput_per_min:.1f} partitions/min"
    assert line.startswith("completed · 12/12 partitions") and rate in line
    assert rate in panel.status.value  # the status line's too
    middle = [v for v, m, text in seen if m == 12 and 0 < v < 12]
    assert middle, "the bar never showed a run part-way"
    running = r"\d+/12 partitions · [\d.]+ s · [\d.]+ partitions/min · ETA \d"
    assert any(re.search(running, t) for _, _, t in seen)


def test_progress_figures_rate_and_time_left():
    from workbench.viz.progress import Figures, format_seconds

    f = Figures(done=2, total=8, elapsed_s=30.0)
    assert f.rate_per_min == 4.0 and f.eta_s == 90.0  # 6 left at 2 per 30 s
    assert "ETA 1 min 30 s" in f.text()
    assert Figures(0, 8, 3.0).eta_s is None and "ETA —" in Figures(0, 8, 3.0).text()
    done = Figures(8, 8, 12.0, outcome="completed")
    assert done.text() == "completed · 8/8 partitions · 12.0 s · 40.0 partitions/min"
    assert format_seconds(3725) == "1 h 02 min"
