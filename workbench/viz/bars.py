"""Gantt bars: spans turned into drawable columns (lane, phase, depth, times, hover text).

Pure numpy and strings, no Bokeh: the static figures, the live stream and the report all
build their bars here, and tests check bars without a browser.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from workbench.model import tracks as tr
from workbench.model.roles import WAIT_ROLES, role_of, trace_rules
from workbench.trace.container import Trace
from workbench.viz.lanes import HoldIndex, base_lane, nesting_depth, phase_of, readable, worker_gpus
from workbench.viz.palette import Kinds
from workbench.viz.words import describe

# Phases recorded inside another phase of the same thread; the live view draws them a level
# down without waiting for the enclosing span, which is recorded only when it ends.
NESTED_PHASES = frozenset({
    "h2d_copy", "staging_copy", "ntt", "coset_intt", "msm_h", "pool_checkout",
    "host_register", "host_unregister", "proving_key", "twiddles", "parse_key_points", "kernels",
    "upload_key", "link_probe", "prep_upload", "batch_add_g2", "tail_msm_g2", "batch_add_cpu",
    "tail_msm_cpu", "synthesis_processes", "synthesis_collect", "warm_up",
})
HOLD_SUFFIX = " mutex hold"
# Tracks of the pipeline's own threads and primitives: their spans' names are its phases.
OWN_TRACKS = frozenset({tr.RUN, tr.SYNTH, tr.WORKER, tr.PREP, tr.MUTEX, tr.BARRIER, tr.QUEUE, tr.HOST_LOAD})


@dataclass
class Bars:
    lane: np.ndarray  # str
    phase: np.ndarray  # str
    left: np.ndarray  # seconds from the view's origin
    right: np.ndarray
    depth: np.ndarray  # 0 for outermost; nested spans are drawn thinner, on top
    partition: np.ndarray
    worker: np.ndarray
    duration_ms: np.ndarray
    detail: np.ndarray  # str: bytes and GB/s for copies, other attributes, errors
    alpha: np.ndarray  # 1 for a span; an aggregated bar's share of its bin that was busy
    kind: np.ndarray  # str: the legend entry it is drawn under (see palette.Kinds)
    color: np.ndarray  # str
    role: np.ndarray  # str: the span's role (model/roles.py); "" for an aggregated bin
    family: np.ndarray  # str: "wait", "copy" or "work", what a range's statistics add up
    bytes: np.ndarray  # float: bytes moved (copies), 0 otherwise

    def __len__(self) -> int:
        return len(self.left)

    def take(self, selector: Any) -> Bars:
        return Bars(**{f.name: getattr(self, f.name)[selector] for f in fields(self)})

    def relabel(self, changes: Mapping[str, tuple[str, str]], fixed: Set[str]) -> None:
        """Give the bars of these names their new legend entry and colour (phase -> (kind,
        colour)), in place, except bars drawn under a kind in `fixed` (the pipeline's own)."""
        if not len(self) or not changes:
            return
        rows = np.flatnonzero(np.isin(self.phase, list(changes)) & ~np.isin(self.kind, list(fixed)))
        for i in rows.tolist():
            self.kind[i], self.color[i] = changes[self.phase[i]]

    @classmethod
    def empty(cls) -> Bars:
        text = np.array([], dtype=object)
        number = np.array([], dtype=np.float64)
        whole = np.array([], dtype=np.int64)
        return cls(text, text, number, number, whole, whole, whole, number, text, number, text, text, text,
                   text, number)

    @classmethod
    def concat(cls, parts: list[Bars]) -> Bars:
        if not parts:
            return cls.empty()
        return Bars(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})


class BarBuilder:
    """Turns spans into bars, remembering mutex holds across batches (for the live view).

    `nesting=True` (whole traces) measures depth from how spans enclose each other, which
    holds for any trace; the live view sees inner spans before the spans around them, so it
    takes depth from the phase's known place instead.
    """

    def __init__(
        self, origin_ns: int, nesting: bool = True, worker_gpu: Mapping[int, int] | None = None,
    ) -> None:
        self.origin_ns = origin_ns
        self.nesting = nesting
        # Several GPUs: worker lanes carry their GPU (a live view has no run facts yet).
        self.worker_gpu = worker_gpu
        self.holds = HoldIndex()
        self.kinds = Kinds()
        # Live: time per (role, name) of the kernels and host ranges so far, and the names
        # whose legend entry the last batch changed (the view moves their bars already drawn).
        self.totals: dict[tuple[str, str], float] = {}
        self.relabelled: dict[str, tuple[str, str]] = {}
        self._said: dict[Any, str] = {}

    def build(self, trace: Trace, mask: np.ndarray | None = None) -> Bars:
        spans = trace.spans
        gpus_of_workers = self.worker_gpu or worker_gpus(trace.meta)
        index = np.arange(len(spans)) if mask is None else np.flatnonzero(mask)
        if not len(index):
            return Bars.empty()
        text = trace.strings.values
        track_ids, name_ids = spans.track[index], spans.name[index]
        start, end = spans.start_ns[index], spans.end_ns[index]
        worker, partition = spans.worker[index], spans.partition[index]
        attrs = [spans.attrs[i] for i in index.tolist()]
        self._learn_holds(text, track_ids, name_ids, start, end, worker)

        # Lane and phase depend on (track, name, worker, party) only: decide once per combination,
        # on integer codes (millions of spans, a few dozen combinations).
        barrier_ids = [i for i, t in enumerate(text) if tr.parse(t).kind == tr.BARRIER]
        party_names = [""]
        party = np.zeros(len(index), dtype=np.int64)
        for i in np.flatnonzero(np.isin(track_ids, barrier_ids)).tolist():
            name = str((attrs[i] or {}).get("party", ""))
            if name not in party_names:
                party_names.append(name)
            party[i] = party_names.index(name)
        worker_code = worker.astype(np.int64) - int(worker.min()) if len(worker) else worker
        workers, parties = int(worker_code.max()) + 1, len(party_names)
        key = ((track_ids.astype(np.int64) * len(text) + name_ids) * workers + worker_code) * parties + party
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        lane_names: list[str] = []
        combo_lane, combo_moves, combo_phase, combo_barrier = [], [], [], []
        phase_names: list[str] = []
        combo_role: list[tuple[str, bool]] = []
        rules = trace_rules(trace)
        for i in first.tolist():
            track, name, p = text[track_ids[i]], text[name_ids[i]], party_names[party[i]] or None
            lane_name, can_move = base_lane(track, name, int(worker[i]), p, gpus_of_workers)
            if lane_name not in lane_names:
                lane_names.append(lane_name)
            phase_name = readable(phase_of(track, name, p))
            if phase_name not in phase_names:
                phase_names.append(phase_name)
            combo_lane.append(lane_names.index(lane_name))
            combo_phase.append(phase_names.index(phase_name))
            combo_moves.append(can_move)
            track_kind = tr.parse(track).kind
            combo_barrier.append(track_kind == tr.BARRIER)
            combo_role.append((role_of(track, name, rules), track_kind in OWN_TRACKS))
        lane_code = np.array(combo_lane, dtype=np.int64)[inverse]
        phase_code = np.array(combo_phase, dtype=np.int64)[inverse]
        duration = end - start
        # The names that took longest get legend entries: over the whole trace, or so far.
        busy = np.bincount(inverse, weights=duration, minlength=len(first))
        totals: dict[tuple[str, str], float] = {} if self.nesting else self.totals
        for c, (role, own) in enumerate(combo_role):
            if not own:
                key = (role, phase_names[combo_phase[c]])
                totals[key] = totals.get(key, 0.0) + float(busy[c])
        if self.nesting:
            self.kinds.rank(totals)
        else:
            self.relabelled = self.kinds.rerank(totals)
        combo_family = [family_of(role, phase_names[combo_phase[c]])
                        for c, (role, _) in enumerate(combo_role)]
        combo_kind = [self.kinds.kind(phase_names[combo_phase[c]], role, own)
                      for c, (role, own) in enumerate(combo_role)]
        kind = np.array(combo_kind, dtype=object)[inverse]
        color = np.array([self.kinds.colors[k] for k in combo_kind], dtype=object)[inverse]
        moves = np.array(combo_moves, dtype=bool)[inverse]
        in_hold = np.zeros(len(index), dtype=bool)
        if moves.any():
            in_hold[moves] = self.holds.inside(worker[moves], start[moves], end[moves])
            for code in np.unique(lane_code[in_hold]).tolist():
                held = lane_names[code] + HOLD_SUFFIX  # the lane of the mutex's own hold spans
                if held not in lane_names:
                    lane_names.append(held)
                lane_code[in_hold & (lane_code == code)] = lane_names.index(held)
        lane = np.array(lane_names, dtype=object)[lane_code]
        phase = np.array(phase_names, dtype=object)[phase_code]

        if self.nesting:
            depth = nesting_depth(lane_code, start, end)
        else:
            # The barrier's own record of the GPU side's wait lies inside the barrier_wait phase.
            nested_phase = np.array([p in NESTED_PHASES for p in phase_names], dtype=bool)[phase_code]
            nested = nested_phase | (np.array(combo_barrier, dtype=bool)[inverse] & moves)
            depth = nested.astype(np.int64) + in_hold

        detail = np.array(
            [self._describe(a, d) for a, d in zip(attrs, duration.tolist(), strict=True)], dtype=object,
        )
        # Hover keeps the whole name of a phase its label had to shorten.
        long_names = [i for i, n in enumerate(text) if len(n) > len(readable(n))]
        for i in np.flatnonzero(np.isin(name_ids, long_names)).tolist():
            detail[i] = f"{text[name_ids[i]]}; {detail[i]}" if detail[i] else text[name_ids[i]]
        moved = np.array([_bytes_of(a) for a in attrs], dtype=np.float64)
        family = np.array(combo_family, dtype=object)[inverse]
        family[moved > 0] = "copy"
        return Bars(
            lane=lane, phase=phase,
            left=(start - self.origin_ns) / 1e9, right=(end - self.origin_ns) / 1e9,
            depth=depth.astype(np.int64), partition=partition.astype(np.int64),
            worker=worker.astype(np.int64), duration_ms=duration / 1e6, detail=detail,
            alpha=np.ones(len(index)), kind=kind, color=color,
            role=np.array([r for r, _ in combo_role], dtype=object)[inverse], family=family, bytes=moved,
        )

    def _describe(self, attrs: dict[str, Any] | None, duration_ns: int) -> str:
        """describe(), remembered per attributes: a run repeats a few dozen of them (a copy's
        words depend on its duration too)."""
        if not attrs:
            return ""
        try:
            key = (tuple(attrs.items()), duration_ns if "bytes" in attrs else 0)
            hash(key)
        except TypeError:  # a list or dict among the values
            return describe(attrs, duration_ns)
        said = self._said.get(key)
        if said is None:
            if len(self._said) > 50_000:
                self._said.clear()
            said = self._said[key] = describe(attrs, duration_ns)
        return said

    def _learn_holds(
        self, text: list[str], track_ids: np.ndarray, name_ids: np.ndarray, start: np.ndarray,
        end: np.ndarray, worker: np.ndarray,
    ) -> None:
        mutex_tracks = [i for i, s in enumerate(text) if tr.parse(s).kind == tr.MUTEX]
        if not mutex_tracks:
            return
        on_mutex = np.flatnonzero(np.isin(track_ids, mutex_tracks) & (worker >= 0))
        for i in on_mutex.tolist():
            name = text[name_ids[i]]
            if name == "wait":  # the lock was taken when the wait ended: a hold opens
                self.holds.opened(int(worker[i]), int(end[i]))
            elif name == "hold":
                self.holds.closed(int(worker[i]), int(start[i]), int(end[i]))


def family_of(role: str, phase: str) -> str:
    """Waiting (for a lock, a barrier, a condition, the GPU), copying, or working: the pipeline's
    own barrier_wait phase is its consumer's role but a wait all the same."""
    if role in (*WAIT_ROLES, "sync") or phase.startswith(("barrier_wait", "mutex_wait")):
        return "wait"
    return "copy" if role == "copy" else "work"


def _bytes_of(attrs: dict[str, Any] | None) -> float:
    value = (attrs or {}).get("bytes")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def factorize(values: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """Distinct values in order of appearance and each element's index among them (a dict
    is far quicker than sorting millions of Python strings)."""
    seen: dict[Any, int] = {}
    codes = np.fromiter((seen.setdefault(v, len(seen)) for v in values.tolist()), np.int64, len(values))
    return list(seen), codes


def origin_of(trace: Trace) -> int:
    """Where a trace's time axis starts: the recorder's origin when known, else its first event."""
    origin = trace.meta.get("origin_ns")
    if isinstance(origin, int):
        return origin
    return trace.time_range()[0]


def run_start_of(trace: Trace) -> int:
    """When the run proper began (after one-off setup): what runs are aligned on to compare."""
    starts = trace.instants.ts_ns[trace.instants.name == trace.string_id("run_start")]
    return int(starts.min()) if len(starts) else origin_of(trace)


def trace_bars(trace: Trace, origin_ns: int | None = None) -> Bars:
    return BarBuilder(origin_of(trace) if origin_ns is None else origin_ns).build(trace)
