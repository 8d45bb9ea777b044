"""Chrome trace event JSON in: our own exports exactly, other tools' traces (PyTorch profiler
/ Kineto among them) with every span on the track its role calls for.

Our exports (`otherData.format == "workbench"`) carry the time origin in nanoseconds, the
configuration and run facts, and each thread's track name, so they load back to the same
spans, instants, counters, attributes, configuration and thread names. Other traces: host
threads on `thread/<tid>` (`thread/<pid>.<tid>` where a tid recurs across processes), named
by their metadata; Kineto's GPU work on stream, copy, memset and GPU-range tracks and its
runtime calls on the calling thread's `cuda/` track (see kineto.py); `ac2g` flow instants
moved onto the tracks of the runtime call and the GPU work they link. Times are
nanoseconds from the first timestamp, exact to the digits the file gives; the file's own
origin is `meta["origin_file_ns"]` (and `meta["origin_unix_ns"]` where the file says or
the numbers show it is Unix time).

Contract: `load_chrome(path) -> Trace`, `parse_chrome(text, source) -> Trace`; both raise
only ImportFailed.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import IO, Any

import numpy as np

from workbench.importers import kineto
from workbench.importers.chrome_events import MAX_NS, Columns, Skip
from workbench.importers.chrome_stream import GzipText, Reader, read_events
from workbench.importers.kineto_finish import place_kineto
from workbench.importers.report import ImportFailed, ImportReport
from workbench.model import tracks as tr
from workbench.trace.container import CounterTable, InstantTable, SpanTable, Trace

OURS = "workbench"
GZIP_MAGIC = b"\x1f\x8b"
KEPT_MEMBERS = ("schemaVersion", "traceName", "displayTimeUnit", "baseTimeNanoseconds", "distributedInfo",
                "deviceProperties")
UNIX_NS = (946_684_800 * 10**9, 4_102_444_800 * 10**9)  # years 2000 to 2100: an epoch clock


def load_chrome(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    try:
        with open(path, "rb") as probe:
            zipped = probe.read(2) == GZIP_MAGIC
        handle: IO[str] | GzipText = (GzipText(path) if zipped
                                      else open(path, encoding="utf-8", errors="replace"))  # noqa: SIM115
    except OSError as err:
        raise ImportFailed(f"{path}: cannot read the file ({err.strerror or err})") from None
    try:
        return _parse(handle, str(path))
    finally:
        handle.close()


def parse_chrome(text: str, source: str = "<text>") -> Trace:
    return _parse(_Text(text), source)


class _Text:
    """A string read in chunks, as a file would be."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def read(self, n: int) -> str:
        chunk = self.text[self.at:self.at + n]
        self.at += len(chunk)
        return chunk


def _parse(handle: Any, source: str) -> Trace:
    report = ImportReport("Chrome trace JSON", source)
    columns = Columns(report)
    members: dict[str, Any] = {}

    def on_member(key: str, value: Any) -> None:
        if key == "traceEvents":
            raise ImportFailed(f"{source}: traceEvents is {type(value).__name__}, not a list of events")
        members[key] = value

    def on_event(n: int, event: Any, reader: Reader) -> None:
        try:
            columns.add(n, event, reader)
        except Skip as skip:
            report.skip(str(skip), f"event {n}")

    found, cut = read_events(handle, source, on_member, on_event)
    if not found:
        raise ImportFailed(f"{source}: a JSON object without a traceEvents list is not a Chrome trace")
    if cut is not None:
        report.missing.append(f"the closing ] of traceEvents (the text ends after event {cut - 1})")
    return _Finish(columns, members, source).trace()


class _Finish:
    """The columns placed on tracks, ordered, and made a Trace."""

    def __init__(self, columns: Columns, members: dict[str, Any], source: str) -> None:
        self.c, self.members, self.source = columns, members, source
        other = members.get("otherData")
        self.other = other = other if isinstance(other, dict) else {}
        self.ours = other.get("format") == OURS
        origin = other.get("origin_ns", 0)
        self.origin = origin if self.ours and isinstance(origin, int) and abs(origin) < 2**61 else 0
        self.config = _dict(other.get("config")) if self.ours else {}
        self.meta = _dict(other.get("meta")) if self.ours else {}
        self.thread_names: dict[str, str] = {}

    def trace(self) -> Trace:
        c, report = self.c, self.c.report
        c.unmatched()
        if not c.order and not c.i_ts and not c.c_ts:
            reasons = ", ".join(f"{n} {r}, first at {report.first_at[r]}" for r, n in report.skipped.items())
            raise ImportFailed(f"{self.source}: no usable trace events ({reasons or 'no events'})")
        if not self.ours:
            place_kineto(c)
        threads = self._thread_tracks()
        places = self._place_tracks(threads)
        span_tracks = _tracks(c.thread, c.place, threads, places)
        instant_tracks = _tracks(c.i_thread, c.i_place, threads, places)
        if not self.ours:
            self._flows_to_their_spans(span_tracks, instant_tracks)
        shift = self._shift()
        order = np.frombuffer(c.order, np.int64)
        spans = SpanTable(
            track=span_tracks, name=_ints(c.name), start_ns=np.frombuffer(c.start, np.int64) + shift,
            end_ns=np.frombuffer(c.end, np.int64) + shift, partition=_ints(c.partition),
            worker=_ints(c.worker), attrs=c.attrs,
        )
        if len(order) and np.any(order[1:] < order[:-1]):
            spans = _reorder(spans, np.argsort(order, kind="stable"))
        instants = InstantTable(
            track=instant_tracks, name=_ints(c.i_name), ts_ns=np.frombuffer(c.i_ts, np.int64) + shift,
            partition=_ints(c.i_partition), worker=_ints(c.i_worker), attrs=c.i_attrs,
        )
        counters = CounterTable(
            track=_ints(c.c_track), name=_ints(c.c_name), ts_ns=np.frombuffer(c.c_ts, np.int64) + shift,
            value=np.frombuffer(c.c_value, np.float64).copy(),
        )
        report.kept = len(spans) + len(instants) + len(counters)
        meta = dict(self.meta)
        if not self.ours:
            meta.update(self._origin(shift))
            file_facts = {k: self.members[k] for k in KEPT_MEMBERS if k in self.members}
            if file_facts:
                meta["trace_file"] = file_facts
            ids = np.unique(np.concatenate([span_tracks, instant_tracks])).tolist()
            used = {c.strings.values[i] for i in ids}
            meta["track_order"] = [t for t in self._track_order(threads) if t in used]
            self.thread_names = {t: n for t, n in self.thread_names.items() if t in used}
        if not self.ours or report.skipped:
            meta["import"] = report.as_meta()
        trace = Trace(c.strings, spans, instants, counters, self.config, meta, self.thread_names)
        return underive(trace, self.other) if self.ours else trace

    def _thread_tracks(self) -> list[int]:
        """Each thread's track, as a string id."""
        c = self.c
        tids = Counter(str(tid) for _, tid in c.thread_keys)
        out = []
        for pid, tid in c.thread_keys:
            meta = c.thread_meta.get((pid, tid))
            name = meta.get("name") if meta else None
            if self.ours:
                track = meta.get("track") if meta else None
                if not isinstance(track, str):
                    track = str(name if name is not None else f"tid{tid}") if meta else f"pid{pid}/tid{tid}"
                if meta and isinstance(meta.get("thread"), str):
                    self.thread_names[track] = meta["thread"]
            else:
                label = f"pid{pid}" if tid is None else str(tid) if tids[str(tid)] == 1 else f"{pid}.{tid}"
                label = label or "?"
                track = tr.thread_track(label)
                named = name if isinstance(name, str) else c.process_names.get(pid)
                if named:
                    self.thread_names[track] = kineto.thread_name(named, tid)
            out.append(c.strings.intern(track))
        return out

    def _place_tracks(self, threads: list[int]) -> list[int]:
        c, text = self.c, self.c.strings.values
        out = []
        for kind, value in c.place_keys:
            if kind == "cuda":
                out.append(c.strings.intern(tr.cuda_track(text[threads[value]])))
            else:
                out.append(c.strings.intern(value))
        return out

    def _flows_to_their_spans(self, span_tracks: np.ndarray, instant_tracks: np.ndarray) -> None:
        """An ac2g flow starts on its runtime call's track and ends on its GPU work's track."""
        c = self.c
        flows = [(i, a) for i, a in enumerate(c.i_attrs) if a and a.get("cat") == kineto.FLOW_TO_KERNEL]
        if not flows:
            return
        wanted = {a["flow_id"] for _, a in flows}  # never a list or object: _flow refuses those
        api = c.places_of_kind("cuda")
        caller: dict[Any, int] = {}
        device: dict[Any, int] = {}
        for i in np.flatnonzero(np.frombuffer(c.cat, np.int8)).tolist():
            attrs = c.attrs[i]
            corr = attrs.get("correlation") if attrs else None
            if isinstance(corr, int | str) and corr in wanted:
                (caller if c.place[i] in api else device).setdefault(corr, int(span_tracks[i]))
        for i, attrs in flows:
            ident = attrs["flow_id"]
            # A flow from a call that launched nothing ends on the call itself.
            target = caller.get(ident) if attrs["flow"] == "s" else device.get(ident, caller.get(ident))
            if target is not None:
                instant_tracks[i] = target

    def _shift(self) -> int:
        """Ours: back to the recorder's clock. Others: time 0 at the earliest timestamp."""
        c = self.c
        if c.base is None:
            return 0
        if self.ours:
            if abs(c.base + self.origin) >= MAX_NS:
                raise ImportFailed(f"{self.source}: the times and origin_ns lie beyond what nanoseconds "
                                   "since the origin can hold")
            return c.base + self.origin
        firsts = [int(np.frombuffer(a, np.int64).min()) for a in (c.start, c.i_ts, c.c_ts) if len(a)]
        return -min(firsts)

    def _origin(self, shift: int) -> dict[str, int]:
        base = (self.c.base or 0) - shift
        out = {"origin_file_ns": base}
        file_base = self.members.get("baseTimeNanoseconds")
        if type(file_base) is int and UNIX_NS[0] <= file_base < UNIX_NS[1]:
            out["origin_unix_ns"] = file_base + base
        elif UNIX_NS[0] <= base < UNIX_NS[1]:
            out["origin_unix_ns"] = base
        return out

    def _track_order(self, threads: list[int]) -> list[str]:
        """Thread tracks as the file's sort indexes order them (then as they first appear)."""
        c, text = self.c, self.c.strings.values

        def key(i: int) -> tuple[Any, ...]:
            pid, tid = c.thread_keys[i]
            return (_number(c.sort_index.get(pid)), _number(c.sort_index.get((pid, tid))), i)

        return [text[threads[i]] for i in sorted(range(len(threads)), key=key)]


def _tracks(thread: Any, place: Any, threads: list[int], places: list[int]) -> np.ndarray:
    if not len(thread):
        return np.zeros(0, np.int32)
    own = np.asarray(threads, np.int32)[np.frombuffer(thread, np.int32)]
    where = np.frombuffer(place, np.int32)
    if places and len(where):
        placed = where >= 0
        own[placed] = np.asarray(places, np.int32)[where[placed]]
    return own


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _ints(column: Any) -> np.ndarray:
    return np.frombuffer(column, np.int32)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int) else float("inf")


def _reorder(spans: SpanTable, idx: np.ndarray) -> SpanTable:
    return SpanTable(spans.track[idx], spans.name[idx], spans.start_ns[idx], spans.end_ns[idx],
                     spans.partition[idx], spans.worker[idx], [spans.attrs[i] for i in idx.tolist()])


def underive(trace: Trace, other: dict[str, Any]) -> Trace:
    """Our own export, less what it added for other tools (export/chrome.py marks it `derived`):
    a span's added args and other tools' name for it, and the hand-off flows, which a reader
    that keeps flows holds as instants. With the thread names `otherData` lists (threads
    without events of their own among them), what is left is the trace that was exported."""
    spans, instants = trace.spans, trace.instants
    names, attrs = spans.name.copy(), list(spans.attrs)
    for i, a in enumerate(attrs):
        if a and isinstance(a.get("derived"), dict):
            derived, kept = a["derived"], {k: v for k, v in a.items() if k != "derived"}
            for key in derived.get("args", ()):
                kept.pop(key, None)
            attrs[i] = kept or None
            if isinstance(derived.get("name"), str):
                names[i] = trace.strings.intern(derived["name"])
    keep = np.array([not (a and "derived" in a) for a in instants.attrs], dtype=bool)
    remaining = InstantTable(instants.track[keep], instants.name[keep], instants.ts_ns[keep],
                             instants.partition[keep], instants.worker[keep],
                             [a for a, k in zip(instants.attrs, keep.tolist(), strict=True) if k])
    spans = SpanTable(spans.track, names, spans.start_ns, spans.end_ns, spans.partition, spans.worker, attrs)
    names_of = other.get("thread_names")
    threads = dict(names_of) if isinstance(names_of, dict) else trace.thread_names
    return Trace(trace.strings, spans, remaining, trace.counters, trace.config, trace.meta, threads)
