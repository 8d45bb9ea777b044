"""The phases inside each cuzk call, as vectorised blocks of spans over all calls at once.

Inside a call, as the daemon runs them: the pre-lock CPU work (split_vectors inside it,
ending where setup_to_split says), the mutex wait ending where the hold starts, ntt_msm_h
(with the CUZK_NTT_H parts inside it, and the rest of it, which those parts do not name, as
the host-to-device copy), barrier_wait, batch_add, tail_msm, the release, b_g2_msm; prep_msm
on the worker's prep track, ending at the barrier when the GPU thread waited for it and
otherwise starting with the call. Span names come from the cuzk pipeline's aliases
(model/pipeline.py), tracks from the track grammar (model/tracks.py). Lines that carry
figures but no time of their own go into attributes: the pool threshold and the d_a cache on
ntt_msm_h (they happen inside it), pre-staging and host registration on the hold,
num_circuits on b_g2_msm, async_dealloc on the call's finish. Every span whose figure a line
gives carries that line's number (attribute `line`, counted from 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.importers.cuzk_columns import NS, Attrs, Blocks, Figures, track_ids, with_each, with_lines
from workbench.model import tracks as tr
from workbench.model.pipeline import COPY_SPANS, CUZK, CUZK_NTT_H_PARTS, PICKUP
from workbench.trace.container import StringTable

COPY_NOTE = "the part of ntt_msm_h that CUZK_NTT_H does not name"
MUTEX = tr.mutex_track(0)  # the daemon's partition calls all share one mutex
# Attribute lines: where their figures go, and the prefix their keys get there.
ON_NTT = {"pool": "", "d_a_cache": ""}
ON_HOLD = {"host_register": "host_register_", "prestage_vram": "prestage_", "prestage_setup": "prestage_"}
FINISH = {"completion": "end of the proving call (not logged as a phase)"}
KINDS = ("prelock", "split", "ntt", "ntt_h", "barrier", "batch", "tail", "held", "b_g2", "prep", "dealloc")
HELD_PHASES = (("ntt", "ntt_msm_h_ms"), ("barrier", "barrier_wait_ms"), ("batch", "batch_add_ms"),
               ("tail", "tail_msm_ms"))


def _name(key: str) -> str:
    return CUZK.canonical(key)


@dataclass
class CallTimes:
    """Per call (ns): pre-lock work, mutex wait and hold; once anchored, where each part falls."""

    pre_lock: np.ndarray
    wait: np.ndarray
    held: np.ndarray
    b_g2: np.ndarray
    total: np.ndarray  # total_start_fn_ms in ns, where has_total
    has_total: np.ndarray
    # Where the hold starts, and the call's start and end: set by set_hold once anchored.
    hold_start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    start_fn: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    end_fn: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def set_hold(self, hold_start: np.ndarray) -> None:
        self.hold_start = hold_start
        self.start_fn = hold_start - self.wait - self.pre_lock
        hold_end = hold_start + self.held
        end_fn = np.where(self.has_total, self.start_fn + self.total, hold_end + self.b_g2)
        self.end_fn = np.maximum(end_fn, hold_end + self.b_g2)


def call_times(f: Figures) -> CallTimes:
    phases = sum((f.get(kind, key) for kind, key in HELD_PHASES), np.zeros(f.n, dtype=np.int64))
    # The hold is the mutex_held figure, else the GPU total, and never shorter than its phases.
    held = phases
    for kind, key in (("tail", "gpu_total_ms"), ("held", "mutex_held_ms")):
        held = np.where(f.present(kind, key), np.maximum(f.get(kind, key), phases), held)
    # Without a pre_lock_cpu line, the setup up to split_vectors' end is all that is known.
    pre_lock = np.maximum(f.get("prelock", "pre_lock_cpu_ms"), f.get("split", "setup_to_split_ms"))
    return CallTimes(pre_lock * NS, f.get("prelock", "mutex_wait_ms") * NS, held * NS,
                     f.get("b_g2", "b_g2_msm_ms") * NS, f.get("held", "total_start_fn_ms") * NS,
                     f.present("held", "total_start_fn_ms"))


def call_phases(strings: StringTable, f: Figures, t: CallTimes, workers: np.ndarray, chained: np.ndarray,
                pickup: np.ndarray) -> tuple[Blocks, Blocks]:
    """The calls' spans and instants, phase by phase in the order the daemon runs them."""
    spans, instants = Blocks(f.n, strings), Blocks(f.n, strings, instants=True)
    worker = track_ids(strings, tr.worker_track, workers)
    barrier_track = track_ids(strings, tr.barrier_track, workers)
    hold_start, start_fn = t.hold_start, t.start_fn
    hold_end = hold_start + t.held
    has = {kind: f.has(kind) for kind in KINDS}

    def lines(kind: str, mask: np.ndarray, extra: dict[str, Any] | None = None) -> Attrs:
        return with_lines(f.line_numbers(kind)[mask], chained[mask], extra)

    def span(kind: str, track: np.ndarray | str, key: str, start: np.ndarray, end: np.ndarray,
             mask: np.ndarray | None = None) -> None:
        """A phase timed by a line of `kind`, on the calls that have one (or those in `mask`)."""
        mask = has[kind] if mask is None else mask
        spans.add(mask, track, _name(key), start, end, lines(kind, mask))

    span("prelock", worker, "pre_lock_cpu_ms", start_fn, start_fn + t.pre_lock,
         has["prelock"] & (t.pre_lock != 0))
    split_end = start_fn + f.get("split", "setup_to_split_ms") * NS
    span("split", worker, "split_vectors_ms", split_end - f.get("split", "split_vectors_ms") * NS, split_end)
    span("prelock", MUTEX, "wait", hold_start - t.wait, hold_start)
    ntt = f.get("ntt", "ntt_msm_h_ms") * NS
    _ntt_parts(spans, f, has["ntt"] & has["ntt_h"], hold_start, ntt, worker, lines)
    spans.add(has["ntt"], worker, _name("ntt_msm_h_ms"), hold_start, hold_start + ntt,
              with_each(_ntt_attrs(f, has["ntt"]), chained[has["ntt"]], f.line_numbers("ntt")[has["ntt"]]))
    arrival = hold_start + ntt
    barrier = f.get("barrier", "barrier_wait_ms") * NS
    release = arrival + barrier
    span("barrier", worker, "barrier_wait_ms", arrival, release)
    spans.add(has["barrier"], barrier_track, "wait", arrival, release,
              lines("barrier", has["barrier"], {"party": "gpu"}))
    at = release
    for kind, key in (("batch", "batch_add_ms"), ("tail", "tail_msm_ms")):
        length = f.get(kind, key) * NS
        span(kind, worker, key, at, at + length)
        at = at + length
    hold = has["held"] | has["tail"]
    hold_lines = np.where(has["held"], f.line_numbers("held"), f.line_numbers("tail"))[hold]
    hold_attrs = [c.attrs(ON_HOLD) for c, m in zip(f.calls, hold.tolist(), strict=True) if m]
    spans.add(hold, MUTEX, "hold", hold_start, hold_end, with_each(hold_attrs, chained[hold], hold_lines))
    # A count, not a time: it may be any figure up to 2^63, so it stays a Python int.
    circuits = [{"num_circuits": c} if (c := line.fields.get("num_circuits")) else {}
                for line in f.lines("b_g2") if line is not None]
    spans.add(has["b_g2"], worker, _name("b_g2_msm_ms"), hold_end, hold_end + t.b_g2,
              with_each(circuits, chained[has["b_g2"]], f.line_numbers("b_g2")[has["b_g2"]]))
    prep = f.get("prep", "prep_msm_ms") * NS
    # The GPU thread waited for prep: prep_msm ended as the barrier opened.
    prep_start = np.where(barrier > 0, release - prep, start_fn)
    span("prep", track_ids(strings, tr.prep_track, workers), "prep_msm_ms", prep_start, prep_start + prep)
    both = has["prep"] & has["barrier"]
    spans.add(both, barrier_track, "wait", np.minimum(prep_start + prep, release), release,
              with_each([{"party": "prep"}] * int(both.sum()), chained[both], None))
    last = [{"last": "prep" if waited else "gpu"} for waited in (barrier > 0)[both].tolist()]
    instants.add(both, barrier_track, "release", release, None, last)
    every = np.ones(f.n, dtype=bool)
    spans.add(every, worker, "finish", t.end_fn, t.end_fn, with_each(_finish_attrs(f), chained, None))
    instants.add(every, worker, PICKUP, pickup, None, None)
    return spans, instants


def _ntt_attrs(f: Figures, mask: np.ndarray) -> list[dict[str, Any]]:
    out = []
    for call, has in zip(f.calls, mask.tolist(), strict=True):
        if has:
            tid = call.ms("ntt", "gpu_tid")
            out.append(call.attrs(ON_NTT) | ({"gpu_tid": tid} if tid is not None else {}))
    return out


def _finish_attrs(f: Figures) -> list[dict[str, Any]]:
    dealloc = f.get("dealloc", "async_dealloc_ms").tolist()
    return [{**FINISH, "async_dealloc_ms": d} if has else FINISH
            for d, has in zip(dealloc, f.has("dealloc").tolist(), strict=True)]


def _ntt_parts(spans: Blocks, f: Figures, mask: np.ndarray, start: np.ndarray, ntt: np.ndarray,
               worker: np.ndarray, lines: Callable[..., Attrs]) -> None:
    """CUZK_NTT_H's parts one after another from ntt_msm_h's start, the unnamed rest as the copy
    before the kernels."""
    parts = {key: f.get("ntt_h", key) * NS for key in CUZK_NTT_H_PARTS}
    rest = ntt - sum(parts.values(), np.zeros(f.n, dtype=np.int64))
    at = start
    for key, value in parts.items():
        if key == "ntt_kernels":
            copy = mask & (rest > 0)
            inferred = lines("ntt_h", copy, {"inferred": COPY_NOTE})
            spans.add(copy, worker, COPY_SPANS[0], at, at + rest, inferred)
            at = np.where(copy, at + rest, at)
        named = mask & (value != 0)
        spans.add(named, worker, _name(key), at, at + value, lines("ntt_h", named))
        at = np.where(named, at + value, at)
