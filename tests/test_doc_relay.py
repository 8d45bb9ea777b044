"""A document relayed from another process (viz/doc_relay.py): what a front end rebuilds from
the pieces is the document the process holds, change for change."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from bokeh.document import Document
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Div, Range1d
from bokeh.plotting import figure
from bokeh.protocol import Protocol
from bokeh.protocol.receiver import Receiver
from front_end import apply_as_the_page

from workbench.viz.doc_relay import PatchSource, bundle, pack, unpack


def relayed() -> tuple[ColumnDataSource, Div, Document, list[list], PatchSource]:
    source = ColumnDataSource({"x": [0.0], "y": [0.0]}, name="s")
    plot = figure()
    plot.scatter("x", "y", source=source)
    title = Div(text="start", name="title")
    root = column(plot, title)
    Document().add_root(root)
    (doc_json,) = json.loads(bundle(root))["docs_json"].values()
    front = Document.from_json(doc_json)
    sent: list[list] = []
    relay = PatchSource(lambda pieces: sent.append(unpack(pack(pieces)))).attach(root.document)
    return source, title, front, sent, relay


def apply(front: Document, sent: list[list]) -> None:
    receiver = Receiver(Protocol())
    for pieces in sent:
        for piece in pieces:
            message = asyncio.run(receiver.consume(piece))
        apply_as_the_page(front, message)


def test_a_batch_is_one_message_of_each_change_as_it_was_made():
    """The view grows its columns and relabels its bars in place after streaming them: the
    message must carry what each change was when it was made, not what its values became."""
    source, title, front, sent, relay = relayed()
    with relay.batch():
        new = {"x": np.array([1.0, 2.0]), "y": np.array([3.0, 4.0])}
        source.stream(new)
        new["x"][:] = 7.0  # changed in place after the stream
        title.text = "streamed"
        source.data = {"x": [5.0], "y": [6.0]}  # replaced (a compaction), then streamed onto
        source.stream({"x": [8.0], "y": [9.0]})
    assert len(sent) == 1 and len(sent[0]) == 3  # header, metadata, content: no buffers
    apply(front, sent)
    shown = front.get_model_by_name("s")
    assert list(shown.data["x"]) == list(source.data["x"]) == [5.0, 8.0]
    assert list(shown.data["y"]) == [6.0, 9.0]
    assert front.get_model_by_name("title").text == "streamed"


def test_a_change_outside_a_batch_is_a_message_of_its_own():
    source, title, front, sent, _ = relayed()
    title.text = "one"
    source.stream({"x": [1.0], "y": [2.0]})
    assert len(sent) == 2
    apply(front, sent)
    assert list(front.get_model_by_name("s").data["x"]) == [0.0, 1.0]
    assert front.get_model_by_name("title").text == "one"



def axis_relayed() -> tuple[Range1d, Document, list[list], PatchSource]:
    plot = figure(x_range=Range1d(0.0, 1.0))
    plot.scatter([0.0], [0.0])
    Document().add_root(plot)
    sent: list[list] = []
    relay = PatchSource(lambda pieces: sent.append(unpack(pack(pieces)))).attach(plot.document)
    return plot.x_range, plot.document, sent, relay


def end_from_browser(axis: Range1d, value: float) -> dict:
    """A front end's event as it sends it (an integral value comes as an integer)."""
    return {"kind": "ModelChanged", "model": {"id": axis.id}, "attr": "end",
            "new": int(value) if value == int(value) else value}


def sent_ends(sent: list[list]) -> list[float]:
    return [e["new"] for pieces in sent for e in json.loads(pieces[2])["events"]
            if e["kind"] == "ModelChanged" and e["attr"] == "end"]


def test_a_zoom_crossed_by_the_views_own_moves_of_the_axis_stays_once_their_echoes_are_back():
    """The front end echoes every change a patch made. The view moved its axis twice (5, then 6)
    while the browser zoomed (0.05): the browser takes 5 and 6 after its zoom and echoes them
    after it. The zoom must win on both sides: made here, sent again after 5 and 6, and the
    late echoes of 5 and 6 not made again."""
    axis, doc, sent, relay = axis_relayed()
    axis.end = 5.0
    axis.end = 6.0
    assert sent_ends(sent) == [5.0, 6.0]
    relay.apply(doc, end_from_browser(axis, 0.05))
    assert axis.end == 0.05 and sent_ends(sent) == [5.0, 6.0, 0.05]  # after the moves in flight
    for echoed in (5.0, 6.0, 0.05):
        relay.apply(doc, end_from_browser(axis, echoed))
        assert axis.end == 0.05
    assert sent_ends(sent) == [5.0, 6.0, 0.05]
    relay.apply(doc, end_from_browser(axis, 0.07))  # a zoom crossed by nothing: not sent back
    assert axis.end == 0.07 and sent_ends(sent) == [5.0, 6.0, 0.05]
    # A value heard back once is the browser's own the next time (a second click on an entry).
    relay.apply(doc, end_from_browser(axis, 6.0))
    assert axis.end == 6.0


def test_a_browsers_echo_of_a_stream_is_not_relayed_to_the_views_process():
    from workbench.viz.doc_relay import data_echo

    assert data_echo({"kind": "ColumnsStreamed", "model": {"id": "x"}, "attr": "data", "data": {}})
    assert data_echo({"kind": "ColumnsPatched", "model": {"id": "x"}, "attr": "data", "patches": {}})
    assert data_echo({"kind": "ModelChanged", "model": {"id": "x"}, "attr": "data", "new": {}})
    assert not data_echo({"kind": "ModelChanged", "model": {"id": "x"}, "attr": "end", "new": 1.0})


def test_bars_relabelled_in_place_and_then_streamed_onto_reach_a_page_whole():
    """A kernel overtaking others takes their legend entry: the view changes its bars' kind and
    colour columns in place (a change of some columns), then streams onto them. A page keeps
    the columns the change left alone (on the H200 the benchmark's front end, which did not,
    refused the stream that followed)."""
    source = ColumnDataSource({"x": np.array([0.0, 1.0]), "kind": np.array(["a", "b"]),
                               "color": np.array(["#111111", "#222222"])}, name="s")
    plot = figure()
    plot.scatter("x", "x", source=source)
    Document().add_root(plot)
    (doc_json,) = json.loads(bundle(plot))["docs_json"].values()
    front = Document.from_json(doc_json)
    sent: list[list] = []
    relay = PatchSource(lambda pieces: sent.append(unpack(pack(pieces)))).attach(plot.document)
    with relay.batch():
        source.data.update({"kind": np.array(["c", "c"]), "color": np.array(["#333333"] * 2)})
        source.stream({"x": [2.0], "kind": ["c"], "color": ["#333333"]})
    kinds = [e["kind"] for e in json.loads(sent[0][2])["events"]]
    assert kinds == ["ColumnDataChanged", "ColumnsStreamed"]
    apply(front, sent)
    shown = front.get_model_by_name("s").data
    assert list(shown["x"]) == [0.0, 1.0, 2.0] and list(shown["kind"]) == ["c", "c", "c"]
