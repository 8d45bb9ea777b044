"""The live view served to a browser: a Bokeh server on a local port, in a thread of its own,
each page a `LiveView` (live.py) of the recorder brought up to date ten times a second.

For commands that have no notebook (`workbench record --live`). Every page that opens starts
from the first span, so one opened late still shows the whole recording.

Contract: `serve(recorder, port) -> LiveServer` (`.url`, `.stop()`).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from workbench.trace.recorder import Recorder
from workbench.viz.deps import require
from workbench.viz.live import PERIOD_S, LiveView


class LiveServer:
    def __init__(self, recorder: Recorder, port: int, title: str) -> None:
        self.recorder = recorder
        self.port = port
        self.title = title
        self.views: list[LiveView] = []
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._server: Any = None
        self._loop: Any = None
        self._thread = threading.Thread(target=self._serve, name="workbench-live-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _page(self, doc: Any) -> None:
        view = LiveView(self.recorder, title=f"live: {self.title}")
        self.views.append(view)
        doc.title = f"workbench record: {self.title}"
        doc.add_root(view.layout)
        doc.add_periodic_callback(view.tick, int(PERIOD_S * 1000))

    def _serve(self) -> None:
        try:
            asyncio.set_event_loop(asyncio.new_event_loop())
            from bokeh.application import Application
            from bokeh.application.handlers.function import FunctionHandler
            from bokeh.server.server import Server
            from tornado.ioloop import IOLoop

            self._loop = IOLoop.current()
            self._server = Server({"/": Application(FunctionHandler(self._page))}, port=self.port,
                                  address="127.0.0.1", io_loop=self._loop,
                                  allow_websocket_origin=[f"127.0.0.1:{self.port}", f"localhost:{self.port}"])
            self._server.start()
        except BaseException as err:
            self.error = err
            self._ready.set()
            return
        self._ready.set()
        self._loop.start()

    def start(self) -> LiveServer:
        require("bokeh")
        require("tornado")
        self._thread.start()
        self._ready.wait(30)
        if self.error is not None:
            raise OSError(f"live view: cannot serve on port {self.port}: {self.error}")
        return self

    def stop(self) -> None:
        if self._loop is None or self._server is None:
            return
        server, loop = self._server, self._loop

        def shut() -> None:
            server.stop()
            loop.stop()

        loop.add_callback(shut)
        self._thread.join(10)


def serve(recorder: Recorder, port: int = 5006, title: str = "") -> LiveServer:
    return LiveServer(recorder, port, title).start()
