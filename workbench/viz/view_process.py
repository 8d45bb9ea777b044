"""A live view in a process of its own (view_child.py), fed by the run's process.

The CPU backend's run is one interpreter: a view in it (the Bokeh document, its server's
loop, serialising patches, bars, compaction, distributions, the running summary) takes its
CPU from the run however many cores are free. Here the run's process does only what cannot
move: ten times a second a thread of its own drains what was recorded since its last look and
writes it down a pipe as columns (rows_codec.py; one `write` a batch); the child builds and
serves the view at `url`, one view a page, every page from the first span. With `relay`,
the first view is a notebook's instead (doc_relay.py): the child writes its patch messages,
already serialised, down a second pipe, and `attach` hands them, as they come, to the widget
that shows it (comm_relay.py); what the browser changes comes back through `send_event`.

If the child dies the run goes on: `error` says why in one line (and `say` is called with it
once); nothing recorded is lost to the run, only to the view. The child never outlives this
process: it leaves when its input closes or when its parent changes (view_child.py), and it
runs in a session of its own, so a terminal's Ctrl-C goes to the run alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from workbench.trace.journal_format import HEADER, ROWS, frame, write_all
from workbench.trace.recorder import Recorder
from workbench.trace.rows_codec import FEED_THREADS, RowsEncoder, as_json
from workbench.viz.deps import require
from workbench.viz.live import PERIOD_S

END, EVENT = b"E", b"J"  # view_child.END, view_child.EVENT
PATCH, BUNDLE = b"P", b"B"  # view_child's records on the relay pipe
# Not one of FEED_THREADS: it sends through the notebook's messaging, whose locks a forked
# worker must not inherit mid-send.
RELAY_THREAD = "workbench-view-relay"
READY_S = 60.0  # importing Bokeh and starting its server, on a loaded host
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class ViewProcess:
    def __init__(
        self, recorder: Recorder, lanes: list[str] | None = None, title: str = "live Gantt",
        name: str = "gantt", label: str = "", worker_gpu: Mapping[int, int] | None = None,
        summary: bool = False, port: int = 0, page_title: str = "", report_bars: bool = False,
        say: Callable[[str], None] | None = None, period: float = PERIOD_S, relay: bool = False,
    ) -> None:
        self.recorder = recorder
        self.header = {"origin_ns": recorder.origin_ns, "port": port, "title": title, "name": name,
                       "label": label, "lanes": lanes, "summary": summary, "page_title": page_title,
                       "report_bars": report_bars,
                       "worker_gpu": {str(k): v for k, v in worker_gpu.items()} if worker_gpu else None}
        self.say = say
        self.period = period
        self.relay = relay
        self.url = ""
        self.bundle = ""  # with `relay`: the relayed view's document, as the front end draws it
        self.relayed = 0  # patch messages handed on
        self.relay_cpu_s = 0.0  # the relaying thread's CPU seconds so far (handing them on)
        self.error: str | None = None
        self.shipped = 0  # spans written to the child
        self.batches = 0
        self.cpu_s = 0.0  # the feeding thread's CPU seconds so far
        self.report: dict[str, Any] | None = None  # what the child said after the run ended
        self._encoder = RowsEncoder()
        self._cursor = (0, 0, 0)
        self._names: dict[str, str] = {}
        self._lines: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._errors: Any = None
        self._feeder = threading.Thread(target=self._feed, name=FEED_THREADS[0], daemon=True)
        self._relay_in: Any = None
        self._relaying = False  # the relay's reader has started (it closes the pipe's end)
        self._on_patch: Callable[[list[str | bytes]], None] | None = None
        self._on_bundle: Callable[[str], None] | None = None
        self._ending = threading.Event()  # END written: the next bundle is the last one
        self._last_bundle = threading.Event()

    # -- starting ---------------------------------------------------------------------------------
    def start(self) -> ViewProcess:
        require("bokeh")
        require("tornado")
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 - the child's stderr, closed by close()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p),  # this code, not another copy
            # Ids no other process makes: a page holds this view beside the kernel's figures and
            # the views of earlier runs' processes, each of whose counters starts where this one does.
            "BOKEH_SIMPLE_IDS": "no"}
        relay_out = None
        if self.relay:
            relay_in, relay_out = os.pipe()
            self._relay_in = os.fdopen(relay_in, "rb")
            self.header["relay_fd"] = relay_out
        try:
            self._process = subprocess.Popen(
                # -P: no working folder ahead of PYTHONPATH (another checkout there would be imported).
                [sys.executable, "-P", "-m", "workbench.viz.view_child"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._errors, bufsize=0, env=env, start_new_session=True,
                pass_fds=() if relay_out is None else (relay_out,))
        finally:
            if relay_out is not None:
                os.close(relay_out)  # the child's end: at its exit the relay reads to its end
        threading.Thread(target=self._read_lines, name=FEED_THREADS[1], daemon=True).start()
        self._write(frame(HEADER, as_json(self.header)))
        said = self._said(READY_S)
        if said is None or "ready" not in said:
            why = (said.get("error") if said else
                   f"it did not start within {READY_S:.0f} s ({self._last_error()})")
            self.close()
            raise OSError(f"live view: its process could not serve the view: {why}")
        self.url = str(said["ready"])
        self.bundle = str(said.get("bundle", ""))
        self._feeder.start()
        return self

    def attach(self, on_patch: Callable[[list[str | bytes]], None],
               on_bundle: Callable[[str], None] | None = None) -> None:
        """With `relay`: hand each patch of the relayed view to `on_patch` from now on (the child
        waits for this, its pipe full, if it changes much before), and the document afresh,
        once the run has ended, to `on_bundle` (for a browser that draws it later)."""
        assert self.relay and self._relay_in is not None
        self._on_patch, self._on_bundle = on_patch, on_bundle
        self._relaying = True
        threading.Thread(target=self._read_relay, name=RELAY_THREAD, daemon=True).start()

    def _read_relay(self) -> None:
        from workbench.viz.doc_relay import unpack
        from workbench.viz.view_child import read_record

        with self._relay_in as stream:  # closed here, once the child has closed its end
            while (record := read_record(stream)) is not None:
                kind, body = record
                try:
                    if kind == PATCH and self._on_patch is not None:
                        self._on_patch(unpack(body))
                        self.relayed += 1
                    elif kind == BUNDLE:
                        if self._on_bundle is not None:
                            self._on_bundle(body.decode())
                        if self._ending.is_set():
                            self._last_bundle.set()
                except Exception as err:  # a widget that cannot send: the run and the child go on
                    self._died(f"the live view could not be shown ({type(err).__name__}: {err}); "
                               f"the run goes on without it")
                    self._on_patch = self._on_bundle = None
                self.relay_cpu_s = time.thread_time()

    def send_event(self, content: dict[str, Any]) -> None:
        """What the browser changed in the relayed view (a front end's event), for the child to
        make on its document; dropped once the child cannot take it."""
        try:
            body = json.dumps(content, separators=(",", ":")).encode()
            with self._write_lock:
                if self.error is None and self.alive:
                    self._write(frame(EVENT, body))
        except (OSError, TypeError, ValueError):
            pass  # the feeder says the child's end, if it has ended

    def _read_lines(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        with self._process.stdout as said:  # closed here, once the child has closed its end
            for line in said:
                self._lines.put(line.decode(errors="replace"))

    def _said(self, timeout: float) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._lines.get(timeout=timeout)))
        except (queue.Empty, ValueError, TypeError):
            return None

    # -- feeding ----------------------------------------------------------------------------------
    def _feed(self) -> None:
        while not self._stop.wait(self.period):
            alive = self.ship()
            self.cpu_s = time.thread_time()  # what feeding the view has cost the run's process
            if not alive:
                return

    def ship(self) -> bool:
        """Write what was recorded since the last batch; False once the child cannot take it."""
        with self._write_lock:
            if self.error is not None:
                return False
            spans, instants, counters, cursor = self.recorder.drain(self._cursor)
            names = self.recorder.thread_names_now()
            changed = names != self._names
            if not (spans or instants or counters or changed):
                return self._alive()
            try:
                body = self._encoder.encode(spans, instants, counters, names if changed else None,
                                            extra={"now_ns": self.recorder.now_ns()})
            except (TypeError, ValueError, OverflowError) as err:  # as the journal's: the run goes on
                self._died(f"the live view stopped: a row it was fed does not encode ({type(err).__name__}: "
                           f"{err}); the run goes on without it")
                self._kill()
                return False
            try:
                self._write(frame(ROWS, body))
            except OSError:
                return self._alive(wrote=False)
            self._cursor, self._names = cursor, names
            self.shipped += len(spans)
            self.batches += 1
            return True

    def _write(self, data: bytes) -> None:
        assert self._process is not None and self._process.stdin is not None
        write_all(self._process.stdin.fileno(), data)

    def _alive(self, wrote: bool = True) -> bool:
        process = self._process
        code = None if process is None else process.poll()
        if wrote and code is None:
            return True
        if code is None and process is not None:
            code = process.wait(5) if process.poll() is None else process.returncode
        self._died(f"the live view's process ended (exit status {code}: {self._last_error()}); "
                   f"the run goes on without it")
        return False

    def _died(self, why: str) -> None:
        if self.error is None:
            self.error = why
            if self.say is not None:
                self.say(why)

    def _last_error(self) -> str:
        if self._errors is None:
            return "nothing said"
        self._errors.seek(0)
        lines = [line for line in self._errors.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1].strip() if lines else "nothing said"

    # -- ending -----------------------------------------------------------------------------------
    def finish(self, timeout: float = 60.0) -> dict[str, Any] | None:
        """The run has ended: ship the last rows, tell the child, and wait for what its views
        built (`report`). The child goes on serving the last view until `close()`."""
        self._stop.set()
        if self._feeder.is_alive():
            self._feeder.join(timeout)
        if not self.ship() or self.error is not None:
            return None
        try:
            with self._write_lock:
                self._ending.set()
                self._write(frame(END, b""))
        except OSError:
            self._alive(wrote=False)
            return None
        said = self._said(timeout)
        while said is not None and "final" not in said:
            said = self._said(timeout)
        self.report = said["final"] if said else None
        if self.report is not None and self._on_patch is not None:
            self._last_bundle.wait(timeout)  # written before the report: every patch is handed on
        return self.report

    def close(self) -> None:
        """End the child (its pages go with it); idempotent."""
        self._stop.set()
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            self._kill()
        if self._errors is not None:
            self._errors.close()
            self._errors = None
        if self._relay_in is not None and not self._relaying:
            self._relay_in.close()

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(5)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None
