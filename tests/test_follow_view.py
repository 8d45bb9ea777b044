"""The live Bokeh view of a followed log: the session's spans reach the Gantt's sources, the
verdict and status show under it, Stop stops; `--live` serves it on localhost."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from workbench.follow import FollowSession
from workbench.follow.session import FollowThread
from workbench.importers import load_cuzk_log
from workbench.importers.log_tail import FileTail
from workbench.viz.follow_view import FollowView, LiveServer

SEED = Path(__file__).parent / "data" / "cuzk_seed" / "daemon.log"


def test_the_view_draws_what_was_read_and_stop_saves_the_trace(tmp_path):
    log = tmp_path / "daemon.log"
    data = SEED.read_bytes()
    log.write_bytes(data[: len(data) // 2])
    tail = FileTail(log, sleep=lambda s: time.sleep(0.002))
    session = FollowSession(tail, str(log), judge=lambda t: "judged")
    runner = FollowThread(session, tmp_path / "t.wbtrace").start()
    view = FollowView(session, stop=runner.stop)
    while session.trace is None:
        time.sleep(0.01)
    with open(log, "ab") as f:
        f.write(data[len(data) // 2:])
    while session.progress.lines < data.count(b"\n"):
        time.sleep(0.01)
    view.stop_button._trigger_event(_click(view.stop_button))
    assert runner.join(30) and runner.error is None
    view.update(final=True)
    bars = sum(len(s.data["left"]) for s in view.live.gantt.sources)
    assert bars == len({r[:6] for r in session.live.spans}) >= len(load_cuzk_log(SEED).spans)
    assert "judged" in view.verdict.text and "837 lines read" in view.status.text
    assert view.stop_button.disabled and runner.trace_path == tmp_path / "t.wbtrace"


def _click(button):
    from bokeh.events import ButtonClick

    return ButtonClick(button)


def test_live_serves_the_view_on_localhost(tmp_path):
    session = FollowSession(FileTail(SEED), str(SEED), judge=lambda t: "judged")
    session.step()
    server = LiveServer().start()
    server.attach(session)
    try:
        with urllib.request.urlopen(server.url, timeout=20) as page:
            assert page.status == 200 and b"Bokeh" in page.read()
    finally:
        server.stop()
        session.tail.close()


def test_wb_follow_shows_the_view_and_saves_on_until_idle(tmp_path, monkeypatch):
    pytest.importorskip("IPython")
    import workbench.notebook as wb

    shown: list = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    # The layout itself, not its widget: a widget starts an IPython shell and its threads here.
    monkeypatch.setattr(wb, "show", lambda layout: wb._display(layout))
    following = wb.follow(SEED, trace=tmp_path / "nb.wbtrace", until_idle=0.3)
    assert following.wait(60) and following.error is None
    assert shown == [following.view.layout] and following.trace_path == tmp_path / "nb.wbtrace"
    assert list(following.trace.iter_spans()) == list(load_cuzk_log(SEED).iter_spans())
    assert following.view.stop_button.disabled and "verdict" in following.view.verdict.text
    assert f"trace saved: {tmp_path / 'nb.wbtrace'}" in following.view.status.text
