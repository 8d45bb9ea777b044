"""A notebook's Bokeh front end, as far as a relayed live view needs one (viz/doc_relay.py):
the tests' stand-in for the browser."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

# The benchmarks' front ends make a patch as a page does; these tests' does the same, by the same code.
_SPEC = importlib.util.spec_from_file_location(
    "live_client", Path(__file__).resolve().parents[1] / "benchmarks" / "live_client.py")
live_client = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(live_client)
apply_as_the_page = live_client.apply_as_the_page


class FrontEnd:
    """What a notebook's front end does with a relayed view: draws the document from its bundle
    and makes on it every patch, assembled from its pieces in the order they came."""

    def __init__(self, bundle: str) -> None:
        from bokeh.document import Document
        from bokeh.protocol import Protocol
        from bokeh.protocol.receiver import Receiver

        (doc_json,) = json.loads(bundle)["docs_json"].values()
        self.doc = Document.from_json(doc_json)
        self.receiver = Receiver(Protocol())
        self.patches = 0

    def take(self, pieces: list) -> None:
        for piece in pieces:
            message = asyncio.run(self.receiver.consume(piece))
        assert message is not None and message.msgtype == "PATCH-DOC"  # one whole message a patch
        apply_as_the_page(self.doc, message)
        self.patches += 1

    def bars(self) -> int:
        return sum(len(self.doc.get_model_by_name(f"live_bars_{k}").data["left"]) for k in range(3))

    def x_range(self) -> Any:
        """The live Gantt's time axis (the figure that draws its first bars)."""
        return next(m.x_range for m in self.doc.models if type(m).__name__ == "figure"
                    and any(r.name == "live|bars|0" for r in m.renderers))
