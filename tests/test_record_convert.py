"""The recorder's side of `workbench record` without a program: events written into a real
ring as the shims write them (ring.h's layout), drained and converted to spans. Covers what
the C++ program of test_record.py cannot show on a machine without a GPU: device records and
their clock, a recursive mutex, a range ended by another thread, a slot a dying program
reserved but never published."""

from __future__ import annotations

import socket
import urllib.request

import numpy as np
import pytest

from workbench.attach import ring as rg
from workbench.attach.convert import Converter
from workbench.clock import FakeClock
from workbench.model import roles as rl
from workbench.trace.container import Trace
from workbench.trace.recorder import Recorder

CUPTI_EPOCH = 1_790_000_000_000_000_000  # a device clock reading far from the host's


def publish(ring: rg.Ring, rows: list[tuple[int, ...]], texts: list[tuple[int, int, str]] = (),
            skip: int = -1) -> None:
    """Writes events (kind, flags, tid, pid, obj, aux, t0, t1) and texts (kind, id, text) as a
    program does; the event at index `skip` is reserved but never published."""
    words = ring._words
    head = int(words[rg.HEAD // 8])
    for k, row in enumerate(rows):
        slot = ring._events[(head + k) % ring.capacity]
        for field, value in zip(("kind", "flags", "tid", "pid", "obj", "aux", "t0", "t1"), row, strict=True):
            slot[field] = value
        if k != skip:
            slot["seq"] = (head + k + 1) & 0xFFFFFFFF
    words[rg.HEAD // 8] = head + len(rows)
    text_head = int(words[rg.TEXT_HEAD // 8])
    for k, (kind, ident, text) in enumerate(texts):
        slot = ring._texts[(text_head + k) % ring.text_capacity]
        slot["kind"], slot["id"], slot["len"], slot["text"] = kind, ident, len(text), text.encode()
        slot["seq"] = text_head + k + 1
    words[rg.TEXT_HEAD // 8] = text_head + len(texts)


def convert(rows, texts=(), skip=-1, final=False, capacity=1 << 6) -> tuple[Trace, Converter, rg.Ring]:
    ring = rg.Ring.create(capacity, 1 << 4)
    recorder = Recorder(FakeClock(), nvtx=False)
    converter = Converter(recorder, main_pid=7)
    publish(ring, rows, texts, skip)
    converter.feed(ring.drain(final))
    converter.finish(0)
    trace = Trace.from_recorder(recorder, meta={"roles": converter.lock_rules()})
    ring.close()
    return trace, converter, ring


def spans(trace: Trace, track: str) -> list[tuple[str, int, int, dict]]:
    text = trace.strings.values
    return sorted((text[trace.spans.name[i]], int(trace.spans.start_ns[i]), int(trace.spans.end_ns[i]),
                   trace.spans.attrs[i] or {}) for i in np.flatnonzero(trace.span_mask(track=track)))


def test_device_records_on_the_host_clock() -> None:
    rows = [(rg.CLOCK, 0, 0, 7, 0, 0, CUPTI_EPOCH, 1000),  # host 1000 ns is device CUPTI_EPOCH
            (rg.KERNEL, 0, 42, 7, 1, (0 << 32) | 7, CUPTI_EPOCH + 100, CUPTI_EPOCH + 400),
            (rg.MEMCPY, 1 | (1 << 5) | (3 << 10), 43, 7, 4096, 7, CUPTI_EPOCH + 10, CUPTI_EPOCH + 90),
            (rg.MEMSET, 3, 44, 7, 256, (1 << 32) | 2, CUPTI_EPOCH + 5, CUPTI_EPOCH + 6),
            (rg.SYNC, 0, 45, 7, 3, 7, CUPTI_EPOCH + 400, CUPTI_EPOCH + 410),
            (rg.API, 0, 99, 7, 2, 42, CUPTI_EPOCH + 1, CUPTI_EPOCH + 50)]
    texts = [(rg.T_STRING, 1, "scale"), (rg.T_STRING, 2, "cudaLaunchKernel_v7000")]
    trace, _, _ = convert(rows, texts)
    assert spans(trace, "gpu0/stream/7") == [("scale", 1100, 1400, {"correlation": 42})]
    (copy,) = spans(trace, "gpu0/copy")
    assert copy[:3] == ("h2d", 1010, 1090)
    assert copy[3]["src_kind"] == "pageable" and copy[3]["dst_kind"] == "device"
    assert spans(trace, "gpu1/memset")[0][:3] == ("memset", 1005, 1006)
    assert spans(trace, "gpu0/sync")[0][:3] == ("stream_synchronize", 1400, 1410)
    assert spans(trace, "cuda/thread/99") == [("cudaLaunchKernel_v7000", 1001, 1050, {"correlation": 42})]
    assert rl.role_counts(trace) == {"kernel": 1, "copy": 1, "memset": 1, "sync": 1, "launch": 1}
    assert trace.time_range() == (1001, 1410)


def test_each_record_moved_by_the_clock_reading_before_it() -> None:
    """Two clock readings in one drain and the next: each record takes the last one sent
    before it; a record before any reading is counted, not placed."""
    rows = [(rg.KERNEL, 0, 1, 7, 1, 7, CUPTI_EPOCH + 1, CUPTI_EPOCH + 2),  # before any reading
            (rg.CLOCK, 0, 0, 7, 0, 0, CUPTI_EPOCH, 1000),
            (rg.KERNEL, 0, 2, 7, 1, 7, CUPTI_EPOCH + 100, CUPTI_EPOCH + 200),
            (rg.API, 0, 99, 7, 2, 2, CUPTI_EPOCH + 50, CUPTI_EPOCH + 60),
            (rg.CLOCK, 0, 0, 7, 0, 0, CUPTI_EPOCH + 10_000, 5000),  # the clocks drifted 6,000 ns apart
            (rg.KERNEL, 0, 3, 7, 1, 7, CUPTI_EPOCH + 10_100, CUPTI_EPOCH + 10_300)]
    ring = rg.Ring.create(1 << 6, 1 << 4)
    recorder = Recorder(FakeClock(), nvtx=False)
    converter = Converter(recorder, main_pid=7)
    publish(ring, rows[:4], [(rg.T_STRING, 1, "scale"), (rg.T_STRING, 2, "cudaLaunchKernel")])
    converter.feed(ring.drain())
    other_stream = (rg.KERNEL, 0, 4, 7, 1, (1 << 32) | 9, CUPTI_EPOCH + 10_400, CUPTI_EPOCH + 10_500)
    publish(ring, [*rows[4:], other_stream])
    converter.feed(ring.drain())
    trace = Trace.from_recorder(recorder)
    ring.close()
    assert spans(trace, "gpu0/stream/7") == [("scale", 1100, 1200, {"correlation": 2}),
                                             ("scale", 5100, 5300, {"correlation": 3})]
    assert spans(trace, "gpu1/stream/9") == [("scale", 5400, 5500, {"correlation": 4})]
    assert spans(trace, "cuda/thread/99") == [("cudaLaunchKernel", 1050, 1060, {"correlation": 2})]
    assert converter.counts["device records before a clock reading"] == 1
    assert converter.counts["kernels"] == 3 and converter.threads == {99}
    assert converter.last_ns == 5500


def test_cupti_overhead_summed_by_kind() -> None:
    flush, instrumentation = 1 << 16, 2 << 16  # CUpti_ActivityOverheadKind
    rows = [(rg.OVERHEAD, 0, 0, 7, flush, 0, CUPTI_EPOCH, CUPTI_EPOCH + 100),
            (rg.OVERHEAD, 0, 0, 7, instrumentation, 0, CUPTI_EPOCH + 5, CUPTI_EPOCH + 35),
            (rg.OVERHEAD, 0, 0, 7, flush, 0, CUPTI_EPOCH + 200, CUPTI_EPOCH + 250)]
    trace, converter, _ = convert(rows)
    assert converter.counts["CUPTI overhead: buffer flush"] == 2
    assert converter.counts["CUPTI overhead ns: buffer flush"] == 150
    assert converter.counts["CUPTI overhead ns: instrumentation"] == 30
    assert len(trace.spans) == 0 and "unknown events" not in converter.counts


def test_recursive_mutex_hand_off_and_a_name() -> None:
    lock = 0x1000
    rows = [(rg.LOCK, 0, 1, 7, lock, 0, 10, 12), (rg.LOCK, 0, 1, 7, lock, 0, 13, 13),  # taken twice
            (rg.UNLOCK, 0, 1, 7, lock, 0, 20, 20), (rg.UNLOCK, 0, 1, 7, lock, 0, 30, 30),
            (rg.LOCK, rg.F_TRY, 2, 7, lock, 0, 31, 31), (rg.UNLOCK, 0, 2, 7, lock, 0, 40, 40),
            (rg.LOCK, 0, 1, 7, lock, 0, 35, 41)]  # waited from 35, handed over by thread 2; never released
    trace, converter, _ = convert(rows, [(rg.T_OBJECT, lock, "gpu0 mutex")])
    holds = [s for s in spans(trace, "lock/0x1000") if s[0] == "hold"]
    assert [(s[1], s[2]) for s in holds] == [(12, 30), (31, 40), (41, 41)]
    assert [s[3].get("from") for s in holds] == [None, 1, 2]
    assert holds[1][3]["try"] and holds[2][3]["unfinished"]
    waits = [s for s in spans(trace, "lock/0x1000") if s[0] == "wait"]
    assert [(s[1], s[2]) for s in waits] == [(10, 12), (35, 41)]  # had at once or by trylock: no wait
    assert rl.lock_identity("lock/0x1000", "hold", rl.trace_rules(trace)) == "gpu0 mutex"
    assert converter.counts["lock holds"] == 3


def test_ranges_of_domains_and_threads() -> None:
    rows = [(rg.PUSH, 0, 1, 7, 5, 1, 10, 0), (rg.PUSH, 0, 1, 7, 5, 2, 11, 0), (rg.POP, 0, 1, 7, 5, 0, 12, 0),
            (rg.START, 0, 1, 7, 0, 1, 13, 77), (rg.END, 0, 2, 7, 0, 77, 20, 0),
            (rg.POP, 0, 1, 7, 5, 0, 21, 0),
            (rg.POP, 0, 3, 7, 0, 0, 22, 0), (rg.MARK, 0, 3, 7, 0, 2, 23, 23)]
    texts = [(rg.T_STRING, 1, "outer"), (rg.T_STRING, 2, "inner"), (rg.T_DOMAIN, 5, "solver")]
    trace, converter, _ = convert(rows, texts)
    assert spans(trace, "thread/1") == [
        ("inner", 11, 12, {"domain": "solver", "depth": 1}),
        ("outer", 10, 21, {"domain": "solver", "depth": 0}),
        ("outer", 13, 20, {"domain": "default", "range": "start_end", "ended_by": 2})]
    assert converter.counts["NVTX pops without a push"] == 1
    assert [trace.strings.values[n] for n in trace.instants.name] == ["inner"]


def test_a_reserved_slot_never_published() -> None:
    rows = [(rg.LOCK, 0, 1, 7, 8, 0, 1, 2), (rg.UNLOCK, 0, 1, 7, 8, 0, 3, 3), (rg.LOCK, 0, 1, 7, 9, 0, 4, 5)]
    _, converter, ring = convert(rows, skip=1)  # a live drain stops at the hole
    assert converter.counts["events"] == 1 and ring.lost == 0
    _, converter, ring = convert(rows, skip=1, final=True)  # the program has ended: skipped
    assert converter.counts["events"] == 2 and ring.lost == 1
    assert converter.counts["lock holds"] == 2  # both left open, closed at the end


def test_the_live_view_served_while_recording() -> None:
    pytest.importorskip("bokeh")
    from workbench.viz.view_process import ViewProcess

    recorder = Recorder(nvtx=False)
    recorder.add_span("lock/0x10", "hold", recorder.now_ns(), recorder.now_ns() + 1000, attrs={"thread": 1})
    # As `workbench record --live` serves it: from a process of its own.
    server = ViewProcess(recorder, title="live: test", port=_free_port(), page_title="workbench record: test")
    server.start()
    try:
        with urllib.request.urlopen(server.url, timeout=20) as page:
            body = page.read().decode()
        assert page.status == 200 and "workbench record: test" in body
        report = server.finish(30)
        assert report is not None and [v["bars"] for v in report["views"]] == [1]  # the page's view
    finally:
        server.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_hand_offs_between_threads_only() -> None:
    from workbench.analysis.handoffs import LOCK, handoffs

    lock = 0x2000
    rows = [(rg.LOCK, 0, 1, 7, lock, 0, 1, 1), (rg.UNLOCK, 0, 1, 7, lock, 0, 2, 2),
            (rg.LOCK, 0, 1, 7, lock, 0, 3, 3), (rg.UNLOCK, 0, 1, 7, lock, 0, 4, 4),  # thread 1 again
            (rg.LOCK, 0, 2, 7, lock, 0, 3, 5), (rg.UNLOCK, 0, 2, 7, lock, 0, 6, 6)]  # handed to thread 2
    trace, _, _ = convert(rows)
    found = [h for h in handoffs(trace) if h.kind == LOCK]
    attrs = trace.spans.attrs
    assert [(attrs[h.source]["thread"], attrs[h.target]["thread"]) for h in found] == [(1, 2)]


def test_a_mixed_drain_converted_in_ring_order() -> None:
    """Host events, device records, clock readings, CUPTI overheads and unknown kinds shuffled
    together in one drain (as a busy program's threads and CUPTI's thread fill the ring): each
    kind converted in ring order, worked out here event by event."""
    rng = np.random.default_rng(21)
    lock, rows = 0x3000, []
    clock = (rg.CLOCK, 0, 0, 7, 0, 0, CUPTI_EPOCH, 1000)
    host_t, device_t, owner = 2000, CUPTI_EPOCH, None
    rows.append(clock)
    for k in range(600):
        pick = rng.integers(0, 10)
        host_t += 10
        device_t += 10
        if pick < 3:
            if owner is None:
                owner = int(rng.integers(1, 4))
                rows.append((rg.LOCK, 0, owner, 7, lock, 0, host_t, host_t + 3))
            else:
                rows.append((rg.UNLOCK, 0, owner, 7, lock, 0, host_t, host_t))
                owner = None
        elif pick < 6:
            rows.append((rg.KERNEL, 0, k, 7, 1, (0 << 32) | int(rng.integers(1, 3)), device_t, device_t + 5))
        elif pick < 8:
            rows.append((rg.API, 0, 99, 7, 2, k, device_t, device_t + 2))
        elif pick == 8:
            rows.append((rg.CLOCK, 0, 0, 7, 0, 0, device_t, host_t + int(rng.integers(0, 500))))
        else:
            rows.append((rg.OVERHEAD, 0, 0, 7, 1 << 16, 0, device_t, device_t + 7) if k % 2 else
                        (30 + k % 3, 0, 0, 7, 0, 0, 0, 0))
    if owner is not None:
        rows.append((rg.UNLOCK, 0, owner, 7, lock, 0, host_t + 10, host_t + 10))
    expected_holds, expected_kernels, expected_calls = [], [], []
    offset, taken, released_by = 0, None, None
    for kind, _f, tid, _p, _o, aux, t0, t1 in rows:
        if kind == rg.CLOCK:
            offset = t1 - t0
        elif kind == rg.LOCK:
            taken = (t1, tid, released_by)
        elif kind == rg.UNLOCK:
            attrs = {"thread": taken[1], **({"from": taken[2]} if taken[2] not in (None, taken[1]) else {})}
            expected_holds.append(("hold", taken[0], t0, attrs))
            released_by = tid
        elif kind == rg.KERNEL:
            expected_kernels.append((f"gpu0/stream/{aux & 0xFFFFFFFF}", t0 + offset, t1 + offset, tid))
        elif kind == rg.API:
            expected_calls.append((t0 + offset, t1 + offset, aux))
    trace, converter, _ = convert(rows, [(rg.T_STRING, 1, "scale"), (rg.T_STRING, 2, "cudaLaunchKernel")],
                                  capacity=1 << 10)
    assert len(expected_holds) > 50 and len(expected_kernels) > 100 and len(expected_calls) > 50
    assert [s for s in spans(trace, "lock/0x3000") if s[0] == "hold"] == sorted(expected_holds)
    text = trace.strings.values
    kernels = [(text[trace.spans.track[i]], int(trace.spans.start_ns[i]), int(trace.spans.end_ns[i]),
                trace.spans.attrs[i]["correlation"]) for i in range(len(trace.spans))
               if text[trace.spans.track[i]].startswith("gpu0/stream/")]
    assert kernels == expected_kernels  # in ring order in the recorder, not only the same set
    calls = [(s[1], s[2], s[3]["correlation"]) for s in spans(trace, "cuda/thread/99")]
    assert calls == sorted(expected_calls)
    overheads = sum(1 for r in rows if r[0] == rg.OVERHEAD)
    assert converter.counts["CUPTI overhead: buffer flush"] == overheads
    assert converter.counts["unknown events"] == sum(1 for r in rows if r[0] >= 30)
    assert converter.counts["events"] == len(rows)
