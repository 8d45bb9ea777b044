"""A Bokeh document shown by a notebook's browser while it lives in another process.

The live view's own process (view_child.py) holds the document; the notebook's kernel holds
only a widget (comm_relay.py) that the notebook's Bokeh front end draws. Both sides speak the
front end's own messages, so the kernel passes them on as they come, never decoding them:

- the document as a whole: `bundle(root)`, the widget's `render_bundle` (JSON text of the
  documents, the render items and the element to draw into);
- the changes the process makes: `PatchSource` turns those of one update (`batch()`) into one
  patch message, its arrays written into its content (base64) rather than as buffers of their
  own: three pieces (header, metadata, content), the front end taking one widget message each.
  A change a message of its own, each array a buffer, is Bokeh's own way: on the development
  machine, at ten updates a second, it had the kernel hand on about 600 messages a second at
  about half a millisecond of its CPU each;
- each change the browser makes (a zoom, a selection): the front end's event, as JSON, which
  `apply_event` makes on the process's document (so its Python callbacks run there).

Pieces travel between the processes as one body each (`pack` / `unpack`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bokeh.core.serialization import Deserializer, Serialized, Serializer
from bokeh.document import Document
from bokeh.embed.elements import div_for_render_item
from bokeh.embed.util import standalone_docs_json_and_render_items
from bokeh.models import ColumnDataSource
from bokeh.protocol.messages.patch_doc import PatchJson, patch_doc

Piece = str | bytes
PIECE = struct.Struct("<cI")  # kind (b"s" text, b"b" bytes), length
TEXT, BYTES = b"s", b"b"


def bundle(root: Any) -> str:
    """What the front end draws `root` from: its widget's `render_bundle`."""
    if root.document is None:
        Document().add_root(root)
    docs_json, items = standalone_docs_json_and_render_items([root], suppress_callback_warning=True)
    (item,) = items
    return json.dumps({"docs_json": docs_json, "render_items": [item.to_json()],
                       "div": div_for_render_item(item)})


class PatchSource:
    """Dispatched every change of `doc` (once `attach`ed): calls `send` with the pieces of a
    patch message of the changes made within a `batch()` (or of each change made outside one),
    except those the browser made itself (`apply_event` sets them as this object).

    Each change is encoded as it is made, as Bokeh's own messages are: a change holds the
    columns and values it was made with, which the view goes on changing in place (columns
    grown, bars relabelled) before the batch ends."""

    def __init__(self, send: Callable[[list[Piece]], None]) -> None:
        self.send = send
        self.patches = 0
        self._encoded: list[Any] = []
        self._serializer: Serializer | None = None
        self._doc: Document | None = None
        self._batching = 0

    def attach(self, doc: Document) -> PatchSource:
        doc.on_change_dispatch_to(self)
        return self

    @contextmanager
    def batch(self) -> Iterator[None]:
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching:
                self.flush()

    def _document_patched(self, event: Any) -> None:  # Bokeh's dispatch names it so
        if event.setter is self:
            return
        if self._serializer is None:  # one a message: a model it carries whole, it carries once
            self._doc = event.document
            self._serializer = Serializer(references=event.document.models.synced_references,
                                          deferred=False)
        self._encoded.append(self._serializer.encode(event))
        if not self._batching:
            self.flush()

    def flush(self) -> None:
        serializer, doc = self._serializer, self._doc
        if serializer is None or doc is None:
            return
        events, self._encoded, self._serializer = self._encoded, [], None
        # Models the message carries whole are known to the front end from now on.
        doc.models.flush_synced(lambda model: not serializer.has_ref(model))
        message = patch_doc(patch_doc.create_header(), {}, PatchJson(events=events))
        self.send([message.header_json, message.metadata_json, message.content_json])
        self.patches += 1


def apply_event(doc: Document, content: dict[str, Any], setter: Any) -> None:
    """Make on `doc` the change a browser's front end sent (its event without the `event` key),
    as `setter` so that it is not sent back; runs the Python callbacks of the change."""
    event = Deserializer(list(doc.models), setter=setter).deserialize(Serialized(content=content, buffers=[]))
    kind = event["kind"]
    if kind == "ModelChanged":
        model, attr = event["model"], event["attr"]
        descriptor = model.lookup(attr)
        old = descriptor._get(model)
        new = descriptor.property.prepare_value(model, descriptor.name, event["new"])
        descriptor._set(model, old, new, setter=setter)  # notifies the property's callbacks
    elif kind == "ColumnsStreamed" and isinstance(event["model"], ColumnDataSource):
        # The public `stream` takes no setter: the change would go back to the browser.
        event["model"]._stream(event["data"], event["rollover"], setter=setter)  # type: ignore[attr-defined]
    elif kind == "ColumnsPatched" and isinstance(event["model"], ColumnDataSource):
        event["model"].patch(event["patches"], setter=setter)
    elif kind == "MessageSent" and event["msg_type"] == "bokeh_event":
        doc.callbacks.trigger_event(event["msg_data"])


def pack(pieces: list[Piece]) -> bytes:
    out = []
    for piece in pieces:
        data, kind = (piece.encode(), TEXT) if isinstance(piece, str) else (bytes(piece), BYTES)
        out += [PIECE.pack(kind, len(data)), data]
    return b"".join(out)


def unpack(body: bytes) -> list[Piece]:
    pieces: list[Piece] = []
    at, view = 0, memoryview(body)
    while at < len(body):
        kind, length = PIECE.unpack_from(body, at)
        at += PIECE.size
        data = view[at:at + length]
        pieces.append(str(data, "utf-8") if kind == TEXT else data.tobytes())
        at += length
    return pieces
