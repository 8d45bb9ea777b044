"""A viewer of a live view that is a real websocket client of its Bokeh server document, for
hosts with no browser (benchmarks/live_cost.py starts it in a process of its own, so it does
not share the watched run's interpreter).

    python benchmarks/live_client.py URL

It pulls the document at URL (as a browser's page does: the whole document, then every
patch the server sends over the websocket, applied to its own copy) and says `ready` on
stdout. Sent `expect N` on stdin (the bars the server's document holds at the end), it waits
until its copy holds as many (at most 60 s), then prints one JSON line: the bars it received
(rows streamed into the Gantt's sources), the patches by kind, the bars its copy holds, its
own CPU seconds, how long it waited to catch up, and whether it did. What a browser does
besides (drawing) is on the user's machine, not the run's.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from typing import Any

BARS = tuple(f"live_bars_{k}" for k in range(3))  # the live Gantt's sources (gantt.source_name)


def apply_as_the_page(doc: Any, message: Any, setter: Any = None) -> None:
    """Make a PATCH-DOC message on `doc` as a page's document makes it. Python's document takes
    a change of some of a source's columns (ColumnDataChanged with `cols`: the view relabelling
    its bars in place) as the whole of its data, dropping the other columns, and then refuses
    the next stream onto it; the page keeps the other columns."""
    from bokeh.core.serialization import Deserializer
    from bokeh.document.events import DocumentPatchedEvent

    deserializer = Deserializer(list(doc.models), setter=setter)
    patch = deserializer.deserialize(message.payload)
    for event in patch["events"]:
        if event.get("kind") == "ColumnDataChanged" and event.get("cols") is not None:
            event["data"] = {**event["model"].data, **event["data"]}
        DocumentPatchedEvent.handle_event(doc, event, setter)
    doc.models.flush_synced(lambda model: not deserializer.has_ref(model))


def held(doc: Any) -> int:
    total = 0
    for name in BARS:
        source = doc.get_model_by_name(name)
        if source is not None:
            total += len(source.data.get("left", ()))
    return total


def main() -> None:
    from bokeh.client import pull_session
    from bokeh.document import events

    url = sys.argv[1]
    session = pull_session(url=url)
    doc = session.document
    names = {id(doc.get_model_by_name(n)) for n in BARS}
    counts: dict[str, int] = {"bars_received": 0, "patches": 0, "streams": 0, "replaced": 0, "changed": 0}

    def seen(event: Any) -> None:
        counts["patches"] += 1
        if isinstance(event, events.ColumnsStreamedEvent):
            counts["streams"] += 1
            if id(event.model) in names:
                counts["bars_received"] += len(event.data.get("left", ()))
        elif isinstance(event, events.ColumnDataChangedEvent):
            counts["replaced"] += 1
        elif isinstance(event, events.ModelChangedEvent):
            counts["changed"] += 1

    doc.on_change(seen)
    print("ready", flush=True)

    def answer() -> None:
        for line in sys.stdin:
            if not line.startswith("expect "):
                continue
            expected = int(line.split()[1])
            began = time.monotonic()
            while held(doc) != expected and time.monotonic() - began < 60:
                time.sleep(0.05)
            usage = resource.getrusage(resource.RUSAGE_SELF)
            print(json.dumps({**counts, "held": held(doc), "expected": expected,
                              "caught_up": held(doc) == expected, "waited_s": time.monotonic() - began,
                              "cpu_s": usage.ru_utime + usage.ru_stime}), flush=True)
            os._exit(0)  # the session's loop would go on: leave without it
        os._exit(1)

    threading.Thread(target=answer, daemon=True).start()
    # The session applies the server's patches only while its loop runs; bokeh.client names
    # this loop private (for tests and tools such as this one).
    session._loop_until_closed()
    os._exit(2)  # the server went away before it was asked


def run_deep() -> None:
    """main() in a thread with room for a long session: bokeh.client handles each message it
    receives by awaiting the next one from inside the handler, so its stack grows by a few
    frames a message, and a run of some 330 patches passed the interpreter's default limit
    (RecursionError: the viewer stopped and never caught up)."""
    import asyncio

    sys.setrecursionlimit(400_000)
    threading.stack_size(1 << 30)  # reserved, not used: the pages are touched as it grows

    def deep() -> None:
        asyncio.set_event_loop(asyncio.new_event_loop())
        main()

    thread = threading.Thread(target=deep, name="viewer")
    thread.start()
    thread.join()


if __name__ == "__main__":
    run_deep()
