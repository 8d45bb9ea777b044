"""Chrome trace JSON: our exports load back exactly; other tools' traces load as well as their
events allow; broken JSON is refused with its line and column."""

import json

import pytest
from golden import case

from workbench.config import RunConfig
from workbench.export.chrome import to_chrome, to_chrome_json
from workbench.importers import ImportFailed, parse_chrome
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.trace.container import Trace


def _same(a, b):
    assert list(a.iter_spans()) == list(b.iter_spans())
    assert list(a.iter_instants()) == list(b.iter_instants())
    assert list(a.iter_counters()) == list(b.iter_counters())
    assert (a.config, a.meta, a.thread_names) == (b.config, b.meta, b.thread_names)


def test_a_real_run_round_trips_exactly():
    config = RunConfig(backend="cpu", log2_constraints=5, partitions=4, memory_mode="zerocopy")
    trace = Pipeline(config, CpuBackend()).run().trace
    _same(parse_chrome(to_chrome_json(trace)), trace)


def test_device_records_and_counters_round_trip_exactly():
    trace = case("copy_bound")
    _same(parse_chrome(to_chrome_json(trace)), trace)


def test_export_is_what_perfetto_reads():
    data = to_chrome(case("prep_bound"))
    events = data["traceEvents"]
    for event in events:
        assert event["ph"] in {"M", "X", "b", "e", "i", "C", "s", "f"} and "pid" in event
        if event["ph"] != "M":
            assert isinstance(event["ts"], float | int)
    json.dumps(data)
    # Spans that overlap without nesting on one track cannot be duration events.
    crossing = Trace.from_rows([
        ("mutex/gpu0", "wait", 0, 10, 1, 0, None), ("mutex/gpu0", "wait", 5, 15, 2, 1, None),
        ("worker/0", "finish", 0, 3, 1, 0, None),
    ])
    events = to_chrome(crossing)["traceEvents"]
    begins = {(e["cat"], e["id"]) for e in events if e["ph"] == "b"}
    assert begins == {(e["cat"], e["id"]) for e in events if e["ph"] == "e"} and len(begins) == 2
    assert [e["name"] for e in events if e["ph"] == "X"] == ["finish"]
    _same(parse_chrome(json.dumps(to_chrome(crossing))), crossing)


FOREIGN = {
    "traceEvents": [
        {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "render"}},
        {"ph": "X", "pid": 1, "tid": 2, "name": "draw", "ts": 10.5, "dur": 2.25, "args": {"frame": 3}},
        {"ph": "B", "pid": 1, "tid": 3, "name": "outer", "ts": 20},
        {"ph": "B", "pid": 1, "tid": 3, "name": "inner", "ts": 21},
        {"ph": "E", "pid": 1, "tid": 3, "ts": 22},
        {"ph": "E", "pid": 1, "tid": 3, "ts": 25, "args": {"result": "ok"}},
        {"ph": "b", "pid": 1, "tid": 2, "cat": "net", "id": "0x1", "name": "fetch", "ts": 5},
        {"ph": "e", "pid": 1, "tid": 2, "cat": "net", "id": "0x1", "name": "fetch", "ts": 30},
        {"ph": "i", "pid": 1, "tid": 2, "name": "vsync", "ts": 16, "s": "t"},
        {"ph": "C", "pid": 1, "name": "memory", "ts": 12, "args": {"heap": 1024, "bad": "x"}},
        {"ph": "s", "pid": 1, "tid": 2, "name": "flow", "ts": 1, "id": 9},
        {"ph": "X", "pid": 1, "tid": 2, "name": "no time"},
        {"ph": "B", "pid": 1, "tid": 4, "name": "never ends", "ts": 40},
        "not an event",
    ],
}


def test_a_foreign_trace_loads_what_it_can_and_counts_the_rest():
    trace = parse_chrome(json.dumps(FOREIGN), "other.json")
    spans = {s.name: s for s in trace.iter_spans()}
    # Time 0 is the earliest event (the flow at 1 µs); threads are named by their metadata.
    assert spans["draw"].track == "thread/2" and trace.thread_names["thread/2"] == "render"
    assert spans["draw"].start_ns == 9_500 and trace.meta["origin_file_ns"] == 1_000
    assert spans["draw"].duration_ns == 2_250 and spans["draw"].attrs == {"frame": 3}
    assert spans["inner"].track == spans["outer"].track == "thread/3"
    assert (spans["inner"].start_ns, spans["inner"].end_ns) == (20_000, 21_000)
    assert spans["outer"].attrs == {"result": "ok"}
    assert spans["fetch"].duration_ns == 25_000
    instants = {i.name: i for i in trace.iter_instants()}
    assert set(instants) == {"vsync", "flow"}
    assert instants["flow"].attrs == {"flow_id": 9, "flow": "s"} and instants["flow"].track == "thread/2"
    assert [(c.track, c.name, c.value) for c in trace.iter_counters()] == [("memory", "heap", 1024.0)]
    report = trace.meta["import"]
    assert report["skipped"] == {
        "timestamp missing or not a number": 1, "not a JSON object": 1,
        "begin without end (trace cut off?)": 1, "counter value not a number": 1,
    }
    assert report["first_at"]["not a JSON object"] == "event 13"
    assert report["first_at"]["begin without end (trace cut off?)"] == "event 12"


def test_the_array_form_may_lack_its_closing_bracket():
    events = json.dumps(FOREIGN["traceEvents"][:2])
    trace = parse_chrome(events[:-1] + ",\n")
    assert [s.name for s in trace.iter_spans()] == ["draw"]


@pytest.mark.parametrize(("text", "message"), [
    ('{"traceEvents": [\n{"ph": "X",, }]}', r"not valid JSON \(.* at line 2, column \d+\) in event 0"),
    ('{"events": []}', "without a traceEvents list"),
    ("42", "an object or an array"),
    ('[{"ph": "Q"}]', "no usable trace events"),
])
def test_broken_json_is_refused_with_where(text, message):
    with pytest.raises(ImportFailed, match=message):
        parse_chrome(text, "bad.json")


def test_gzipped_chrome_json_is_recognised(tmp_path):
    import gzip

    from workbench.importers import load_any, sniff

    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(to_chrome_json(case("balanced")).encode()))
    assert sniff(path) == "chrome"
    _same(load_any(path), case("balanced"))


def test_a_phase_that_is_not_a_string_is_skipped_and_named():
    from workbench.importers.chrome import parse_chrome

    text = json.dumps([{"ph": []}, {"ph": {"x": 1}}, {"ph": "X", "name": "ntt_msm_h", "ts": 0, "dur": 5,
                                                      "pid": 1, "tid": 1}])
    trace = parse_chrome(text)
    assert len(trace.spans) == 1
    assert trace.meta["import"]["skipped"]["phase ('ph') is not a string"] == 2


def test_an_async_begin_without_end_is_named_by_its_event_index():
    from workbench.importers.chrome import parse_chrome

    events = [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1},
              {"ph": "b", "name": "open", "cat": "c", "id": 7, "ts": 5000, "pid": 1, "tid": 1}]
    report = parse_chrome(json.dumps(events), "t.json").meta["import"]
    assert report["first_at"]["begin without end (trace cut off?)"] == "event 1"
