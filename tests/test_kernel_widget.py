"""The widget of a document the kernel holds (viz/kernel_widget.py): the front end's echoes of
what the kernel sent are not made again on the kernel's document."""

from __future__ import annotations

import pytest

pytest.importorskip("jupyter_bokeh", reason="the notebook extra is not installed")

from bokeh.models import ColumnDataSource, Range1d
from bokeh.plotting import figure

from workbench.viz.kernel_widget import BokehModel, KernelDocument


def shown(widget_class):
    source = ColumnDataSource({"x": [0.0], "y": [0.0]})
    plot = figure(x_range=Range1d(0.0, 1.0))
    plot.scatter("x", "y", source=source)
    widget = widget_class(plot)
    return source, plot.x_range, widget


def from_browser(widget, event: dict) -> None:
    """As the front end sends a change: the widget's message from the browser."""
    widget._handle_custom_msg({"event": "jsevent", **event}, [])


def stream_echo(source) -> dict:
    return {"kind": "ColumnsStreamed", "model": {"id": source.id}, "attr": "data", "rollover": None,
            "data": {"type": "map", "entries": [["x", [1.0]], ["y", [2.0]]]}}


def test_the_installed_widget_appends_an_echoed_stream_a_second_time():
    """What the widget is for: the installed one makes the echo, doubling the kernel's rows."""
    source, _, widget = shown(BokehModel)
    source.stream({"x": [1.0], "y": [2.0]})
    from_browser(widget, stream_echo(source))
    assert list(source.data["x"]) == [0.0, 1.0, 1.0]


def test_an_echoed_stream_is_not_appended_again():
    source, _, widget = shown(KernelDocument)
    source.stream({"x": [1.0], "y": [2.0]})
    from_browser(widget, stream_echo(source))
    assert list(source.data["x"]) == [0.0, 1.0]


def test_a_late_echo_of_the_axis_does_not_undo_a_zoom_and_the_zoom_is_sent_after_it():
    _, axis, widget = shown(KernelDocument)
    sent: list[dict] = []
    widget.send = lambda content, buffers=None: sent.append(content)
    axis.end = 5.0  # the view following the run
    from_browser(widget, {"kind": "ModelChanged", "model": {"id": axis.id}, "attr": "end", "new": 0.05})
    assert axis.end == 0.05
    assert any('"new":0.05' in c.get("payload", "") for c in sent)  # sent again, after the 5
    from_browser(widget, {"kind": "ModelChanged", "model": {"id": axis.id}, "attr": "end", "new": 5})
    assert axis.end == 0.05
