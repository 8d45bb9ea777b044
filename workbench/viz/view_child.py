"""The live view's own process: `python -m workbench.viz.view_child`, started by view_process.py.

The run's process only ships what it recorded (rows_codec.py's bodies, framed as a journal's
records, on this process's stdin, ten times a second); everything a live view costs happens
here: a recorder of its own grows from the shipped rows, a Bokeh server serves it (live.py's
`LiveView`: bars, compaction, distributions, counters), the running summary is made here, and
the patches are serialised and sent from here.

Protocol. In: `HEADER` (JSON: origin_ns, port, title, name, label, lanes, worker_gpu,
summary, page_title, report_bars, relay_fd), then `ROWS` records (their JSON part carries the
sender's clock as `now_ns`) and `EVENT` records (JSON: a browser's change to the relayed view),
then `END` when the run has ended; end of input: leave. Out, one JSON line each:
`{"ready": url}` (with `"bundle"`, the relayed view's document, when relaying; or
`{"error": why}`), and after `END` `{"final": ...}`: what the views built (each says whether it
made its last update) and what this process spent. With `relay_fd` the first view is not
served but relayed (doc_relay.py): its patches go down that pipe as `PATCH` records and, once it
has made its last update, its whole document as a `BUNDLE` record, before the final line. This
process leaves as well when its parent is gone (polled: a parent killed outright closes
nothing if a process it forked holds the pipe).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import threading
import time
from typing import Any, BinaryIO

from workbench.prover.pool import exit_with_parent
from workbench.trace.journal_format import FRAME, HEADER, ROWS, frame, write_all
from workbench.trace.recorder import Recorder
from workbench.trace.rows_codec import RowsDecoder

END, EVENT = b"E", b"J"
# Set (to 1) in the run's environment: the views update at every poll, ten a second, however
# many bars the browser holds and whatever an update costs (what the view's cost is measured at).
UNPACED_ENV = "WORKBENCH_LIVE_UNPACED"
PATCH, BUNDLE = b"P", b"B"
IDLE_TICK_S = 0.25  # once the last report is out, nothing is left to refresh
STRAGGLERS_S = 5.0  # how long the views get to make their last update, once the run has ended


class FedClock:
    """The sender's clock as last shipped, moved on by this host's monotonic time since."""

    def __init__(self, now_ns: int) -> None:
        self._base = (now_ns, time.perf_counter_ns())

    def set(self, now_ns: int) -> None:
        self._base = (now_ns, time.perf_counter_ns())

    def now_ns(self) -> int:
        sent, got = self._base
        return sent + time.perf_counter_ns() - got


def read_record(stream: BinaryIO) -> tuple[bytes, bytes] | None:
    head = _exactly(stream, FRAME.size)
    if head is None:
        return None
    length, _ = FRAME.unpack(head)  # a pipe from the parent: no torn or damaged record to check for
    payload = _exactly(stream, length)
    return None if payload is None else (payload[:1], payload[1:])


def _exactly(stream: BinaryIO, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class Relay:
    """The relayed view's end of the relay pipe: its patches as they are made, and its whole
    document when asked. A parent gone (the pipe broken) ends the relaying, not this process
    (the parent's watch does that)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.broken = False

    def write(self, kind: bytes, body: bytes) -> None:
        if self.broken:
            return
        try:
            write_all(self.fd, frame(kind, body))
        except OSError:
            self.broken = True


class Feed:
    """The views of the shipped rows: the first page's view is made at once and kept up to date
    before anyone looks (so a page opened late, or none, costs nothing more); each page after it
    gets a view of its own from the first span. Relaying, the first view is the notebook's and
    every page gets a view of its own."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.header = header
        self.clock = FedClock(int(header["origin_ns"]))
        self.recorder = Recorder(clock=self.clock, nvtx=False)
        self.recorder.origin_ns = int(header["origin_ns"])
        self.decoder = RowsDecoder()
        self.ended = threading.Event()  # END arrived: every row is in
        self.closing = threading.Event()  # and the last summary is made: the views' last update
        self.lock = threading.Lock()
        self.views: list[Any] = []
        self.finals: set[int] = set()
        self.first = self._view()
        self.claimed = False
        self.summary_html = ""
        self.summary: Any = None
        if header.get("summary"):
            from workbench.viz.live_summary import RunningSummary, SummaryPacer

            self.summary, self.pacer = RunningSummary(self.recorder), SummaryPacer()
        self.relay: Relay | None = None
        self.bundle = ""
        if header.get("relay_fd") is not None:
            self._relay_first(Relay(int(header["relay_fd"])))

    def _relay_first(self, relay: Relay) -> None:
        from bokeh.document import Document

        from workbench.viz.doc_relay import PatchSource, bundle, pack

        self.root = self._root(self.first)
        Document().add_root(self.root)
        self.bundle = bundle(self.root)
        self.source = PatchSource(lambda pieces: relay.write(PATCH, pack(pieces))).attach(self.root.document)
        self.relay, self.claimed = relay, True

    def _root(self, view: Any) -> Any:
        from bokeh.layouts import column

        children = [view.layout] + ([view.summary_div] if self.summary is not None else [])
        return column(*children, sizing_mode="stretch_width")

    def event(self, body: bytes) -> None:
        """A browser's change to the relayed view, made on its document (its callbacks run)."""
        if self.relay is None:
            return
        with self.lock, self.source.batch():  # what its callbacks change: one message
            try:
                self.source.apply(self.root.document, json.loads(body))
            except Exception as err:  # one change the view cannot make: the view goes on
                print(f"a browser's change was not made: {type(err).__name__}: {err}", file=sys.stderr)

    def _view(self) -> Any:
        from bokeh.models.widgets import Div

        from workbench.viz.live import LiveView

        h = self.header
        worker_gpu = {int(k): v for k, v in h["worker_gpu"].items()} if h.get("worker_gpu") else None
        view = LiveView(self.recorder, h.get("lanes"), title=h.get("title") or "live Gantt",
                        name=h.get("name") or "gantt", worker_gpu=worker_gpu, label=h.get("label", ""),
                        paced=os.environ.get(UNPACED_ENV) != "1")
        view.summary_div = Div(text="", sizing_mode="stretch_width")  # type: ignore[attr-defined]
        self.views.append(view)
        return view

    def add(self, body: bytes) -> None:
        spans, instants, counters, part = self.decoder.decode(body)
        if "now_ns" in part:
            self.clock.set(int(part["now_ns"]))
        if part.get("thread_names"):
            self.recorder.thread_names.update(part["thread_names"])
        self.recorder.add_spans(spans)
        self.recorder.instants.extend(instants)
        self.recorder.counters.extend(counters)

    # -- the views' side ---------------------------------------------------------------------
    def page(self, doc: Any) -> Any:
        with self.lock:
            view, self.claimed = (self.first, True) if not self.claimed else (self._view(), True)
        doc.title = self.header.get("page_title") or "workbench: live view"
        doc.add_root(self._root(view))
        doc.add_periodic_callback(lambda: self.tick(view), 100)
        return view

    def tick(self, view: Any) -> None:
        if id(view) in self.finals:
            return
        final = self.closing.is_set()
        relayed = view is self.first and self.relay is not None
        with self.source.batch() if relayed else contextlib.nullcontext():  # an update: one message
            view.tick(final=final)
            if self.summary is not None and view.summary_div.text != self.summary_html:
                view.summary_div.text = self.summary_html
        if final:
            self.finals.add(id(view))
            if view is self.first and self.relay is not None:
                from workbench.viz.doc_relay import bundle

                # For a browser that draws the view afresh after the run (a reload).
                self.relay.write(BUNDLE, bundle(self.root).encode())

    def refresh(self) -> None:
        """On the ticker's thread: the summary, and the first view before any page holds it.
        Once the run has ended, the summary of every row is made first, then each view makes
        its last update (`closing`), so that each shows that summary."""
        if self.ended.is_set() and not self.closing.is_set():
            if self.summary is not None:
                with self.pacer.timed():
                    self.summary_html = self.summary.html()
            self.closing.set()
        elif self.summary is not None and not self.closing.is_set() and self.pacer.due():
            with self.pacer.timed():
                self.summary_html = self.summary.html()
        with self.lock:
            if not self.claimed or self.relay is not None:
                self.tick(self.first)

    def report(self) -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        out: dict[str, Any] = {"cpu_s": usage.ru_utime + usage.ru_stime, "spans": len(self.recorder.spans),
                               "views": [], "summaries": self.pacer.count if self.summary is not None else 0,
                               "relayed": self.source.patches if self.relay is not None else 0}
        for view in self.views:
            s = view.stats
            out["views"].append({"bars": view.gantt.bar_count(), "spans": s.spans, "updates": s.updates,
                                 "deferred": s.deferred, "update_mean_ms": s.mean_ms,
                                 "update_max_ms": s.max_ms, "update_cpu_ms": s.cpu_mean_ms,
                                 "parts": dict(s.parts), "final": id(view) in self.finals,
                                 "following": view.following})
        if self.header.get("report_bars"):
            bars = self.first.spans_built()
            out["bars"] = {"lane": bars.lane.tolist(), "phase": bars.phase.tolist(),
                           "left": bars.left.tolist(), "right": bars.right.tolist(),
                           "partition": bars.partition.tolist()}
            out["summary_html"] = self.summary_html
        return out


def main() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout
    parent = os.getppid()
    first = read_record(stdin)
    if first is None or first[0] != HEADER:
        return 2
    header = json.loads(first[1])
    try:
        feed = Feed(header)
        from workbench.viz.live_server import LiveServer

        server = LiveServer(feed.page, int(header.get("port") or 0)).start()
    except Exception as err:  # said to the parent, which says it in one line
        print(json.dumps({"error": f"{type(err).__name__}: {err}"}), file=stdout, flush=True)
        return 1
    print(json.dumps({"ready": server.url, **({"bundle": feed.bundle} if feed.relay else {})}),
          file=stdout, flush=True)
    gone = threading.Event()

    def ticker() -> None:
        ended_at, reported = None, False
        while not gone.is_set():
            if not reported:
                feed.refresh()
            if feed.ended.is_set() and not reported:
                ended_at = ended_at or time.monotonic()
                # A page closed before the end never makes its last update: not waited for long.
                if len(feed.finals) == len(feed.views) or time.monotonic() - ended_at > STRAGGLERS_S:
                    print(json.dumps({"final": feed.report()}), file=stdout, flush=True)
                    reported = True
            gone.wait(0.1 if not reported else IDLE_TICK_S)

    exit_with_parent(parent)  # the run's process gone (killed outright, say): so is its view
    watch = threading.Thread(target=ticker, name="workbench-view-ticker", daemon=True)
    watch.start()
    while (record := read_record(stdin)) is not None:
        kind, body = record
        if kind == ROWS:
            feed.add(body)
        elif kind == EVENT:
            feed.event(body)
        elif kind == END:
            feed.ended.set()
    gone.set()  # the parent closed the pipe: leave (the pages go with the server)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
