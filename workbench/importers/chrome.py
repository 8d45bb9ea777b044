"""Chrome trace event JSON in: our own exports exactly, and other tools' traces as well as
their events allow.

Our exports (`otherData.format == "workbench"`) carry the time origin in nanoseconds, the
configuration and run facts, and each thread's track name, so they load back to the same
spans, instants, counters, attributes, configuration and thread names. Other traces: one
track per thread (named by its metadata, else `pid<P>/tid<T>`), complete (`X`) and
begin/end (`B`/`E`) events as spans, async (`b`/`e`) pairs as spans, instants, counters.
Times are microseconds; unknown phases and broken events are skipped and counted.

Contract: `load_chrome(path) -> Trace`, `parse_chrome(text, source) -> Trace`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from workbench.importers.report import ImportFailed, ImportReport
from workbench.trace.container import InstantTable, SpanTable, Trace

OURS = "workbench"
MAX_US = 1e15  # some 30 years: beyond it a timestamp is garbage (and overflows nanoseconds)
SPAN_PHASES = {"X", "B", "E", "b", "e"}
INSTANT_PHASES = {"i", "I", "n", "R"}
IGNORED_PHASES = {"M"}
FLOW_PHASES = {"s", "t", "f"}  # in our own export only hand-offs it draws (see `underive`)


def load_chrome(path: str | os.PathLike[str]) -> Trace:
    path = Path(path)
    return parse_chrome(path.read_text(encoding="utf-8", errors="replace"), str(path))


def parse_chrome(text: str, source: str = "<text>") -> Trace:
    data = _decode(text, source)
    other: Any = {}
    if isinstance(data, dict):
        events = data.get("traceEvents")
        other = data.get("otherData") if isinstance(data.get("otherData"), dict) else {}
        if not isinstance(events, list):
            raise ImportFailed(f"{source}: a JSON object without a traceEvents list is not a Chrome trace")
    elif isinstance(data, list):
        events = data
    else:
        raise ImportFailed(f"{source}: Chrome trace JSON is an object or an array, not {type(data).__name__}")
    return _Builder(source, other).build(events)


def _decode(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        # The array form may legally lack its closing bracket (a trace cut off while written).
        stripped = text.rstrip().rstrip(",")
        if stripped.startswith("["):
            try:
                return json.loads(stripped + "]")
            except json.JSONDecodeError:
                pass
        where = f"line {err.lineno}, column {err.colno}"
        raise ImportFailed(f"{source}: not valid JSON ({err.msg} at {where})") from None


class _Builder:
    def __init__(self, source: str, other: dict[str, Any]) -> None:
        self.ours = other.get("format") == OURS
        self.other = other
        origin = other.get("origin_ns", 0)
        self.origin = origin if self.ours and _is_int(origin) and abs(origin) < 2**61 else 0
        self.config = dict(other.get("config") or {}) if self.ours else {}
        self.meta = dict(other.get("meta") or {}) if self.ours else {}
        self.report = ImportReport("Chrome trace JSON", source)
        self.tracks: dict[tuple[Any, Any], str] = {}  # (pid, tid) made hashable -> track
        self.process_names: dict[Any, str] = {}
        self.thread_names: dict[str, str] = {}
        self.spans: list[tuple[int, tuple[Any, ...]]] = []  # (order of the opening event, row)
        self.instants: list[tuple[Any, ...]] = []
        self.counters: list[tuple[Any, ...]] = []
        self.open_sync: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
        self.open_async: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}

    def build(self, events: list[Any]) -> Trace:
        for event in events:
            if isinstance(event, dict) and event.get("ph") == "M":
                self._metadata(event)
        for n, event in enumerate(events):
            self.report.read += 1
            where = f"event {n}"
            if not isinstance(event, dict):
                self.report.skip("not a JSON object", where)
                continue
            phase = event.get("ph")
            if not isinstance(phase, str):  # a list or object here would not even hash
                reason = "no phase ('ph')" if phase is None else "phase ('ph') is not a string"
                self.report.skip(reason, where)
                continue
            try:
                if phase in IGNORED_PHASES or (self.ours and phase in FLOW_PHASES):
                    continue
                if phase in SPAN_PHASES:
                    self._span_event(n, event, where)
                elif phase in INSTANT_PHASES:
                    self._instant(event, where)
                elif phase == "C":
                    self._counter(event, where)
                else:
                    self.report.skip(f"unsupported event phase {phase!r}", where)
            except _Skip as skip:
                self.report.skip(str(skip), where)
        for stack in (*self.open_sync.values(), *self.open_async.values()):
            for _, event in stack:
                self.report.skip("begin without end (trace cut off?)", f"event named {event.get('name')!r}")
        if not self.spans and not self.instants and not self.counters:
            reasons = ", ".join(f"{n} {r}" for r, n in self.report.skipped.items()) or "no events"
            raise ImportFailed(f"{self.report.source}: no usable trace events ({reasons})")
        self.spans.sort(key=lambda item: item[0])
        rows = [row for _, row in self.spans]
        self.report.kept = len(rows) + len(self.instants) + len(self.counters)
        meta = dict(self.meta)
        if not self.ours or self.report.skipped:
            meta["import"] = self.report.as_meta()
        trace = Trace.from_rows(rows, self.instants, self.counters, self.config, meta, self.thread_names)
        return underive(trace, self.other) if self.ours else trace

    def _metadata(self, event: dict[str, Any]) -> None:
        args: Any = event.get("args") if isinstance(event.get("args"), dict) else {}
        name = event.get("name")
        if name == "process_name" and isinstance(args.get("name"), str):
            self.process_names[_hashable(event.get("pid"))] = args["name"]
        elif name == "thread_name":
            key = _thread_key(event)
            track = args.get("track") if self.ours else None
            if not isinstance(track, str):
                track = str(args.get("name", f"tid{event.get('tid')}"))
            self.tracks[key] = track
            if self.ours and isinstance(args.get("thread"), str):
                self.thread_names[track] = args["thread"]

    def _track(self, event: dict[str, Any]) -> str:
        key = _thread_key(event)
        if key in self.tracks:
            return self.tracks[key]
        if event.get("tid") is None and event.get("ph") in ("b", "e", "n"):
            return f"async/{event.get('cat', 'default')}"
        return f"pid{event.get('pid')}/tid{event.get('tid')}"

    def _ns(self, value: Any, what: str = "timestamp") -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise _Skip(f"{what} missing or not a number")
        if abs(value) > MAX_US:
            raise _Skip(f"{what} out of range")
        ns = self.origin + round(value * 1e3)
        if abs(ns) >= 2**62:
            raise _Skip(f"{what} out of range")
        return ns

    def _ids(self, args: Any) -> tuple[int, int, dict[str, Any] | None]:
        attrs = dict(args) if isinstance(args, dict) else {}
        partition = attrs.pop("partition", -1)
        worker = attrs.pop("worker", -1)
        if not _is_int(partition):
            attrs["partition"], partition = partition, -1
        if not _is_int(worker):
            attrs["worker"], worker = worker, -1
        if not (-(2**31) <= partition < 2**31 and -(2**31) <= worker < 2**31):
            raise _Skip("partition or worker out of range")
        return int(partition), int(worker), (attrs or None)

    def _span_event(self, n: int, event: dict[str, Any], where: str) -> None:
        phase = event["ph"]
        if phase == "X":
            start = self._ns(event.get("ts"))
            end = start + self._ns(event.get("dur", 0), "duration") - self.origin
            self._add_span(n, event, start, end)
        elif phase in ("B", "b"):
            self._ns(event.get("ts"))
            key = self._open_key(event)
            table = self.open_sync if phase == "B" else self.open_async
            table.setdefault(key, []).append((n, event))
        else:
            key = self._open_key(event)
            table = self.open_sync if phase == "E" else self.open_async
            stack = table.get(key)
            if not stack:
                raise _Skip("end without begin")
            order, begin = stack.pop()
            args = dict(begin.get("args") or {}) if isinstance(begin.get("args"), dict) else {}
            if isinstance(event.get("args"), dict):
                args.update(event["args"])
            start, end = self._ns(begin.get("ts")), self._ns(event.get("ts"))
            self._add_span(order, {**begin, "args": args}, start, end)

    def _open_key(self, event: dict[str, Any]) -> tuple[Any, ...]:
        if event["ph"] in ("B", "E"):
            return _thread_key(event)
        return (_hashable(event.get("cat")), _hashable(event.get("id", event.get("id2"))), self._track(event))

    def _add_span(self, order: int, event: dict[str, Any], start: int, end: int) -> None:
        if end < start:
            raise _Skip("span ends before it starts")
        partition, worker, attrs = self._ids(event.get("args"))
        name = event.get("name")
        label = str(name if name is not None else "?")
        row = (self._track(event), label, start, end, partition, worker, attrs)
        self.spans.append((order, row))

    def _instant(self, event: dict[str, Any], where: str) -> None:
        ts = self._ns(event.get("ts"))
        partition, worker, attrs = self._ids(event.get("args"))
        name = event.get("name")
        self.instants.append((self._track(event), str(name if name is not None else "?"), ts, partition,
                              worker, attrs))

    def _counter(self, event: dict[str, Any], where: str) -> None:
        ts = self._ns(event.get("ts"))
        args = event.get("args")
        if not isinstance(args, dict) or not args:
            raise _Skip("counter without values")
        track = str(event.get("name", "counter"))
        for key, value in args.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or abs(value) > 1e300:
                self.report.skip("counter value not a number", where)
                continue
            self.counters.append((track, str(key), ts, float(value)))


class _Skip(Exception):
    pass


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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _thread_key(event: dict[str, Any]) -> tuple[Any, Any]:
    return _hashable(event.get("pid")), _hashable(event.get("tid"))


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value
