"""Chrome trace JSON written by other programs (Chrome tracing, viztracer, speedscope's edge
cases): each loads or is refused naming the event; pairs, flows, counters and times are as the
file implies, worked out here with json over the file."""

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from workbench.importers import ImportFailed, load_any

DATA = Path(__file__).parent / "data" / "chrome"
FILES = sorted(DATA.glob("*.json"))


def _events(name):
    data = json.loads((DATA / name).read_text())
    return data["traceEvents"] if isinstance(data, dict) else data


def test_every_real_chrome_file_is_here():
    assert len(FILES) == 15


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_file_loads_or_names_the_event(path):
    try:
        trace = load_any(path)
    except ImportFailed as err:
        assert str(path) in str(err) and "event " in str(err)
        return
    report = trace.meta["import"]
    assert report["kept"] == len(trace.spans) + len(trace.instants) + len(trace.counters) > 0
    assert all(where.startswith("event ") for where in report["first_at"].values())


def test_only_begin_events_are_refused_naming_the_first():
    with pytest.raises(ImportFailed, match=r"only-begin-events\.json: no usable trace events \(3 begin "
                                           r"without end .*first at event 0\)"):
        load_any(DATA / "trace-event_only-begin-events.json")


def test_nested_async_pairs_by_category_id_and_name():
    events = [e for e in _events("nestable_async.json") if e["ph"] in "be"]
    open_, want = {}, Counter()
    for e in events:
        key = (e["cat"], e["id"], e["name"])
        if e["ph"] == "b":
            open_.setdefault(key, []).append(e["ts"])
        elif open_.get(key):
            want[(e["name"], (e["ts"] - open_[key].pop()) * 1000)] += 1
    trace = load_any(DATA / "nestable_async.json")
    assert Counter((s.name, s.duration_ns) for s in trace.iter_spans()) == want
    assert ("REQUEST_BAR", 90_000) in want and ("URL_REQUEST_DELEGATE", 10_000) in want
    skipped = trace.meta["import"]["skipped"]
    assert skipped == {"end without begin": 1, "begin without end (trace cut off?)": 1}
    # The async instants ("n") sit on their span's track.
    assert Counter(i.name for i in trace.iter_instants()) == Counter(
        e["name"] for e in _events("nestable_async.json") if e["ph"] == "n")
    tracks = {s.track for s in trace.iter_spans()}
    assert {i.track for i in trace.iter_instants()} == tracks == {"thread/26065"}


def test_legacy_async_spans_and_their_steps():
    events = _events("async_begin_end.json")
    trace = load_any(DATA / "async_begin_end.json")
    starts = Counter((e["cat"], e["id"], e["name"]) for e in events if e["ph"] == "S")
    ends = Counter((e["cat"], e["id"], e["name"]) for e in events if e["ph"] == "F")
    paired = sum((starts & ends).values())
    sync = sum(1 for e in events if e["ph"] == "E")
    assert len(trace.spans) == paired + sync
    steps = [i for i in trace.iter_instants() if i.attrs.get("async_phase") == "T"]
    want_steps = Counter(e["args"]["step"] for e in events if e["ph"] == "T")
    assert Counter(i.attrs["step"] for i in steps) == want_steps
    b_spans = {(s.start_ns, s.end_ns) for s in trace.iter_spans() if s.name == "B"}
    first = min(e["ts"] for e in events)
    assert ((100 - first) * 1000, (300 - first) * 1000) in b_spans  # B id 1: S at 100, F at 300


@pytest.mark.parametrize("name", ["flow.json", "flow_simple.json"])
def test_flows_are_kept_with_their_ids(name):
    events = [e for e in _events(name) if e["ph"] in ("s", "t", "f")]
    trace = load_any(DATA / name)
    flows = [i for i in trace.iter_instants() if "flow" in i.attrs]
    assert Counter((i.attrs["flow"], i.attrs["flow_id"], i.attrs["cat"]) for i in flows) == Counter(
        (e["ph"], e["id"], e["cat"]) for e in events)
    assert Counter(i.attrs.get("bp") for i in flows) == Counter(e.get("bp") for e in events)


def test_counters_with_ids_are_series_of_their_own():
    events = [e for e in _events("instance_counters.json") if e["ph"] == "C"]
    trace = load_any(DATA / "instance_counters.json")
    first = min(e["ts"] for e in _events("instance_counters.json"))
    want = Counter((f"{e['name']}[{e['id']}]", key, (e["ts"] - first) * 1000, float(v))
                   for e in events for key, v in e["args"].items())
    assert Counter((c.track, c.name, c.ts_ns, c.value) for c in trace.iter_counters()) == want


def test_fractional_microseconds_are_exact_nanoseconds():
    text = (DATA / "nanoseconds.json").read_text()
    events = json.loads(text, parse_float=Decimal)["traceEvents"]
    begins, want = {}, {}
    for e in events:
        if e["ph"] == "B":
            begins[e["name"]] = e["ts"]
        else:
            want[e["name"]] = int((e["ts"] - begins[e["name"]]) * 1000)
    trace = load_any(DATA / "nanoseconds.json")
    assert {s.name: s.duration_ns for s in trace.iter_spans()} == want
    assert want["ns2"] == 2


def test_instants_with_nested_arguments():
    events = _events("instant_events.json")
    trace = load_any(DATA / "instant_events.json")
    assert [i.attrs.get("state") for i in trace.iter_instants()] == [e["args"].get("state") for e in events]


def test_malformed_files_say_what_they_lack():
    cut = load_any(DATA / "trace-event_simple-partial-trailing-comma.json")
    assert {s.name for s in cut.iter_spans()} == {"alpha", "beta", "gamma", "epsilon"}
    assert any("closing ]" in m for m in cut.meta["import"]["missing"])
    ends = _events("trace-event_too-many-end-events.json")
    extra = [n for n, e in enumerate(ends) if e["ph"] == "E"][2:]
    too_many = load_any(DATA / "trace-event_too-many-end-events.json")
    assert too_many.meta["import"]["skipped"] == {"end without begin": len(extra)}
    assert too_many.meta["import"]["first_at"]["end without begin"] == f"event {extra[0]}"


def test_threads_are_named_from_metadata():
    events = _events("trace-event_multiprocess.json")
    trace = load_any(DATA / "trace-event_multiprocess.json")
    named = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    spans = {s.name: s.track for s in trace.iter_spans()}
    for e in events:
        if e["ph"] == "X" and (e["pid"], e["tid"]) in named:
            assert trace.thread_names[spans[e["name"]]] == named[(e["pid"], e["tid"])]
    assert len(set(spans.values())) == len({(e["pid"], e["tid"]) for e in events if e["ph"] == "X"})
