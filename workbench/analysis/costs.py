"""What each partition cost, phase by phase, read back from a trace for the what-if replay.

Durations are host wall times. When the host was shared (`host_cores` given), a phase that
ran beside others on too few cores took longer than its own work; the work is recovered by
integrating the share of a core the phase had, min(1, cores / CPU phases running), over
its span, so the replay can hand out cores again under a different schedule.

Contract: `run_shape(trace, host_cores=None) -> RunShape`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.summary import run_window_ns, summarize
from workbench.analysis.tracks import COMPUTE_SPANS, LOCK_PHASES, device_mask, tracks_of
from workbench.model import tracks as tr
from workbench.model.pipeline import PICKUP, PROVER
from workbench.trace.container import Trace

# Spans that occupy a host core on any backend; on an emulated (CPU) backend, every phase does.
HOST_WORK = ("synthesis", "buffer_checkout", "host_register", "prep_msm", "staging_copy",
             "b_g2_msm", "finish", "host_unregister")
EMULATED_WORK = (*HOST_WORK, "h2d_copy", *COMPUTE_SPANS)


@dataclass(frozen=True)
class PartitionCosts:
    partition: int
    synthesis_ns: float
    checkout_ns: float  # buffer allocation or registration, not waiting for a pool slot
    prep_ns: float
    copy_ns: float  # host-to-device copies of a, b, c
    copy_bytes: float
    staging_ns: float  # explicit staging into pinned buffers
    compute_ns: float  # the rest of ntt_msm_h: NTTs and the H MSM
    batch_add_ns: float
    tail_msm_ns: float
    lock_other_ns: float  # held, but in no phase (bookkeeping between phases)
    b_g2_msm_ns: float
    finish_ns: float
    # From the worker's pickup to the start of prep_msm: the prep thread is handed the partition
    # at pickup but starts later (its wake-up waits on the worker's own work). With one worker
    # this delay lies on the path to the barrier; replays keep it as recorded.
    prep_delay_ns: float = 0.0


@dataclass(frozen=True)
class RunShape:
    workers: int  # per GPU
    synth_threads: int
    lookahead: int
    lock_scope: str
    memory_mode: str
    emulated: bool  # every phase used a host core (CPU backend)
    host_cores: float | None
    costs: tuple[PartitionCosts, ...]
    measured_per_min: float
    measured_done: int
    gpus: int = 1  # each with its own mutex and `workers` workers


def run_shape(trace: Trace, host_cores: float | None = None) -> RunShape:
    config = trace.config
    emulated = bool(trace.meta.get("memory_emulated")) or config.get("backend") == "cpu"
    raw = (trace.spans.end_ns - trace.spans.start_ns).astype(np.float64)
    work = _durations(trace, host_cores, EMULATED_WORK if emulated else HOST_WORK)
    per, per_raw, bytes_of = _phase_sums(trace, work, raw)
    delays = _prep_delays(trace)
    costs = tuple(
        _costs(p, per[p], per_raw[p], bytes_of.get(p, 0.0), delays.get(p, 0.0))
        for p in sorted(per) if "ntt_msm_h" in per[p] or "mutex_hold" in per[p]
    )
    summary = summarize(trace)
    start, end = run_window_ns(trace)
    done = summary.partitions_done or len(costs)
    gpus = int(config.get("gpus") or len(tracks_of(trace, tr.MUTEX)) or 1)
    return RunShape(
        workers=int(config.get("gpu_workers") or max(len(tracks_of(trace, tr.WORKER)) // gpus, 1)),
        synth_threads=int(config.get("synth_threads") or len(tracks_of(trace, tr.SYNTH)) or 1),
        lookahead=int(config.get(PROVER.lookahead_knob) or max(len(costs), 1)),
        lock_scope=str(config.get("lock_scope") or _infer_scope(trace)),
        memory_mode=str(config.get("memory_mode") or "unknown"),
        emulated=emulated, host_cores=host_cores, costs=costs,
        measured_per_min=done / (end - start) * 60e9 if end > start else 0.0,
        measured_done=done,
        gpus=gpus,
    )


def _phase_sums(
    trace: Trace, work: np.ndarray, raw: np.ndarray,
) -> tuple[dict[int, dict[str, float]], dict[int, dict[str, float]], dict[int, float]]:
    """Per partition, each phase's summed work and wall time, and the bytes it copied; a
    million spans are summed by array, not one by one."""
    spans, names = trace.spans, trace.strings.values
    index = np.flatnonzero((spans.partition >= 0) & ~device_mask(trace))
    if not len(index):
        return {}, {}, {}
    # Lock and barrier spans are called wait/hold: their label says which primitive.
    pair = spans.track[index].astype(np.int64) * len(names) + spans.name[index]
    pairs, pair_of = np.unique(pair, return_inverse=True)
    label_of_pair = []
    for code in pairs.tolist():
        kind, name = tr.parse(names[code // len(names)]).kind, names[code % len(names)]
        primitive = kind in (tr.MUTEX, tr.BARRIER)
        label_of_pair.append(f"{kind}_{name}" if primitive else name)  # mutex_hold, barrier_wait
    labels = sorted(set(label_of_pair))
    label = np.array([labels.index(x) for x in label_of_pair])[pair_of]
    partitions, row = np.unique(spans.partition[index], return_inverse=True)
    shape = (len(partitions), len(labels))
    sums_work, sums_raw, counts = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=np.int64)
    np.add.at(sums_work, (row, label), work[index])
    np.add.at(sums_raw, (row, label), raw[index])
    np.add.at(counts, (row, label), 1)
    per: dict[int, dict[str, float]] = {}
    per_raw: dict[int, dict[str, float]] = {}
    for k, p in enumerate(partitions.tolist()):
        present = np.flatnonzero(counts[k]).tolist()
        per[p] = {labels[j]: float(sums_work[k, j]) for j in present}
        per_raw[p] = {labels[j]: float(sums_raw[k, j]) for j in present}
    bytes_of: dict[int, float] = {}
    if "h2d_copy" in labels:
        copies = index[label == labels.index("h2d_copy")]
        for i in copies.tolist():
            p = int(spans.partition[i])
            bytes_of[p] = bytes_of.get(p, 0.0) + float((spans.attrs[i] or {}).get("bytes", 0) or 0)
    return per, per_raw, bytes_of


def _prep_delays(trace: Trace) -> dict[int, float]:
    """Per partition, the time from its pickup to the start of its prep phase (0 where either
    is missing, or the prep began first)."""
    inst, spans = trace.instants, trace.spans
    pickups = np.flatnonzero((inst.name == trace.string_id(PICKUP)) & (inst.partition >= 0))
    preps = np.flatnonzero(trace.span_mask(name=PROVER.prep.name) & (spans.partition >= 0))
    if not len(pickups) or not len(preps):
        return {}
    # The last pickup and the last prep of a partition, as mappings built in order would keep.
    picked = dict(zip(inst.partition[pickups].tolist(), inst.ts_ns[pickups].tolist(), strict=True))
    started = dict(zip(spans.partition[preps].tolist(), spans.start_ns[preps].tolist(), strict=True))
    return {p: float(max(started[p] - t, 0)) for p, t in picked.items() if p in started}


def _costs(partition: int, d: dict[str, float], raw: dict[str, float], copy_bytes: float,
           prep_delay: float = 0.0) -> PartitionCosts:
    """`d` holds each phase's work, `raw` its wall time: parents such as ntt_msm_h are not
    work themselves, so what they add beyond their children is taken from wall times."""
    copy = d.get("h2d_copy", 0.0)
    staging = d.get("staging_copy", 0.0)
    # Copies sit inside ntt_msm_h under a coarse lock and in `upload` before it otherwise.
    coarse = raw.get("upload", 0.0) == 0.0
    inside_raw = raw.get("h2d_copy", 0.0) + raw.get("staging_copy", 0.0) if coarse else 0.0
    parts = PROVER.phase(PROVER.lock.copy_inside).parts
    parts_raw = sum(raw.get(n, 0.0) for n in parts)
    between = max(raw.get("ntt_msm_h", 0.0) - inside_raw - parts_raw, 0.0)
    compute = sum(d.get(n, 0.0) for n in parts) + between
    lock_phases = sum(raw.get(n, 0.0) for n in LOCK_PHASES)
    hold = raw.get("mutex_hold", lock_phases)
    return PartitionCosts(
        partition=partition, synthesis_ns=d.get("synthesis", 0.0),
        checkout_ns=max(d.get("buffer_checkout", 0.0) - raw.get("pool_checkout", 0.0), 0.0),
        prep_ns=d.get("prep_msm", 0.0), copy_ns=copy, copy_bytes=copy_bytes, staging_ns=staging,
        compute_ns=compute, batch_add_ns=d.get("batch_add", 0.0), tail_msm_ns=d.get("tail_msm", 0.0),
        lock_other_ns=max(hold - lock_phases, 0.0), b_g2_msm_ns=d.get("b_g2_msm", 0.0),
        finish_ns=d.get("finish", 0.0), prep_delay_ns=prep_delay,
    )


def _infer_scope(trace: Trace) -> str:
    return "compute" if trace.span_mask(name="upload").any() else "coarse"


def _durations(trace: Trace, host_cores: float | None, cpu_names: tuple[str, ...]) -> np.ndarray:
    """Each span's length, or for host work on a shared host, its own work."""
    spans = trace.spans
    durations = (spans.end_ns - spans.start_ns).astype(np.float64)
    if host_cores is None:
        return durations
    ids = [trace.string_id(n) for n in cpu_names]
    cpu = np.isin(spans.name, [i for i in ids if i >= 0]) & ~device_mask(trace)
    if not cpu.any():
        return durations
    starts, ends = spans.start_ns[cpu], spans.end_ns[cpu]
    times = np.concatenate([starts, ends])
    order = np.argsort(times, kind="stable")
    steps = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])[order]
    times = times[order]
    running = np.cumsum(steps)[:-1]  # phases running between consecutive boundaries
    share = np.where(running > host_cores, host_cores / np.maximum(running, 1), 1.0)
    integral = np.concatenate([[0.0], np.cumsum(share * np.diff(times))])
    at_start = np.searchsorted(times, starts, side="left")
    at_end = np.searchsorted(times, ends, side="left")
    durations[cpu] = integral[at_end] - integral[at_start]
    return durations

