"""Laying grouped cuzk calls out in time, as spans on the workbench's own tracks.

See importers/cuzk_log.py for how calls are grouped and anchored. Inside a call: the
pre-lock CPU work (split_vectors inside it, ending where the daemon's setup_to_split says),
the mutex wait ending where the hold starts, ntt_msm_h (with the CUZK_NTT_H parts inside
it, and the rest of it, which those parts do not name, as the host-to-device copy),
barrier_wait, batch_add, tail_msm, the release, b_g2_msm; prep_msm on the worker's prep
track, ending at the barrier when the GPU thread waited for it and otherwise starting with
the call. Span names come from the cuzk pipeline's aliases (model/pipeline.py), tracks from
the track grammar (model/tracks.py). Lines that carry figures but no time of their own go
into attributes: the pool threshold and the d_a cache on ntt_msm_h (they happen inside it),
pre-staging and host registration on the hold, num_circuits on b_g2_msm, async_dealloc on
the call's finish. Every span whose figure a line gives carries that line's number (attribute
`line`, counted from 1), so a finding's evidence can name the line in the log itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.importers.cuzk_lines import TimelineEvent, TimingLine
from workbench.importers.report import ImportReport
from workbench.model import tracks as tr
from workbench.model.pipeline import COPY_SPANS, CUZK, CUZK_NTT_H_PARTS

NS = 1_000_000
COPY_NOTE = "the part of ntt_msm_h that CUZK_NTT_H does not name"
REQUIRED = ("prep", "b_g2", "prelock", "ntt", "barrier", "batch", "tail", "held")
MUTEX = tr.mutex_track(0)  # the daemon's partition calls all share one mutex
# Attribute lines: where their figures go, and the prefix their keys get there.
ON_NTT = {"pool": "", "d_a_cache": ""}
ON_HOLD = {"host_register": "host_register_", "prestage_vram": "prestage_", "prestage_setup": "prestage_"}


@dataclass
class Call:
    index: int
    lines: dict[str, TimingLine] = field(default_factory=dict)
    timeline_event: TimelineEvent | None = None  # its GPU_END (or GPU_START, if it never ended)
    anchor: str = "hold"  # what the matched GPU_START..GPU_END brackets: "hold" or "call"
    step: int = -1  # the latest of the chain of lines it has (cuzk_log.CHAIN), for filing
    partition: int | None = None  # the partition number it was given when placed

    def ms(self, kind: str, key: str) -> int | None:
        line = self.lines.get(kind)
        return line.fields.get(key) if line is not None else None

    def get(self, kind: str, key: str) -> int:
        line = self.lines.get(kind)
        return (line.fields.get(key) or 0) if line is not None else 0

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

    def pre_lock_ms(self) -> int:
        # Without a pre_lock_cpu line, the setup up to split_vectors' end is all that is known.
        return max(self.get("prelock", "pre_lock_cpu_ms"), self.get("split", "setup_to_split_ms"))

    def attrs(self, prefixes: dict[str, str]) -> dict[str, Any]:
        """The figures of these attribute lines, keys prefixed unless they already say what they are."""
        out: dict[str, Any] = {}
        for kind, prefix in prefixes.items():
            if (line := self.lines.get(kind)) is not None:
                for key, value in {**line.fields, **line.words}.items():
                    out[key if key.startswith(prefix.rstrip("_")) else prefix + key] = value
        return out


class _Layout:
    def __init__(self, timeline: list[TimelineEvent], report: ImportReport) -> None:
        self.report = report
        self.spans: list[tuple[Any, ...]] = []
        self.instants: list[tuple[Any, ...]] = []
        self.events: dict[tuple[str, int], dict[str, TimelineEvent]] = {}
        for e in timeline:
            # A monolithic job's events carry no partition: the job is one unit.
            self.events.setdefault((e.job, e.detail.get("partition", 0)), {}).setdefault(e.event, e)
        jobs = {job: n for n, job in enumerate(sorted({job for job, _ in self.events}))}
        self.ids: dict[tuple[str, int], int] = {}
        for key in sorted(self.events, key=lambda k: (jobs[k[0]], k[1])):
            self.ids[key] = key[1] if len(jobs) == 1 else len(self.ids)
        self.by_id = {self.ids[key]: events for key, events in self.events.items()}
        self.taken = set(self.ids.values())
        self.next_id = 0
        self.lanes: list[int] = []  # end of each worker lane's last call

    def partition(self, key: tuple[str, int]) -> int:
        return self.ids[key]

    def free_id(self) -> int:
        while self.next_id in self.taken:
            self.next_id += 1
        self.taken.add(self.next_id)
        return self.next_id

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
        key = (event.job, event.detail.get("partition", 0)) if event is not None else None
        pre_lock = call.pre_lock_ms() * NS
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
        call.partition = partition
        _call_spans(layout, call, (pre_lock, wait, hold_start, held), partition, worker, marker)
    if chained:
        report.reconstructed = (f"{chained} of {len(calls)} calls placed from durations alone: each takes "
                                "the mutex when the previous one releases it")
    _timeline_only(layout, placed_keys)
    times = [t for s in layout.spans for t in (s[2], s[3])] + [i[2] for i in layout.instants]
    if times:
        layout.instants.append((tr.RUN_TRACK, "run_start", min(times), -1, -1, None))
        layout.instants.append((tr.RUN_TRACK, "run_end", max(times), -1, -1, None))
    return layout.spans, layout.instants


NAMES = {key: CUZK.canonical(key) for key in CUZK.aliases}


def _name(key: str) -> str:
    return NAMES.get(key, key)


def _call_spans(
    layout: _Layout, call: Call, times: tuple[int, int, int, int], p: int, worker: int | None,
    marker: dict[str, Any] | None,
) -> None:
    pre_lock, wait, hold_start, held = times  # ns: worked out once by place_calls
    start_fn = hold_start - wait - pre_lock
    total = call.ms("held", "total_start_fn_ms")
    hold_end = hold_start + held
    b_g2 = call.get("b_g2", "b_g2_msm_ms") * NS
    end_fn = start_fn + total * NS if total is not None else hold_end + b_g2
    end_fn = max(end_fn, hold_end + b_g2)
    w = worker if worker is not None else layout.lane(start_fn, end_fn)
    track = tr.worker_track(w)

    def span(track_name: str, name: str, start: int, length: int, attrs: dict[str, Any] | None = None,
             kind: str = "") -> int:
        # The log line a span's figure came from, so a finding can point at the line itself.
        line = {"line": call.lines[kind].line} if kind in call.lines else {}
        merged = {**(marker or {}), **(attrs or {}), **line} or None
        layout.spans.append((track_name, name, start, start + length, p, w, merged))
        return start + length

    if "prelock" in call.lines and pre_lock:
        span(track, _name("pre_lock_cpu_ms"), start_fn, pre_lock, kind="prelock")
    if "split" in call.lines:
        split = call.get("split", "split_vectors_ms") * NS
        split_end = start_fn + call.get("split", "setup_to_split_ms") * NS
        span(track, _name("split_vectors_ms"), split_end - split, split, kind="split")
    if "prelock" in call.lines:
        span(MUTEX, "wait", hold_start - wait, wait, kind="prelock")
    at = hold_start
    ntt = call.get("ntt", "ntt_msm_h_ms") * NS
    if "ntt" in call.lines:
        _ntt_parts(call, at, ntt, span, track)
        at = span(track, _name("ntt_msm_h_ms"), at, ntt, call.attrs(ON_NTT) | _gpu_tid(call), kind="ntt")
    barrier = call.get("barrier", "barrier_wait_ms") * NS
    arrival = at
    if "barrier" in call.lines:
        at = span(track, _name("barrier_wait_ms"), at, barrier, kind="barrier")
        span(tr.barrier_track(w), "wait", arrival, barrier, {"party": "gpu"}, kind="barrier")
    for kind, key in (("batch", "batch_add_ms"), ("tail", "tail_msm_ms")):
        if kind in call.lines:
            at = span(track, _name(key), at, call.get(kind, key) * NS, kind=kind)
    if "held" in call.lines or "tail" in call.lines:
        span(MUTEX, "hold", hold_start, hold_end - hold_start, call.attrs(ON_HOLD),
             kind="held" if "held" in call.lines else "tail")
    if "b_g2" in call.lines:
        circuits = call.ms("b_g2", "num_circuits")
        span(track, _name("b_g2_msm_ms"), hold_end, b_g2, {"num_circuits": circuits} if circuits else None,
             kind="b_g2")
    if "prep" in call.lines:
        prep = call.get("prep", "prep_msm_ms") * NS
        # The GPU thread waited for prep: prep_msm ended as the barrier opened.
        prep_start = arrival + barrier - prep if barrier > 0 else start_fn
        span(tr.prep_track(w), _name("prep_msm_ms"), prep_start, prep, kind="prep")
        if "barrier" in call.lines:
            release = arrival + barrier
            span(tr.barrier_track(w), "wait", min(prep_start + prep, release),
                 release - min(prep_start + prep, release), {"party": "prep"})
            last = "prep" if barrier > 0 else "gpu"
            layout.instants.append((tr.barrier_track(w), "release", release, p, w, {"last": last}))
    finish: dict[str, Any] = {"completion": "end of the proving call (not logged as a phase)"}
    if "dealloc" in call.lines:
        finish["async_dealloc_ms"] = call.get("dealloc", "async_dealloc_ms")
    span(track, "finish", end_fn, 0, finish)
    pickup = layout.by_id.get(p, {}).get("GPU_PICKUP")
    layout.instants.append((track, "pickup", pickup.offset_ms * NS if pickup else start_fn, p, w, None))


def _gpu_tid(call: Call) -> dict[str, Any]:
    tid = call.ms("ntt", "gpu_tid")
    return {"gpu_tid": tid} if tid is not None else {}


def _ntt_parts(call: Call, start: int, ntt: int, span: Any, track: str) -> None:
    parts = call.lines.get("ntt_h")
    if parts is None:
        return
    named = sum(parts.fields.get(key, 0) for key in CUZK_NTT_H_PARTS) * NS
    at = start
    for key in CUZK_NTT_H_PARTS:
        value = parts.fields.get(key, 0) * NS
        if key == "ntt_kernels" and ntt - named > 0:
            at = span(track, COPY_SPANS[0], at, ntt - named, {"inferred": COPY_NOTE}, kind="ntt_h")
        if value:
            at = span(track, _name(key), at, value, kind="ntt_h")


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
            layout.spans.append((tr.synth_track(lane), _name("synth_ms"), s, e, p, -1, {"line": end.line}))
        queued = events.get("GPU_QUEUE") or events.get("CHAN_SEND") or end
        if queued is not None:
            layout.instants.append((tr.QUEUE_TRACK, "queued", queued.offset_ms * NS, p, -1, None))
        gpu_start, gpu_end = events.get("GPU_START"), events.get("GPU_END")
        if key not in placed and gpu_start is not None and gpu_end is not None:
            w = gpu_end.detail.get("worker", gpu_start.detail.get("worker", 0))
            s, e = gpu_start.offset_ms * NS, max(gpu_end.offset_ms, gpu_start.offset_ms) * NS
            note = {"no_timing_lines": True}
            layout.spans.append((tr.worker_track(w), "gpu_call", s, e, p, w, note))
            layout.spans.append((tr.worker_track(w), "finish", e, e, p, w, note))
