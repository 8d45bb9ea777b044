"""Laying grouped cuzk calls out in time, as spans on the workbench's own tracks.

See importers/cuzk_log.py for how calls are grouped and anchored. Inside a call: the
pre-lock CPU work, the mutex wait ending where the hold starts, ntt_msm_h (with the
CUZK_NTT_H parts inside it, and the rest of it, which those parts do not name, as the
host-to-device copy), barrier_wait, batch_add, tail_msm, the release, b_g2_msm; prep_msm on
the worker's prep track, ending at the barrier when the GPU thread waited for it and
otherwise starting with the call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.importers.cuzk_lines import TimelineEvent, TimingLine
from workbench.importers.report import ImportReport

NS = 1_000_000
NTT_H_PARTS = (("d_b_alloc", "d_b_alloc"), ("ntt_kernels", "ntt"), ("coset_intt_sync", "coset_intt"),
               ("msm_init", "msm_init"), ("msm_invoke", "msm_h"), ("msm_dtor", "msm_dtor"))
COPY_NOTE = "the part of ntt_msm_h that CUZK_NTT_H does not name"
REQUIRED = ("prep", "b_g2", "prelock", "ntt", "barrier", "batch", "tail", "held")


@dataclass
class Call:
    index: int
    lines: dict[str, TimingLine] = field(default_factory=dict)
    timeline_event: TimelineEvent | None = None  # its GPU_END (or GPU_START, if it never ended)
    anchor: str = "hold"  # what the matched GPU_START..GPU_END brackets: "hold" or "call"

    def ms(self, kind: str, key: str) -> int | None:
        line = self.lines.get(kind)
        return line.fields.get(key) if line is not None else None

    def get(self, kind: str, key: str) -> int:
        return self.ms(kind, key) or 0

    @property
    def complete(self) -> bool:
        return all(k in self.lines for k in REQUIRED)

    def held_ms(self) -> int:
        phases = sum(self.get(k, f"{n}_ms") for k, n in (
            ("ntt", "ntt_msm_h"), ("barrier", "barrier_wait"), ("batch", "batch_add"), ("tail", "tail_msm")))
        for value in (self.ms("held", "mutex_held_ms"), self.ms("tail", "gpu_total_ms")):
            if value is not None:
                return max(value, phases)
        return phases


class _Layout:
    def __init__(self, timeline: list[TimelineEvent], report: ImportReport) -> None:
        self.report = report
        self.spans: list[tuple[Any, ...]] = []
        self.instants: list[tuple[Any, ...]] = []
        self.events: dict[tuple[str, int], dict[str, TimelineEvent]] = {}
        for e in timeline:
            if "partition" in e.detail:
                self.events.setdefault((e.job, e.detail["partition"]), {}).setdefault(e.event, e)
        jobs = sorted({job for job, _ in self.events})
        self.ids: dict[tuple[str, int], int] = {}
        for key in sorted(self.events, key=lambda k: (jobs.index(k[0]), k[1])):
            self.ids[key] = key[1] if len(jobs) == 1 else len(self.ids)
        self.lanes: list[int] = []  # end of each worker lane's last call

    def partition(self, key: tuple[str, int]) -> int:
        return self.ids[key]

    def free_id(self) -> int:
        taken = set(self.ids.values()) | {s[4] for s in self.spans}
        n = 0
        while n in taken:
            n += 1
        return n

    def lane(self, start: int, end: int) -> int:
        for w, busy_until in enumerate(self.lanes):
            if busy_until <= start:
                self.lanes[w] = end
                return w
        self.lanes.append(end)
        return len(self.lanes) - 1


def place_calls(
    calls: list[Call], timeline: list[TimelineEvent], report: ImportReport,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    layout = _Layout(timeline, report)
    placed_keys = set()
    previous_release = 0
    chained = 0
    for call in calls:
        event = call.timeline_event
        key = (event.job, event.detail["partition"]) if event and "partition" in event.detail else None
        pre_lock = call.get("prelock", "pre_lock_cpu_ms") * NS
        wait = call.get("prelock", "mutex_wait_ms") * NS
        held = call.held_ms() * NS
        if event is not None and key is not None:
            start_event = layout.events[key].get("GPU_START")
            end_event = layout.events[key].get("GPU_END")
            if start_event is not None:
                bracket_start = start_event.offset_ms * NS
            else:
                assert end_event is not None
                bracket_start = end_event.offset_ms * NS - (held if call.anchor == "hold" else 0)
            hold_start = bracket_start if call.anchor == "hold" else bracket_start + pre_lock + wait
            partition, worker = layout.partition(key), event.detail.get("worker")
            placed_keys.add(key)
            marker = None
        else:
            hold_start = max(previous_release, pre_lock + wait)
            partition, worker = layout.free_id(), None
            marker = {"reconstructed": True}
            chained += 1
        previous_release = max(previous_release, hold_start + held)
        _call_spans(layout, call, hold_start, partition, worker, marker)
    if chained:
        report.reconstructed = (f"{chained} of {len(calls)} calls placed from durations alone: each takes "
                                "the mutex when the previous one releases it")
    _timeline_only(layout, placed_keys)
    times = [t for s in layout.spans for t in (s[2], s[3])] + [i[2] for i in layout.instants]
    if times:
        layout.instants.append(("run", "run_start", min(times), -1, -1, None))
        layout.instants.append(("run", "run_end", max(times), -1, -1, None))
    return layout.spans, layout.instants


def _call_spans(
    layout: _Layout, call: Call, hold_start: int, p: int, worker: int | None, marker: dict[str, Any] | None,
) -> None:
    pre_lock = call.get("prelock", "pre_lock_cpu_ms") * NS
    wait = call.get("prelock", "mutex_wait_ms") * NS
    start_fn = hold_start - wait - pre_lock
    total = call.ms("held", "total_start_fn_ms")
    hold_end = hold_start + call.held_ms() * NS
    b_g2 = call.get("b_g2", "b_g2_msm_ms") * NS
    end_fn = start_fn + total * NS if total is not None else hold_end + b_g2
    end_fn = max(end_fn, hold_end + b_g2)
    w = worker if worker is not None else layout.lane(start_fn, end_fn)
    track = f"worker/{w}"

    def span(track_name: str, name: str, start: int, length: int, attrs: dict[str, Any] | None = None) -> int:
        merged = {**(marker or {}), **(attrs or {})} or None
        layout.spans.append((track_name, name, start, start + length, p, w, merged))
        return start + length

    if "prelock" in call.lines:
        if pre_lock:
            span(track, "pre_lock_cpu", start_fn, pre_lock)
        span("mutex/gpu0", "wait", hold_start - wait, wait)
    at = hold_start
    ntt = call.get("ntt", "ntt_msm_h_ms") * NS
    if "ntt" in call.lines:
        _ntt_parts(call, at, ntt, span, track)
        at = span(track, "ntt_msm_h", at, ntt)
    barrier = call.get("barrier", "barrier_wait_ms") * NS
    arrival = at
    if "barrier" in call.lines:
        at = span(track, "barrier_wait", at, barrier)
        span(f"barrier/worker{w}", "wait", arrival, barrier, {"party": "gpu"})
    for kind, name in (("batch", "batch_add"), ("tail", "tail_msm")):
        if kind in call.lines:
            at = span(track, name, at, call.get(kind, f"{name}_ms") * NS)
    if "held" in call.lines or "tail" in call.lines:
        span("mutex/gpu0", "hold", hold_start, hold_end - hold_start)
    if "b_g2" in call.lines:
        span(track, "b_g2_msm", hold_end, b_g2)
    if "prep" in call.lines:
        prep = call.get("prep", "prep_msm_ms") * NS
        # The GPU thread waited for prep: prep_msm ended as the barrier opened.
        prep_start = arrival + barrier - prep if barrier > 0 else start_fn
        span(f"{track}/prep", "prep_msm", prep_start, prep)
        if "barrier" in call.lines:
            release = arrival + barrier
            span(f"barrier/worker{w}", "wait", min(prep_start + prep, release),
                 release - min(prep_start + prep, release), {"party": "prep"})
            last = "prep" if barrier > 0 else "gpu"
            layout.instants.append((f"barrier/worker{w}", "release", release, p, w, {"last": last}))
    span(track, "finish", end_fn, 0, {"completion": "end of the proving call (not logged as a phase)"})
    pickup = _event(layout, p, "GPU_PICKUP")
    layout.instants.append((track, "pickup", pickup.offset_ms * NS if pickup else start_fn, p, w, None))


def _ntt_parts(call: Call, start: int, ntt: int, span: Any, track: str) -> None:
    parts = call.lines.get("ntt_h")
    if parts is None:
        return
    named = sum(parts.fields.get(key, 0) for key, _ in NTT_H_PARTS) * NS
    at = start
    for key, name in NTT_H_PARTS:
        value = parts.fields.get(key, 0) * NS
        if name == "ntt" and ntt - named > 0:
            at = span(track, "h2d_copy", at, ntt - named, {"inferred": COPY_NOTE})
        if value:
            at = span(track, name, at, value)


def _event(layout: _Layout, partition: int, name: str) -> TimelineEvent | None:
    for key, events in layout.events.items():
        if layout.ids[key] == partition and name in events:
            return events[name]
    return None


def _timeline_only(layout: _Layout, placed: set[tuple[str, int]]) -> None:
    synth_lanes: list[int] = []
    for key, events in sorted(layout.events.items(), key=lambda kv: layout.ids[kv[0]]):
        p = layout.ids[key]
        start, end = events.get("SYNTH_START"), events.get("SYNTH_END")
        if start is not None and end is not None and end.offset_ms >= start.offset_ms:
            s, e = start.offset_ms * NS, end.offset_ms * NS
            lane = next((i for i, busy in enumerate(synth_lanes) if busy <= s), len(synth_lanes))
            if lane == len(synth_lanes):
                synth_lanes.append(e)
            synth_lanes[lane] = e
            layout.spans.append((f"synth/{lane}", "synthesis", s, e, p, -1, None))
        queued = events.get("GPU_QUEUE") or end
        if queued is not None:
            layout.instants.append(("queue", "queued", queued.offset_ms * NS, p, -1, None))
        gpu_start, gpu_end = events.get("GPU_START"), events.get("GPU_END")
        if key not in placed and gpu_start is not None and gpu_end is not None:
            w = gpu_end.detail.get("worker", gpu_start.detail.get("worker", 0))
            s, e = gpu_start.offset_ms * NS, max(gpu_end.offset_ms, gpu_start.offset_ms) * NS
            note = {"no_timing_lines": True}
            layout.spans.append((f"worker/{w}", "gpu_call", s, e, p, w, note))
            layout.spans.append((f"worker/{w}", "finish", e, e, p, w, note))
