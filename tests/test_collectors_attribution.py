"""Clock alignment and attribution of device records, on recorded fixtures (no GPU)."""

import json
from collections import Counter
from pathlib import Path

import pytest

from workbench.collectors import attribution as at

FIXTURES = Path(__file__).parent / "data" / "cupti"


def load(name):
    doc = json.loads((FIXTURES / name).read_text())
    clock = at.ClockMap(at.ClockSample(**s) for s in doc["clock_samples"])
    spans = [tuple(row) for row in doc["host_spans"]]
    apis = {a[0]: at.ApiRecord(*a) for a in doc["api"]}
    records = [at.DeviceRecord(*r) for r in doc["device"]]
    threads = {int(t): track for t, track in doc["threads"].items()}
    return doc, clock, spans, apis, records, threads


def test_every_record_lands_in_the_span_that_issued_it():
    doc, clock, spans, apis, records, threads = load("two_workers.json")
    placed = at.attribute(records, apis, clock, at.HostIndex(spans), threads,
                          candidates=set(threads.values()))
    assert (placed.by_api, placed.by_time, placed.unplaced) == (6, 2, 1)
    for row, want in zip(placed.rows, doc["expected"], strict=True):
        track, name, start, end, partition, worker, attrs = row
        assert (track, name, partition, worker) == (want["track"], want["name"], want["partition"],
                                                    want["worker"])
        assert abs(start - want["start_ns"]) <= 2 and abs(end - want["end_ns"]) <= 2
        assert attrs.get("phase") == want["phase"] and attrs.get("span") == want["span"]
        assert attrs.get("by") == want["by"]
        if "host_overhead_ms" in want:
            assert attrs["host_overhead_ms"] == pytest.approx(want["host_overhead_ms"], abs=1e-5)


def test_copies_keep_their_bytes_and_memory_kinds():
    _, clock, spans, apis, records, threads = load("two_workers.json")
    rows = at.attribute(records, apis, clock, at.HostIndex(spans), threads).rows
    copies = [r for r in rows if r[0] == "gpu0/copy"]
    assert [(r[6]["bytes"], r[6]["src_kind"], r[6]["dst_kind"]) for r in copies] == [
        (1048576, "pageable", "device"), (65536, "pinned", "device")]
    assert all(r[6]["stream"] in (13, 14) for r in copies)


def test_a_stream_seen_through_api_records_places_later_records_without_them():
    _, clock, spans, apis, records, threads = load("two_workers.json")
    streams: dict = {}
    at.attribute(records[:5], apis, clock, at.HostIndex(spans), threads, streams)
    assert streams[(0, 13)] == Counter({"worker/0": 3})
    assert streams[(0, 14)] == Counter({"worker/1": 2})


def test_mutex_tracks_never_compete_with_thread_tracks_for_time_containment():
    _, clock, spans, _, records, threads = load("two_workers.json")
    # Without API records, the batch_add kernel (stream unseen) is claimed by worker/1 alone:
    # the mutex track's hold span also contains it but belongs to no thread.
    row = at.attribute([records[7]], {}, clock, at.HostIndex(spans), threads,
                       candidates=set(threads.values())).rows[0]
    assert (row[4], row[6]["phase"]) == (1, "batch_add")
    everywhere = at.attribute([records[7]], {}, clock, at.HostIndex(spans), threads).rows[0]
    assert everywhere[4] == -1  # two tracks could have issued it: left unplaced, not guessed


def test_records_wait_until_their_phase_has_closed():
    _, clock, spans, apis, records, threads = load("two_workers.json")
    kernel = records[1]  # issued inside ntt, inside ntt_msm_h on worker/0
    only_inner = [s for s in spans if s[1] != "ntt_msm_h"]
    assert at.settled(kernel, apis, clock, at.HostIndex(spans), threads, horizon_ns=0)
    assert not at.settled(kernel, apis, clock, at.HostIndex(only_inner), threads, horizon_ns=0)
    assert at.settled(kernel, apis, clock, at.HostIndex(only_inner), threads, horizon_ns=10**12)


def test_innermost_and_outermost_spans_on_equal_starts():
    spans = [("w", "outer", 0, 100, 1, 0, None), ("w", "inner", 0, 50, 1, 0, None),
             ("w", "next", 60, 90, 1, 0, None)]
    index = at.HostIndex(spans)
    assert [r[1] for r in index.containing("w", 10)] == ["inner", "outer"]
    assert [r[1] for r in index.containing("w", 70)] == ["next", "outer"]
    assert index.containing("w", 200) == (None, None)
    assert index.containing("elsewhere", 10) == (None, None)


def test_a_launch_within_the_clocks_error_of_its_phase_is_placed_by_its_call():
    # A launch made as its phase begins, read through a clock sample whose bracket is 40 us
    # wide: the call maps 20 us before the phase's span opened, inside the sample's error.
    spans = [("worker/0", "batch_add", 1_000_000, 2_000_000, 3, 0, None),
             ("worker/0", "tail_msm", 2_100_000, 3_000_000, 3, 0, None)]
    clock = at.ClockMap([at.ClockSample(host_ns=0, device_ns=0, error_ns=40_000)])
    apis = {1: at.ApiRecord(1, 101, 980_000, 990_000, "cuLaunchKernel")}
    kernel = at.DeviceRecord("kernel", "k", 1_500_000, 1_600_000, 0, 13, 1, 0, None)
    index = at.HostIndex(spans)
    assert at.settled(kernel, apis, clock, index, {101: "worker/0"}, horizon_ns=0)
    row = at.attribute([kernel], apis, clock, index, {101: "worker/0"}).rows[0]
    assert (row[4], row[6]["phase"], row[6]["by"]) == (3, "batch_add", "api")
    # Beyond the error bound the call is not claimed by the phase it missed.
    tight = at.ClockMap([at.ClockSample(host_ns=0, device_ns=0, error_ns=10_000)])
    assert not at.settled(kernel, apis, tight, index, {101: "worker/0"}, horizon_ns=0)
    # Two spans within reach of the call: it is not guessed between them.
    between = {1: at.ApiRecord(1, 101, 2_050_000, 2_060_000, "cuLaunchKernel")}
    wide = at.ClockMap([at.ClockSample(host_ns=0, device_ns=0, error_ns=60_000)])
    assert index.around("worker/0", 2_050_000, 60_000) == (None, None)
    assert not at.settled(kernel, between, wide, index, {101: "worker/0"}, horizon_ns=0)


def test_the_tightest_bracket_gives_the_offset_within_its_bound():
    offset = 7_000_000_000
    host_reads = iter([0, 900, 1_000, 1_100, 2_000, 2_050, 3_000, 3_700])  # widths 900, 100, 50, 700
    device_at = iter([450 + offset, 1_040 + offset, 2_030 + offset, 3_100 + offset])
    sample = at.measure(lambda: next(device_at), lambda: next(host_reads), reads=4)
    assert sample == at.ClockSample(host_ns=2_025, device_ns=2_030 + offset, error_ns=25)
    clock = at.ClockMap([sample])
    assert abs(clock.to_host(2_030 + offset) - 2_030) <= sample.error_ns
    assert clock.offset_ns == offset + 5 and clock.drift_ppm == 0.0


def test_a_drifting_clock_is_followed_between_samples_and_beyond():
    _doc, clock, *_ = load("two_workers.json")
    assert clock.drift_ppm == pytest.approx(20, abs=0.01)
    assert clock.error_ns == 150
    for host in (0, 1_234_567, 9_999_999, 20_000_000):
        device = host + 5_000_000_000 + round(host * 20e-6)
        assert abs(clock.to_host(device) - host) <= 1
    described = clock.describe()
    assert described["samples"] == 3 and described["error_ns"] == 150


def test_a_clock_map_needs_a_sample():
    with pytest.raises(ValueError):
        at.ClockMap([])
