"""The notebook's widget of a Bokeh document that lives in another process (doc_relay.py).

To the notebook's Bokeh front end it is the widget that front end already draws (the same
model and view names, the same `render_bundle`, the same patch messages), so nothing new is
installed in the browser. The kernel's part is to pass text and bytes on: `relay(pieces)`
sends a patch's pieces as they came from the view's process, and what the browser changes
(a zoom, a selection) goes to `on_event` as the front end sent it, for that process to make.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.viz.deps import require
from workbench.viz.doc_relay import data_echo

DOMWidget: Any = require("ipywidgets").DOMWidget
traitlets = require("traitlets")
# The front end's package, as the installed widget names it (its version is the one installed).
FRONT_END = require("jupyter_bokeh").BokehModel


class RelayedView(DOMWidget):
    _model_name = traitlets.Unicode(FRONT_END._model_name.default_value).tag(sync=True)
    _model_module = traitlets.Unicode(FRONT_END._model_module.default_value).tag(sync=True)
    _model_module_version = traitlets.Unicode(FRONT_END._model_module_version.default_value).tag(sync=True)
    _view_name = traitlets.Unicode(FRONT_END._view_name.default_value).tag(sync=True)
    _view_module = traitlets.Unicode(FRONT_END._view_module.default_value).tag(sync=True)
    _view_module_version = traitlets.Unicode(FRONT_END._view_module_version.default_value).tag(sync=True)
    combine_events = traitlets.Bool(False).tag(sync=True)
    # JSON text, as the front end parses it; set again, the front end draws the document afresh.
    # What a front end that asks for the state (a page reloaded) gets is the document kept last.
    render_bundle = traitlets.Unicode().tag(sync=True, to_json=lambda value, widget: widget.kept or value)

    def __init__(self, bundle: str, on_event: Callable[[dict[str, Any]], None] | None = None,
                 **kwargs: Any) -> None:
        self.kept = ""  # before the state is first asked for
        super().__init__(render_bundle=bundle, **kwargs)
        self.on_event = on_event
        self.relayed = 0
        self.on_msg(self._from_browser)

    def relay(self, pieces: list[str | bytes]) -> None:
        """Send one patch's pieces, in order, a widget message each (as the front end takes them)."""
        for piece in pieces:
            if isinstance(piece, str):
                self.send({"msg": "patch", "payload": piece})
            else:
                self.send({"msg": "patch"}, [piece])
        self.relayed += 1

    def keep(self, bundle: str) -> None:
        """The document as the browsers showing it already have it (patch by patch): kept as the
        state a front end drawing it later (a reload) gets, not sent to those showing it, as
        setting `render_bundle` would (they would draw it all again, their old views left in
        Bokeh's index beside the new)."""
        self.kept = bundle  # not a trait: nothing is sent

    def _from_browser(self, _widget: Any, content: dict[str, Any], _buffers: list[Any]) -> None:
        if content.get("event") != "jsevent" or self.on_event is None or data_echo(content):
            return
        self.on_event({k: v for k, v in content.items() if k != "event"})
