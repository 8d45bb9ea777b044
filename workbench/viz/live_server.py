"""A live view served to a browser: a Bokeh server on a local port, in a thread of its own, for
commands that have no notebook (`workbench follow --live`) and for a live view's own process
(view_child.py: `workbench record --live`, the panel's `live_view="process"`).

`LiveServer(page, port)` calls `page(doc)` for every page that opens (what it returns, the
view shown, is kept in `.views`).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

from workbench.viz.deps import require


class LiveServer:
    def __init__(self, page: Callable[[Any], Any], port: int = 0) -> None:
        self.page = page
        self.port = port or free_port()
        self.views: list[Any] = []
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._server: Any = None
        self._loop: Any = None
        self._thread = threading.Thread(target=self._serve, name="workbench-live-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _page(self, doc: Any) -> None:
        view = self.page(doc)
        if view is not None:
            self.views.append(view)

    def _serve(self) -> None:
        try:
            asyncio.set_event_loop(asyncio.new_event_loop())
            from bokeh.application import Application
            from bokeh.application.handlers.function import FunctionHandler
            from bokeh.core.validation import silence
            from bokeh.core.validation.warnings import EMPTY_LAYOUT
            from bokeh.server.server import Server
            from tornado.ioloop import IOLoop

            silence(EMPTY_LAYOUT, True)  # the counters' column stays empty where nothing is sampled
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

