"""The notebook's widget of a Bokeh document the kernel holds (the in-kernel live view, a
recording's view, a figure shown): the installed widget, less the echoes its front end sends
back of every change a patch made (doc_relay.py says what they are). Made again, as that widget
makes them, every stream of the live view was appended a second time to the kernel's document,
and an axis the view moved was put back over a zoom made since."""

from __future__ import annotations

from typing import Any

from workbench.viz.deps import require
from workbench.viz.doc_relay import Echoes, data_echo

BokehModel: Any = require("jupyter_bokeh").BokehModel
ModelChangedEvent: Any = require("bokeh.document.events").ModelChangedEvent


class KernelDocument(BokehModel):
    def __init__(self, model: Any, **kwargs: Any) -> None:
        self.echoes = Echoes()  # before the document's changes reach this widget
        super().__init__(model, **kwargs)

    def _document_patched(self, event: Any) -> None:
        if event.setter is not self and isinstance(event, ModelChangedEvent):
            self.echoes.sent(event.model.id, event.attr, event.new)
        super()._document_patched(event)

    def _sync_model(self, widget: Any, content: dict[str, Any], buffers: list[Any]) -> None:
        if content.get("event") != "jsevent" or data_echo(content):
            return
        sync = super()._sync_model
        self.echoes.make(self._document, content, lambda: sync(widget, content, buffers))
