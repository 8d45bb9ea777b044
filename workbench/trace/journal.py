"""The journal: what a run records, streamed to disk while it runs, so no way of ending it
(SIGKILL, a crash, a second Ctrl-C during the save) loses more than the last flush.

A flusher thread drains the recorder (`Recorder.drain`: the recording path stays a tuple
append) every `INTERVAL_S` and appends what is new as one record (framing in
journal_format.py), written whole by one `write` and synced. When the run ends the last
records are flushed, the `.wbtrace` is written atomically and only then is the journal
removed; a journal left behind is read by `store.load` and `workbench recover`.

A `ROWS` record's body: u32 length of a JSON part, the JSON part, then the columns, little-
endian: spans track, name (int32), start_ns, end_ns (int64), partition, worker (int32);
instants track, name (int32), ts_ns (int64), partition, worker (int32); counters track, name
(int32), ts_ns (int64), value (float64). The JSON part holds the row counts (`spans`,
`instants`, `counters`), the strings new since the record before (`strings`, numbered on
from the ones before), the attributes (`span_attrs`, `instant_attrs`: one object or null a
row, left out when all are null), and, when they changed, the thread names and the run
facts (`thread_names`, `meta`: the whole object each time).
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.trace import output
from workbench.trace.journal_format import FORMAT, HEADER, MAGIC, ROWS, SUFFIX, VERSION, frame
from workbench.trace.recorder import Recorder
from workbench.trace.rows_codec import RowsEncoder, as_json

if TYPE_CHECKING:
    from workbench.trace.container import Trace

INTERVAL_S = 0.5  # a flush takes a moment: half a second keeps the gap well under one


def journal_path(target: str | os.PathLike[str]) -> Path:
    """Where the journal of a trace bound for `target` goes: beside it, `<name>.wbjournal`."""
    target = Path(target)
    return target.with_name(target.name + SUFFIX)


THREAD_NAME = "workbench-journal"  # the flusher; prover/pool.py forks beside it
_STOPS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))

class Journal:
    """Create with `Journal.create`, then `start()`; `finish(trace)` at the end of the run, or
    `close()` on a way out that saves nothing (the journal stays for `workbench recover`)."""

    def __init__(self, fd: int, path: Path, target: Path, recorder: Recorder,
                 interval_s: float = INTERVAL_S, sync: bool = True) -> None:
        self.path = path
        self.target = target
        self.recorder = recorder
        self.interval_s = interval_s
        self.sync = sync
        self.error: str | None = None  # why journaling stopped early (the run goes on)
        self.records = self.spans = self.instants = self.counters = 0
        self._fd: int | None = fd
        self._cursor = (0, 0, 0)
        self._encoder = RowsEncoder()
        self._names: dict[str, str] = {}
        self._meta: dict[str, Any] = {}
        self._meta_changed = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def create(cls, target: str | os.PathLike[str], recorder: Recorder, config: dict[str, Any] | None = None,
               meta: dict[str, Any] | None = None, **options: Any) -> Journal:
        """A new journal beside `target` (a fresh name: never over what is there), its header
        written and synced."""
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, path = output.create_fresh(journal_path(target), keep=SUFFIX)
        journal = cls(fd, path, target, recorder, **options)
        header = {"format": FORMAT, "version": VERSION, "target": str(target), "pid": os.getpid(),
                  "started": time.time(), "origin_ns": recorder.origin_ns, "config": config or {},
                  "meta": meta or {}}
        try:
            journal._write(MAGIC + frame(HEADER, as_json(header)))
        except BaseException:
            journal.close()
            journal.remove()
            raise
        return journal

    # -- the run's side --------------------------------------------------------------------------
    def start(self) -> Journal:
        self._thread = threading.Thread(target=self._loop, name=THREAD_NAME, daemon=True)
        self._thread.start()
        # However the interpreter ends short of a kill (an uncaught error, sys.exit), the last
        # records are flushed.
        atexit.register(self.close)
        return self

    def note(self, facts: dict[str, Any]) -> None:
        """Run facts (backend, device, outcome, ...) to write with the next flush."""
        with self._lock:
            self._meta.update(facts)
            self._meta_changed = True

    def close(self, facts: dict[str, Any] | None = None) -> None:
        """Stop the flusher and write the last records (with `facts`); idempotent."""
        atexit.unregister(self.close)
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if facts:
            self.note(facts)
        self.flush()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        if self.records == 0 and self.error is None:  # nothing was recorded: nothing to recover
            self.remove()

    def finish(self, trace: Trace, *, fresh: bool = False) -> Path:
        """The last flush, the trace saved whole to the target, then the journal removed (a
        failed save leaves it). Returns the trace's path."""
        from workbench.trace import store

        self.close(trace.meta)
        written = store.save(trace, self.target, fresh=fresh)
        self.remove()
        return written

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    # -- the flusher -----------------------------------------------------------------------------
    def _loop(self) -> None:
        # Stop signals are the main thread's to take: one delivered here would still raise
        # there, but at a moment the main thread had blocked them for (a pool starting).
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        while not self._stopping.wait(self.interval_s):
            self.flush()

    def flush(self) -> None:
        """Append what was recorded since the last flush (nothing when nothing changed)."""
        with self._lock:
            if self._fd is None or self.error is not None:
                return
            spans, instants, counters, cursor = self.recorder.drain(self._cursor)
            names = self.recorder.thread_names_now()
            names_changed = names != self._names
            if not (spans or instants or counters or names_changed or self._meta_changed):
                return
            try:
                body = self._encoder.encode(spans, instants, counters, names if names_changed else None,
                                            self._meta if self._meta_changed else None)
                self._write(frame(ROWS, body))
            except (OSError, TypeError, ValueError, OverflowError) as err:
                # The run goes on and its trace is still saved from memory at the end.
                self.error = f"{type(err).__name__}: {err}"
                return
            self._cursor, self._names, self._meta_changed = cursor, names, False
            self.records += 1
            self.spans += len(spans)
            self.instants += len(instants)
            self.counters += len(counters)

    def _write(self, data: bytes) -> None:
        fd = self._fd
        assert fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if self.sync:
            (getattr(os, "fdatasync", None) or os.fsync)(fd)

