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

from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.importers.cuzk_columns import NS, Blocks, Figures, track_ids, with_each, with_lines
from workbench.model import tracks as tr
from workbench.model.pipeline import COPY_SPANS, CUZK, CUZK_NTT_H_PARTS
from workbench.trace.container import StringTable

COPY_NOTE = "the part of ntt_msm_h that CUZK_NTT_H does not name"
MUTEX = tr.mutex_track(0)  # the daemon's partition calls all share one mutex
# Attribute lines: where their figures go, and the prefix their keys get there.
ON_NTT = {"pool": "", "d_a_cache": ""}
ON_HOLD = {"host_register": "host_register_", "prestage_vram": "prestage_", "prestage_setup": "prestage_"}
FINISH = {"completion": "end of the proving call (not logged as a phase)"}
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
    hold_start: np.ndarray | None = None
    start_fn: np.ndarray | None = None
    end_fn: np.ndarray | None = None

    def set_hold(self, hold_start: np.ndarray) -> None:
        self.hold_start = hold_start
        self.start_fn = hold_start - self.wait - self.pre_lock
        hold_end = hold_start + self.held
        end_fn = np.where(self.has_total, self.start_fn + self.total, hold_end + self.b_g2)
        self.end_fn = np.maximum(end_fn, hold_end + self.b_g2)


def call_times(f: Figures) -> CallTimes:
    phases = sum((f.get(kind, key) for kind, key in HELD_PHASES), np.zeros(f.n, dtype=np.int64))
    # The hold is the mutex_held figure, else the GPU total, and never shorter than its phases.
    held = np.where(f.present("tail", "gpu_total_ms"), np.maximum(f.get("tail", "gpu_total_ms"), phases), phases)
    held = np.where(f.present("held", "mutex_held_ms"), np.maximum(f.get("held", "mutex_held_ms"), phases), held)
    # Without a pre_lock_cpu line, the setup up to split_vectors' end is all that is known.
    pre_lock = np.maximum(f.get("prelock", "pre_lock_cpu_ms"), f.get("split", "setup_to_split_ms"))
    return CallTimes(pre_lock * NS, f.get("prelock", "mutex_wait_ms") * NS, held * NS,
                     f.get("b_g2", "b_g2_msm_ms") * NS, f.get("held", "total_start_fn_ms") * NS,
                     f.present("held", "total_start_fn_ms"))


def call_phases(strings: StringTable, f: Figures, t: CallTimes, workers: np.ndarray, chained: np.ndarray,
                pickup: np.ndarray) -> tuple[Blocks, Blocks]:
    """The calls' spans and instants, phase by phase, as the daemon runs them."""
    assert t.hold_start is not None and t.start_fn is not None and t.end_fn is not None
    spans, instants = Blocks(f.n, strings), Blocks(f.n, strings, instants=True)
    worker = track_ids(strings, tr.worker_track, workers)
    barrier_track = track_ids(strings, tr.barrier_track, workers)
    hold_start, start_fn = t.hold_start, t.start_fn
    hold_end = hold_start + t.held

    def lines(kind: str, mask: np.ndarray, extra: dict[str, Any] | None = None) -> list[dict[str, Any] | None]:
        return with_lines(f.line_numbers(kind)[mask], chained[mask], extra)

    has = {kind: f.has(kind) for kind in ("prelock", "split", "ntt", "ntt_h", "barrier", "batch", "tail",
                                          "held", "b_g2", "prep", "dealloc")}
    mask = has["prelock"] & (t.pre_lock != 0)
    spans.add(mask, worker, _name("pre_lock_cpu_ms"), start_fn, start_fn + t.pre_lock, lines("prelock", mask))
    split_end = start_fn + f.get("split", "setup_to_split_ms") * NS
    spans.add(has["split"], worker, _name("split_vectors_ms"),
              split_end - f.get("split", "split_vectors_ms") * NS, split_end, lines("split", has["split"]))
    spans.add(has["prelock"], MUTEX, "wait", hold_start - t.wait, hold_start, lines("prelock", has["prelock"]))
    ntt = f.get("ntt", "ntt_msm_h_ms") * NS
    _ntt_parts(spans, f, has["ntt"] & has["ntt_h"], hold_start, ntt, worker, lines)
    ntt_attrs = [c.attrs(ON_NTT) | ({"gpu_tid": tid} if (tid := c.ms("ntt", "gpu_tid")) is not None else {})
                 for c, m in zip(f.calls, has["ntt"].tolist(), strict=True) if m]
    spans.add(has["ntt"], worker, _name("ntt_msm_h_ms"), hold_start, hold_start + ntt,
              with_each(ntt_attrs, chained[has["ntt"]], f.line_numbers("ntt")[has["ntt"]]))
    arrival = hold_start + ntt
    barrier = f.get("barrier", "barrier_wait_ms") * NS
    release = arrival + barrier
    spans.add(has["barrier"], worker, _name("barrier_wait_ms"), arrival, release, lines("barrier", has["barrier"]))
    spans.add(has["barrier"], barrier_track, "wait", arrival, release,
              lines("barrier", has["barrier"], {"party": "gpu"}))
    at = release
    for kind, key in (("batch", "batch_add_ms"), ("tail", "tail_msm_ms")):
        length = f.get(kind, key) * NS
        spans.add(has[kind], worker, _name(key), at, at + length, lines(kind, has[kind]))
        at = at + length
    held_or_tail = has["held"] | has["tail"]
    hold_attrs = [c.attrs(ON_HOLD) for c, m in zip(f.calls, held_or_tail.tolist(), strict=True) if m]
    hold_lines = np.where(has["held"], f.line_numbers("held"), f.line_numbers("tail"))[held_or_tail]
    spans.add(held_or_tail, MUTEX, "hold", hold_start, hold_end, with_each(hold_attrs, chained[held_or_tail],
                                                                             hold_lines))
    circuits = f.get("b_g2", "num_circuits")[has["b_g2"]].tolist()
    spans.add(has["b_g2"], worker, _name("b_g2_msm_ms"), hold_end, hold_end + t.b_g2,
              with_each([{"num_circuits": c} if c else {} for c in circuits], chained[has["b_g2"]],
                        f.line_numbers("b_g2")[has["b_g2"]]))
    prep = f.get("prep", "prep_msm_ms") * NS
    # The GPU thread waited for prep: prep_msm ended as the barrier opened.
    prep_start = np.where(barrier > 0, release - prep, start_fn)
    spans.add(has["prep"], track_ids(strings, tr.prep_track, workers), _name("prep_msm_ms"), prep_start,
              prep_start + prep, lines("prep", has["prep"]))
    both = has["prep"] & has["barrier"]
    spans.add(both, barrier_track, "wait", np.minimum(prep_start + prep, release), release,
              with_each([{"party": "prep"}] * int(both.sum()), chained[both], None))
    last = (barrier > 0)[both].tolist()
    instants.add(both, barrier_track, "release", release, None, [{"last": "prep" if p else "gpu"} for p in last])
    dealloc = f.get("dealloc", "async_dealloc_ms").tolist()
    finish = [{**FINISH, "async_dealloc_ms": d} if h else FINISH for d, h in zip(dealloc, has["dealloc"].tolist(),
                                                                                 strict=True)]
    spans.add(np.ones(f.n, dtype=bool), worker, "finish", t.end_fn, t.end_fn, with_each(finish, chained, None))
    instants.add(np.ones(f.n, dtype=bool), worker, "pickup", pickup, None, None)
    return spans, instants


def _ntt_parts(spans: Blocks, f: Figures, mask: np.ndarray, start: np.ndarray, ntt: np.ndarray,
               worker: np.ndarray, lines: Any) -> None:
    """CUZK_NTT_H's parts one after another from ntt_msm_h's start, the unnamed rest as the copy
    before the kernels."""
    parts = {key: f.get("ntt_h", key) * NS for key in CUZK_NTT_H_PARTS}
    rest = ntt - sum(parts.values(), np.zeros(f.n, dtype=np.int64))
    at = start
    for key, value in parts.items():
        if key == "ntt_kernels":
            copy = mask & (rest > 0)
            spans.add(copy, worker, COPY_SPANS[0], at, at + rest, lines("ntt_h", copy, {"inferred": COPY_NOTE}))
            at = np.where(copy, at + rest, at)
        named = mask & (value != 0)
        spans.add(named, worker, _name(key), at, at + value, lines("ntt_h", named))
        at = np.where(named, at + value, at)
