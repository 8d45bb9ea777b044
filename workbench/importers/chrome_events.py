"""Chrome trace events, one at a time, into compact columns: the decoding and pairing.

Each event becomes a row of typed arrays at once (times as exact integer nanoseconds from
the first timestamp, names interned), so nothing holds the events themselves. Where a row
goes is settled at the end (chrome.py), when every thread's metadata is known: Kineto
writes its names after the events, and our own exports say they are ours after them.

Pairing: `B`/`E` by thread (an `E` closes the innermost `B`); nested async `b`/`e` by
category, id (`id`, `id2` local to the process or global, `scope`) and name, an `e` closing
the innermost open `b` of its name (of any name when it has none); legacy async `S`/`F`
likewise, their steps (`T`, `p`) and async instants (`n`) kept as instants on the span's
track. Flow events (`s`, `t`, `f`) are instants with attrs `flow_id`, `flow` (the phase),
`cat`, and `bp` where given. Counters (`C`) become one series per argument on the track
`name` (`name[id]` with an id). Samples (`P`) are instants. Broken events are skipped and
counted in the import report, with the index of the first of each kind.
"""

from __future__ import annotations

import json
import sys
from array import array
from typing import Any

from workbench.importers import kineto
from workbench.importers.chrome_stream import Reader, exact_ns
from workbench.importers.report import ImportReport
from workbench.trace.container import StringTable

MAX_US = 1e17  # about 3,000 years: a larger timestamp is garbage, not a clock
SMALL_US = 2.0**33  # below this (2.4 hours) a float64 keeps a microsecond time to far below 1 ns
MAX_NS = 2**62  # times are int64 nanoseconds, relative to the first timestamp
SPAN_BEGIN, SPAN_END = {"B", "b", "S"}, {"E", "e", "F"}  # duration, nested async, legacy async
STEPS = {"T", "p", "n"}  # steps of a legacy async span; an instant of a nested async one
FLOWS = {"s", "t", "f"}
INSTANTS = {"i", "I", "R", "P"}
ASYNC_PHASES = {"b", "e", "n", "S", "T", "p", "F"}


class Skip(Exception):
    """This event cannot be used; the message is the reason counted in the report."""


class Columns:
    """Spans, instants and counters as typed arrays, plus what places them on tracks."""

    def __init__(self, report: ImportReport) -> None:
        self.report = report
        self.strings = StringTable()
        self.keys: dict[str, str] = {}  # attribute names, one string object each
        self.base: int | None = None  # the first timestamp, in nanoseconds as the file counts
        # Spans. `place` is -1 for "the thread's own track", else an index into `places`:
        # ("async", track), ("track", track) or ("cuda", thread index).
        self.order, self.start, self.end = array("q"), array("q"), array("q")
        self.thread, self.place, self.name = array("i"), array("i"), array("i")
        self.partition, self.worker = array("i"), array("i")
        self.cat = array("b")  # kineto.code of the category: placed at the end, unless the trace is ours
        self.attrs: list[dict[str, Any] | None] = []
        # Instants, the same way.
        self.i_ts, self.i_thread, self.i_place, self.i_name = array("q"), array("i"), array("i"), array("i")
        self.i_partition, self.i_worker = array("i"), array("i")
        self.i_attrs: list[dict[str, Any] | None] = []
        # Counters: track and series as string ids.
        self.c_ts, self.c_track, self.c_name, self.c_value = array("q"), array("i"), array("i"), array("d")
        # Threads as (pid, tid), their metadata, and the places that are not a thread's own track.
        self.threads: dict[tuple[Any, Any], int] = {}
        self.thread_keys: list[tuple[Any, Any]] = []
        self.places: dict[tuple[str, Any], int] = {}
        self.place_keys: list[tuple[str, Any]] = []
        self.process_names: dict[Any, str] = {}
        self.thread_meta: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.sort_index: dict[Any, Any] = {}
        self.open_sync: dict[int, list[tuple[int, int, dict[str, Any]]]] = {}
        self.open_async: dict[tuple[Any, ...], list[tuple[str, int, int, dict[str, Any]]]] = {}

    # -- one event ---------------------------------------------------------------------------
    def add(self, n: int, event: Any, reader: Reader) -> None:
        self.report.read += 1
        if not isinstance(event, dict):
            raise Skip("not a JSON object")
        phase = event.get("ph")
        if not isinstance(phase, str):
            raise Skip("no phase ('ph')" if phase is None else "phase ('ph') is not a string")
        if phase == "M":
            self._metadata(event)
        elif phase == "X":
            start = self.ns(event, "ts", reader)
            dur = self.duration(event, reader)
            self._span(n, event, start, start + dur, event.get("args"))
        elif phase in SPAN_BEGIN:
            self._begin(n, phase, event, self.ns(event, "ts", reader))
        elif phase in SPAN_END:
            self._end(phase, event, reader)
        elif phase in STEPS:
            self._step(event, reader)
        elif phase in FLOWS:
            self._flow(event, reader)
        elif phase in INSTANTS:
            self._instant(event, reader, self._thread(event), -1, event.get("args"))
        elif phase == "C":
            self._counter(event, reader)
        else:
            raise Skip(f"unsupported event phase {phase!r}")

    def ns(self, event: dict[str, Any], key: str, reader: Reader) -> int:
        """A time in nanoseconds from the first one, exact to the digits the file gives."""
        value = event.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Skip("timestamp missing or not a number")
        if not abs(value) <= MAX_US:  # also NaN
            raise Skip("timestamp out of range")
        if isinstance(value, int):
            ns = value * 1000
        elif -SMALL_US < value < SMALL_US:
            ns = round(value * 1000)  # exact for the three decimals a microsecond time has
        else:
            ns = exact_ns(reader.number_text(key, value), value)
        if self.base is None:
            self.base = ns
        ns -= self.base
        if abs(ns) >= MAX_NS:
            raise Skip("timestamp out of range")
        return ns

    def duration(self, event: dict[str, Any], reader: Reader) -> int:
        value = event.get("dur", 0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Skip("duration not a number")
        if not abs(value) <= MAX_US:
            raise Skip("duration out of range")
        if isinstance(value, int):
            return value * 1000
        if -SMALL_US < value < SMALL_US:
            return round(value * 1000)
        return exact_ns(reader.number_text("dur", value), value)

    def _thread(self, event: dict[str, Any]) -> int:
        key = (_hashable(event.get("pid")), _hashable(event.get("tid")))
        found = self.threads.get(key)
        if found is None:
            found = self.threads[key] = len(self.thread_keys)
            self.thread_keys.append(key)
        return found

    def place_of(self, kind: str, value: Any) -> int:
        key = (kind, value)
        found = self.places.get(key)
        if found is None:
            found = self.places[key] = len(self.place_keys)
            self.place_keys.append(key)
        return found

    def places_of_kind(self, kind: str) -> set[int]:
        return {i for i, (k, _) in enumerate(self.place_keys) if k == kind}

    def attributes(self, args: Any) -> tuple[int, int, dict[str, Any] | None]:
        """Partition and worker out of the arguments; the rest, with shared key strings."""
        if not isinstance(args, dict) or not args:
            return -1, -1, None
        keys = self.keys
        attrs = {keys.setdefault(k, k): v for k, v in args.items()}
        partition, worker = attrs.pop("partition", -1), attrs.pop("worker", -1)
        if not _is_int(partition):
            attrs["partition"], partition = partition, -1
        if not _is_int(worker):
            attrs["worker"], worker = worker, -1
        if not (-(2**31) <= partition < 2**31 and -(2**31) <= worker < 2**31):
            raise Skip("partition or worker out of range")
        return partition, worker, (attrs or None)

    def _span(self, order: int, event: dict[str, Any], start: int, end: int, args: Any) -> None:
        if end < start:
            raise Skip("span ends before it starts")
        if end - start >= MAX_NS or abs(end) >= MAX_NS:
            raise Skip("duration out of range")
        partition, worker, attrs = self.attributes(args)
        name = _label(event.get("name"))
        self.order.append(order)
        self.cat.append(kineto.code(event.get("cat")))
        self.start.append(start)
        self.end.append(end)
        self.thread.append(self._thread(event))
        self.place.append(self._async_place(event))
        self.name.append(self.strings.intern(name))
        self.partition.append(partition)
        self.worker.append(worker)
        self.attrs.append(attrs)

    def _async_place(self, event: dict[str, Any]) -> int:
        """Async events without a thread go on a track of their category."""
        if event.get("tid") is None and event.get("ph") in ASYNC_PHASES:
            return self.place_of("async", f"async/{_label(event.get('cat', 'default'))}")
        return -1

    def _begin(self, n: int, phase: str, event: dict[str, Any], start: int) -> None:
        if phase == "B":
            self.open_sync.setdefault(self._thread(event), []).append((n, start, event))
            return
        key = (phase == "S", *self._async_id(event))
        self.open_async.setdefault(key, []).append((_label(event.get("name")), n, start, event))

    def _end(self, phase: str, event: dict[str, Any], reader: Reader) -> None:
        if phase == "E":
            stack = self.open_sync.get(self._thread(event))
            if not stack:
                raise Skip("end without begin")
            order, start, begin = stack.pop()
        else:
            order, start, begin = self._close(phase == "F", event)
        args: dict[str, Any] = begin["args"] if isinstance(begin.get("args"), dict) else {}
        if isinstance(event.get("args"), dict) and event["args"]:
            args = {**args, **event["args"]}
        self._span(order, begin, start, self.ns(event, "ts", reader), args)

    def _close(self, legacy: bool, event: dict[str, Any]) -> tuple[int, int, dict[str, Any]]:
        stack = self.open_async.get((legacy, *self._async_id(event)))
        if not stack:
            raise Skip("end without begin")
        name = event.get("name")
        for i in range(len(stack) - 1, -1, -1):
            if name is None or stack[i][0] == _label(name):
                _, order, start, begin = stack.pop(i)
                return order, start, begin
        raise Skip("end without begin")

    def _async_id(self, event: dict[str, Any]) -> tuple[Any, ...]:
        id2 = event.get("id2")
        if isinstance(id2, dict) and "local" in id2:
            ident: Any = ("local", _hashable(event.get("pid")), _hashable(id2["local"]))
        elif isinstance(id2, dict) and "global" in id2:
            ident = ("global", _hashable(id2["global"]))
        else:
            ident = ("global", _hashable(event.get("id")))
        return _hashable(event.get("cat")), _hashable(event.get("scope")), ident

    def _step(self, event: dict[str, Any], reader: Reader) -> None:
        """A step or async instant goes on the track of the span it belongs to, if open."""
        stack = self.open_async.get((event["ph"] != "n", *self._async_id(event)))
        owner = stack[-1][3] if stack else event
        args = dict(event["args"]) if isinstance(event.get("args"), dict) else {}
        args.update(async_id=event.get("id", event.get("id2")), async_phase=event["ph"])
        self._instant(event, reader, self._thread(owner), self._async_place(owner), args)

    def _flow(self, event: dict[str, Any], reader: Reader) -> None:
        ident = event.get("id", event.get("id2"))
        if isinstance(ident, dict) and len(ident) == 1:
            ident = next(iter(ident.values()))
        if ident is None or isinstance(ident, dict | list):
            raise Skip("flow event without an id")
        args = dict(event["args"]) if isinstance(event.get("args"), dict) else {}
        cat = event.get("cat")
        args.update(flow_id=ident, flow=sys.intern(event["ph"]))
        if cat is not None:
            args["cat"] = sys.intern(cat) if isinstance(cat, str) else cat
        if isinstance(event.get("bp"), str):
            args["bp"] = sys.intern(event["bp"])
        self._instant(event, reader, self._thread(event), -1, args)

    def _instant(self, event: dict[str, Any], reader: Reader, thread: int, place: int, args: Any) -> None:
        ts = self.ns(event, "ts", reader)
        partition, worker, attrs = self.attributes(args)
        if event["ph"] == "P":
            extra: dict[str, Any] = {k: event[k] for k in ("sf", "stack") if k in event}
            attrs = {**(attrs or {}), **extra} or None
        self.i_ts.append(ts)
        self.i_thread.append(thread)
        self.i_place.append(place)
        self.i_name.append(self.strings.intern(_label(event.get("name"))))
        self.i_partition.append(partition)
        self.i_worker.append(worker)
        self.i_attrs.append(attrs)

    def _counter(self, event: dict[str, Any], reader: Reader) -> None:
        ts = self.ns(event, "ts", reader)
        args = event.get("args")
        if not isinstance(args, dict) or not args:
            raise Skip("counter without values")
        track = _label(event.get("name", "counter"))
        if event.get("id") is not None:
            track = f"{track}[{_label(event['id'])}]"
        track_id = self.strings.intern(track)
        for key, value in args.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) <= 1e300:
                self.report.skip("counter value not a number", f"event {reader.event}")
                continue
            self.c_ts.append(ts)
            self.c_track.append(track_id)
            self.c_name.append(self.strings.intern(str(key)))
            self.c_value.append(float(value))

    def _metadata(self, event: dict[str, Any]) -> None:
        args: Any = event.get("args") if isinstance(event.get("args"), dict) else {}
        name, pid = event.get("name"), _hashable(event.get("pid"))
        if name == "process_name" and isinstance(args.get("name"), str):
            self.process_names[pid] = args["name"]
        elif name == "thread_name":
            self.thread_meta[(pid, _hashable(event.get("tid")))] = args
        elif name in ("process_sort_index", "thread_sort_index") and _is_int(args.get("sort_index")):
            key = pid if name == "process_sort_index" else (pid, _hashable(event.get("tid")))
            self.sort_index[key] = args["sort_index"]

    def unmatched(self) -> None:
        for sync in self.open_sync.values():
            for n, _, _ in sync:
                self.report.skip("begin without end (trace cut off?)", f"event {n}")
        for stack in self.open_async.values():
            for _, n, _, _ in stack:  # (name, event index, start, event)
                self.report.skip("begin without end (trace cut off?)", f"event {n}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _label(value: Any) -> str:
    return value if isinstance(value, str) else "?" if value is None else str(value)


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value
