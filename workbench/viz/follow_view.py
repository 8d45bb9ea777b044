"""The live Bokeh view of a followed log: the live Gantt (viz/live.py's LiveView, fed by the
session's `live` recorder), the running verdict and a status line under it, and Stop.

In a notebook `wb.follow` shows it as a widget; `workbench follow --live` serves it on
localhost (`LiveServer`), one view per browser page, each brought up to date by the page's
own periodic callback.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from bokeh.layouts import column
from bokeh.models.widgets import Button, Div

from workbench.render.follow_text import status_line
from workbench.viz import live_server
from workbench.viz.live import LiveView

PERIOD_MS = 250


class FollowView:
    def __init__(self, session: Any, stop: Callable[[], None] | None = None, title: str = "") -> None:
        self.session = session
        self.live = LiveView(session.live, title=title or "follow: live Gantt", name="follow")
        self.verdict = Div(text="", sizing_mode="stretch_width")
        self.status = Div(text="", sizing_mode="stretch_width")
        self.stop_button = Button(label="Stop", button_type="danger", width=90)
        self.stop_button.on_click(lambda: stop() if stop is not None else None)
        self.layout = column(self.stop_button, self.live.layout, self.verdict, self.status,
                             sizing_mode="stretch_width")

    def update(self, final: bool = False) -> None:
        self.live.tick(final=final)
        progress = self.session.progress
        self.verdict.text = f"<b>verdict</b>: {escape(progress.headline)}"
        self.status.text = escape(status_line(progress, self.session.idle_s))
        if final:
            self.stop_button.disabled = True


class LiveServer(live_server.LiveServer):
    """The follow view served on 127.0.0.1, for a session attached once reading starts."""

    def __init__(self, port: int = 0) -> None:
        super().__init__(self._document, port)
        self.session: Any = None
        self.stop_requested = False

    def attach(self, session: Any) -> None:
        self.session = session

    def _document(self, doc: Any) -> FollowView | None:
        if self.session is None:
            return None
        view = FollowView(self.session, stop=self._request_stop)
        doc.add_root(view.layout)
        doc.add_periodic_callback(view.update, PERIOD_MS)
        return view

    def _request_stop(self) -> None:
        self.stop_requested = True


class Following:
    """A following shown in a notebook: `stop()` (or the Stop button) ends it and saves the
    trace; `wait()` waits for that; `trace` is the trace so far (the saved one once done),
    `trace_path` where it went, `error` what ended it otherwise."""

    def __init__(self, runner: Any, view: FollowView) -> None:
        from workbench.viz.live import Poller

        self.runner = runner
        self.view = view
        self._poller = Poller(self._tick, period=PERIOD_MS / 1000, name="workbench-follow-view")
        self._poller.start()

    def _tick(self) -> bool:
        done = self.runner.done  # read first: the last update after the end misses nothing
        self.view.update(final=done)
        if done:
            error = self.runner.error
            said = (f"the following ended: {type(error).__name__}: {error}" if error is not None
                    else f"trace saved: {self.runner.trace_path}")
            self.view.status.text += f"<br>{escape(said)}"
        return not done

    def stop(self) -> None:
        self.runner.stop()

    def wait(self, timeout: float | None = None) -> bool:
        return self.runner.join(timeout) and self._poller.join(timeout)

    @property
    def trace(self) -> Any:
        return self.runner.session.trace

    @property
    def trace_path(self) -> Any:
        return self.runner.trace_path

    @property
    def error(self) -> BaseException | None:
        return self.runner.error or self._poller.error


def start_following(source: Any, trace: Any, until_idle: float | None, from_start: bool,
                    show: Callable[[Any], object]) -> Following:
    """`wb.follow`: the session on a thread of its own, its view shown by `show`."""
    from pathlib import Path

    from workbench.follow import FollowSession, open_source
    from workbench.follow.session import FollowThread
    from workbench.trace import output

    target = output.fresh_run_path(prefix="follow") if trace is None else output.check(trace, "trace")
    session = FollowSession(open_source(str(source), from_start), str(source), until_idle)
    runner = FollowThread(session, target, fresh=trace is None).start()
    view = FollowView(session, stop=runner.stop, title=f"{Path(source).name}: live Gantt")
    show(view.layout)
    return Following(runner, view)
