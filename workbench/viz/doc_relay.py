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
  `PatchSource.apply` makes on the process's document (so its Python callbacks run there).

The front end sends back, as changes of its own, every change a patch made on its document (it
applies the patch, then reports what changed). Those echoes are not the browser's changes:
- a data source's (a stream, a patch, its columns replaced): no tool of the views edits data,
  so every such change from the browser is an echo, dropped in the kernel (`data_echo`), before
  it costs the pipe and this process anything; made again, each stream would be appended twice
  and a stale echo of a compaction would put back columns since streamed past;
- a property's (the axis the view moved as the run went on, a legend entry shown): each value
  this process sends is expected back once; the value that comes back is taken for that echo,
  not made again (made late, an echo would put back an axis the user has zoomed since).
A change the browser made while patches of the same property were on their way to it is
followed there by those patches: the process sends its value again, after them, so the
browser's change stays.

Pieces travel between the processes as one body each (`pack` / `unpack`).
"""

from __future__ import annotations

import json
import struct
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bokeh.core.serialization import Deserializer, Serialized, Serializer
from bokeh.document import Document
from bokeh.embed.elements import div_for_render_item
from bokeh.embed.util import standalone_docs_json_and_render_items
from bokeh.protocol.messages.patch_doc import PatchJson, patch_doc

Piece = str | bytes
PIECE = struct.Struct("<cI")  # kind (b"s" text, b"b" bytes), length
TEXT, BYTES = b"s", b"b"
DATA_KINDS = frozenset({"ColumnsStreamed", "ColumnsPatched"})
ECHOES_KEPT = 64  # values a property was sent and not yet heard back: past these, the oldest go


def data_echo(content: dict[str, Any]) -> bool:
    """Whether a front end's event changes a data source: only ever an echo of a patch."""
    kind = content.get("kind")
    return kind in DATA_KINDS or (kind == "ModelChanged" and content.get("attr") == "data")


def _scalar(value: Any) -> tuple[str, Any] | None:
    """A property's value as both sides write it (an integral float comes back as an integer),
    or None for what is not a number, a flag or a text (such changes are made as they come)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return ("v", value)
    if isinstance(value, int | float):
        return ("n", float(value))
    return None


class Echoes:
    """The property values sent to a front end and not yet heard back from it: what comes back
    that is one of them is its echo (`heard`); a change of the browser's own to a property
    some of whose values are still on their way there is `crossed` by them."""

    def __init__(self) -> None:
        self._unheard: dict[tuple[str, str], deque[tuple[str, Any]]] = {}

    def sent(self, model_id: str, attr: str, new: Any) -> None:
        """A property's change, as it goes to the front end."""
        value = _scalar(new)
        if value is not None:
            self._unheard.setdefault((model_id, attr), deque(maxlen=ECHOES_KEPT)).append(value)

    def heard(self, content: dict[str, Any]) -> bool:
        """Whether a front end's event is the echo of a value sent (taken off those unheard)."""
        if content.get("kind") != "ModelChanged":
            return False
        value = _scalar(content.get("new"))
        unheard = self._unheard.get((content["model"]["id"], content["attr"]))
        if value is None or not unheard or value not in unheard:
            return False
        unheard.remove(value)
        return True

    def crossed(self, content: dict[str, Any]) -> bool:
        """Whether values of the property the browser changed are still on their way there (it
        makes them after its own change, which must then be sent to it again, after them)."""
        if content.get("kind") != "ModelChanged":
            return False
        return bool(self._unheard.get((content["model"]["id"], content["attr"])))

    def make(self, doc: Document | None, content: dict[str, Any], change: Callable[[], None]) -> None:
        """Make a front end's event by `change()` unless it is an echo; a change crossed by
        values on their way is sent to the front end again, after them."""
        if self.heard(content):  # what this side holds is as new or newer
            return
        crossed = self.crossed(content)
        change()
        if crossed and doc is not None:
            model = doc.get_model_by_id(content["model"]["id"])
            if model is not None:
                value = getattr(model, content["attr"])
                model.trigger(content["attr"], value, value)  # not as the setter: it is sent


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
    except those the browser made itself (`apply` makes them as this object).

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
        self.echoes = Echoes()

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
        encoded = self._serializer.encode(event)
        self._encoded.append(encoded)
        if isinstance(encoded, dict) and encoded.get("kind") == "ModelChanged":
            self.echoes.sent(encoded["model"]["id"], encoded["attr"], encoded["new"])
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

    def apply(self, doc: Document, content: dict[str, Any]) -> None:
        """Make on `doc` a change a browser's front end sent (its event without the `event`
        key), unless it is the echo of one this object sent; runs the change's Python callbacks.
        A change is made as this object, so that it is not sent back."""
        self.echoes.make(doc, content, lambda: self._make(doc, content))

    def _make(self, doc: Document, content: dict[str, Any]) -> None:
        kind = content.get("kind")
        if kind not in ("ModelChanged", "MessageSent"):
            return
        serialized = Serialized(content=content, buffers=[])
        event = Deserializer(list(doc.models), setter=self).deserialize(serialized)
        if kind == "ModelChanged":
            model, attr = event["model"], event["attr"]
            descriptor = model.lookup(attr)
            old = descriptor._get(model)
            new = descriptor.property.prepare_value(model, descriptor.name, event["new"])
            descriptor._set(model, old, new, setter=self)  # notifies the property's callbacks
        elif event["msg_type"] == "bokeh_event":
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
