"""The detectors behind the verdict: each reads the analyses and returns a finding or None.

Thresholds are deliberately plain: a cause must account for a visible share of the run
(`cost`, the ranking key) before it is reported, and every sentence quotes the numbers that
made it fire.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from workbench.analysis.contention import HostContention
from workbench.analysis.copy_kinds import CopyKinds
from workbench.analysis.device_idle import DeviceIdle
from workbench.analysis.finding import Evidence, Finding
from workbench.analysis.idle import IdleCause, IdleReport
from workbench.analysis.lock_waits import LockWaits
from workbench.analysis.locks import BarrierReport, MutexReport
from workbench.analysis.phases import PhaseReport
from workbench.analysis.summary import RunSummary
from workbench.analysis.tracks import GPU_PHASES
from workbench.analysis.transfers import TransferReport
from workbench.analysis.units import UnitReport
from workbench.analysis.utilisation import GpuShare, GpuUtilisation, gpu_utilisation, steady_window_ns
from workbench.analysis.whatif import ZEROCOPY, Change, Prediction, WhatIf, WhatIfError
from workbench.model.roles import ROLES
from workbench.trace.container import Trace

SLOW_COPY = 0.5  # copies below this share of the reference rate are slow
COPY_UNDER_LOCK = 0.15  # share of the mutex hold that copies must take to matter
SERIALISED_HELD = 0.8
NOT_COMPUTE = 0.2
PREP_WAIT = 0.05
STARVED = 0.15
ASSEMBLY = 0.1
STAGING = 0.05
GPU_BOUND = 0.7
SWING = 2.0
SWING_CV = 0.25
SWING_INSTANCES = 5  # fewer instances than this make a swing anecdote, not a pattern
IMBALANCE = 0.25  # busy-share gap between the busiest and the idlest GPU
CONTENDED = 0.25  # overlapped copies this much slower than lone ones
CONTENDED_R = -0.3
CONTENDED_COPIES = 3  # fewer overlapped copies than this make an anecdote


@dataclass
class Context:
    trace: Trace
    summary: RunSummary
    utilisation: tuple[GpuUtilisation, ...]
    mutex: tuple[MutexReport, ...]
    barriers: tuple[BarrierReport, ...]
    phases: PhaseReport
    transfers: TransferReport | None
    idle: tuple[IdleReport, ...]
    whatif: WhatIf | None
    window_ms: float
    workers: int
    lock_scope: str
    failed_predictions: list[str] = field(default_factory=list)
    fired: set[str] = field(default_factory=set)
    # Several GPUs: the per-GPU contexts share one replay of the whole run, so a change they
    # all suggest is replayed once.
    memo: dict[str, Prediction] = field(default_factory=dict)
    gpu_shares: tuple[GpuShare, ...] = ()
    contention: HostContention | None = None
    # What any GPU program's trace shows (analysis/device_idle.py, copy_kinds.py, units.py,
    # lock_waits.py), and how many spans of each role it holds (what the detectors may ask for).
    roles: dict[str, int] = field(default_factory=dict)
    device: tuple[DeviceIdle, ...] = ()
    copies: CopyKinds | None = None
    units: UnitReport | None = None
    locks: LockWaits | None = None

    def predict(self, *changes: Change) -> tuple[Prediction, ...]:
        if self.whatif is None:
            return ()
        out = []
        for change in changes:
            key = change.describe()
            if key in self.memo:
                out.append(self.memo[key])
                continue
            try:
                self.memo[key] = self.whatif.predict(change)
                out.append(self.memo[key])
            except WhatIfError as err:
                self.failed_predictions.append(f"{key}: {err}")
        return tuple(out)

    @property
    def held_ms(self) -> float:
        return sum(m.holds.total_ms for m in self.mutex)

    @property
    def held_over_compute(self) -> float | None:
        return next((u.held_over_compute for u in self.utilisation if u.held_over_compute), None)

    def share(self, ms: float) -> float:
        return ms / self.window_ms if self.window_ms > 0 else 0.0


# A detector gives one finding, none, or (for causes found per device) several.
Detector = Callable[[Context], "Finding | list[Finding] | None"]


def _gain_sentence(predictions: tuple[Prediction, ...], what: str) -> str:
    best = max(predictions, key=lambda p: p.gain, default=None)
    if best is None:
        return ""
    if abs(best.gain) < 0.005:
        return f" {what} is predicted not to change throughput."
    verb = "raise" if best.gain > 0 else "lower"
    return f" {what} is predicted to {verb} throughput by {abs(best.gain):.0%}."


def _constant_phrase(ctx: Context, phases: tuple[str, ...]) -> str:
    constant = [prof for p in phases if (prof := ctx.phases.get(p)) is not None and prof.constant]
    if not constant:
        return ""
    names = " and ".join(prof.phase for prof in constant)
    figures = ", ".join(f"{prof.phase} ~{prof.durations.median_ms:.0f} ms" for prof in constant)
    verb = "stays" if len(constant) == 1 else "stay"
    return f" while {names} {verb} constant ({figures})"


def copy_bound(ctx: Context) -> Finding | None:
    tr = ctx.transfers
    held = ctx.held_ms
    if tr is None or tr.rates is None or held <= 0 or tr.under_lock_ms / held < COPY_UNDER_LOCK:
        return None
    reference = tr.link.gbps if tr.link else tr.rates.max
    share = tr.rates.median / reference
    if share >= SLOW_COPY:
        return None
    where = (f"a {reference:.0f} GB/s link" if tr.link else
             f"the {reference:.1f} GB/s of the run's fastest copy (no link speed known)")
    parts = []
    ntt = ctx.phases.get("ntt_msm_h")
    if ntt is not None and not ntt.constant and ntt.durations.swing >= 1.5:
        parts.append(
            f"ntt_msm_h swings {ntt.durations.swing:.1f}x ({ntt.durations.min_ms:.0f}-"
            f"{ntt.durations.max_ms:.0f} ms){_constant_phrase(ctx, ('batch_add', 'tail_msm'))}"
        )
    parts.append(
        f"its host-to-device copies run at {tr.rates.median:.1f} GB/s (median of {tr.rates.count}, "
        f"{tr.rates.min:.1f}-{tr.rates.max:.1f}) on {where}, {share:.0%} of it"
        + (" (emulated: host memcpys)" if tr.emulated else "")
    )
    if tr.synth_correlation is not None and tr.synth_correlation <= -0.3:
        parts.append(f"copies slow down as more synthesis threads run (r = {tr.synth_correlation:.2f})")
    if tr.host_load_threads:
        load = (f"host memory was loaded beside the run by {tr.host_load_threads} streaming threads"
                + (f" ({tr.host_load_gbps:.0f} GB/s moved, mean)" if tr.host_load_gbps else ""))
        if tr.load_correlation is not None and tr.load_correlation <= -0.3:
            load += f"; copies slow down as that load rises (r = {tr.load_correlation:.2f})"
        parts.append(load)
    ratio = ctx.held_over_compute
    if tr.hidden_staging_ms and tr.per_partition.total_ms:
        parts.append(f"{tr.hidden_staging_ms / tr.per_partition.total_ms:.0%} of the copy time is host "
                     "staging hidden inside pageable copies (device records)")
    if ratio is not None and ratio >= 1.3:
        parts.append(f"the mutex is held {ratio:.1f}x longer than the GPU computes")
    copy_ms = tr.per_partition.total_ms
    excess = tr.excess_ms if tr.excess_ms is not None else copy_ms * (1 - share)
    excess_under_lock = excess * (tr.under_lock_ms / copy_ms if copy_ms else 0.0)
    predictions = ctx.predict(ZEROCOPY) if tr.link else ()
    if ctx.lock_scope == "coarse":
        predictions += ctx.predict(Change(lock_scope="compute"))
    zerocopy = tuple(p for p in predictions if p.change == ZEROCOPY.describe())
    sentence = "; ".join(parts) + "." + _gain_sentence(zerocopy, "Zerocopy")
    spans = list(tr.slowest)
    if ntt is not None:
        spans += [ntt.slowest, ntt.fastest]
    return Finding(
        id="copy_bound", title="Slow host-to-device copies hold the GPU mutex", sentence=sentence,
        cost=ctx.share(excess_under_lock),
        numbers={"copy_gbps": tr.rates.median, "reference_gbps": reference, "link_share": share,
                 "copy_under_lock_share": tr.under_lock_ms / held,
                 "ntt_msm_h_swing": ntt.durations.swing if ntt else 0.0,
                 "held_over_compute": ratio or 0.0},
        evidence=Evidence.of(ctx.trace, spans),
        suggestion="Synthesise straight into pinned buffers (memory_mode=zerocopy) so a, b, c copy at "
                   "link speed; or copy before taking the mutex (lock_scope=compute).",
        predictions=predictions,
    )


def variable_lock_phase(ctx: Context) -> Finding | None:
    best: Finding | None = None
    for phase in ("ntt_msm_h", "batch_add", "tail_msm"):
        prof = ctx.phases.get(phase)
        if phase == "ntt_msm_h" and "copy_bound" in ctx.fired:
            continue  # the copy finding already tells this phase's story, with its cause
        if prof is None or prof.durations.count < SWING_INSTANCES:
            continue
        d = prof.durations
        if d.swing < SWING or d.cv < SWING_CV or (prof.hold_variance_share or 0.0) < 0.4:
            continue
        others = tuple(p for p in ("ntt_msm_h", "batch_add", "tail_msm") if p != phase)
        sentence = (
            f"{phase} swings {d.swing:.1f}x ({d.min_ms:.0f}-{d.max_ms:.0f} ms, CV {d.cv:.0%}) and "
            f"accounts for {prof.hold_variance_share:.0%} of the variation in how long the mutex is "
            f"held{_constant_phrase(ctx, others)}"
        )
        if prof.synth_correlation is not None and prof.synth_correlation >= 0.3:
            sentence += (f"; it runs longer when more synthesis threads run "
                         f"(r = {prof.synth_correlation:.2f}, "
                         f"{prof.mean_synth_active:.1f} running on average)")
        predictions = ctx.predict(Change(phase_at_fastest=phase))
        finding = Finding(
            id="variable_lock_phase", title=f"{phase} varies under the mutex while the kernels stay constant",
            sentence=sentence + "." + _gain_sentence(predictions, f"Every {phase} as fast as the fastest"),
            cost=ctx.share(d.total_ms - d.min_ms * d.count),
            numbers={"swing": d.swing, "cv": d.cv, "min_ms": d.min_ms, "max_ms": d.max_ms,
                     "hold_variance_share": prof.hold_variance_share or 0.0},
            evidence=Evidence.of(ctx.trace, (prof.slowest, prof.fastest)),
            suggestion=f"Break {phase} down (copy, NTT, MSM) to see which part varies: the kernels do "
                       "the same work every time, so the variation is waiting (in the production "
                       "case, the host-to-device copy contended by synthesis threads).",
            predictions=predictions,
        )
        if best is None or finding.cost > best.cost:
            best = finding
    return best


def lock_serialised(ctx: Context) -> Finding | None:
    if not ctx.mutex or ctx.workers < 2:
        return None
    m = ctx.mutex[0]
    ratio = ctx.held_over_compute
    if m.held_fraction < SERIALISED_HELD or ratio is None:
        return None
    held = m.holds.total_ms
    compute = held / ratio
    barrier = sum(b.gpu_cost_ms for b in ctx.barriers)
    copy = ctx.transfers.under_lock_ms if ctx.transfers else 0.0
    not_compute = max(held - compute - barrier, 0.0)
    if not_compute / held < NOT_COMPUTE:
        return None
    wait_share = m.waits.total_ms / (ctx.workers * ctx.window_ms) if ctx.window_ms else 0.0
    # Where that time sits: each lock phase less the GPU compute inside it (its compute parts;
    # a compute phase timed whole without its parts computes at most its fastest instance).
    from workbench.model.pipeline import COMPUTE, PROVER, WAIT

    outside: dict[str, float] = {}
    for name in PROVER.lock_phases:
        phase, prof = PROVER.phase(name), ctx.phases.get(name)
        if prof is None or phase.does == WAIT:
            continue  # barrier waits are prep_bound's
        d = prof.durations
        parts = [part.durations.total_ms for q in phase.parts if (part := ctx.phases.get(q)) is not None]
        if phase.does != COMPUTE:
            inside = 0.0
        elif not phase.parts:
            inside = d.total_ms
        else:
            inside = sum(parts) if parts else d.min_ms * d.count
        outside[name] = max(d.total_ms - inside, 0.0)
    carrier = max(outside, key=lambda n: outside[n], default=None)
    carrier_share = outside[carrier] / sum(outside.values()) if carrier and sum(outside.values()) else 0.0
    lead, title, numbers, spans = "", "The GPU mutex serialises work that is not GPU compute", {}, []
    if carrier is not None and carrier_share >= 0.5 and (prof := ctx.phases.get(carrier)) is not None:
        d = prof.durations
        title = f"{carrier} holds the GPU mutex with work that is not GPU compute"
        others = tuple(p for p in GPU_PHASES if p != carrier)
        lead = f"{carrier} carries {carrier_share:.0%} of the time under the mutex that is not GPU compute "
        if not prof.constant:
            lead += (f"and varies: it swings {d.swing:.1f}x ({d.min_ms:.0f}-{d.max_ms:.0f} ms, "
                     f"CV {d.cv:.0%}) and accounts for {prof.hold_variance_share or 0.0:.0%} of the "
                     f"variation in how long the mutex is held{_constant_phrase(ctx, others)}. ")
        else:
            lead += f"and stays constant (~{d.median_ms:.0f} ms a partition). "
        numbers = {"carrier_share": carrier_share, "carrier_swing": d.swing, "carrier_min_ms": d.min_ms,
                   "carrier_max_ms": d.max_ms, "carrier_hold_variance_share": prof.hold_variance_share or 0.0}
        spans = [prof.slowest, prof.fastest]
    sentence = lead + (
        f"The mutex is held {m.held_fraction:.0%} of the run and workers spend {wait_share:.0%} of their "
        f"time waiting for it; {not_compute / held:.0%} of the time it is held is not GPU compute"
        + (f" ({copy / held:.0%} copying a, b, c)" if copy > 0 else "")
        + f". Holds back to back allow {m.ceiling_per_min:.1f} partitions/min; the run reached "
        f"{m.achieved_per_min:.1f} ({m.ceiling_share:.0%} of that ceiling)."
    )
    changes = [Change(gpu_workers=ctx.workers + 1)]
    if ctx.lock_scope == "coarse" and copy > 0:
        changes.insert(0, Change(lock_scope="compute"))
    predictions = ctx.predict(*changes)
    scope = tuple(p for p in predictions if "lock scope" in p.change)
    copy_bound_excess = 0.0
    if ctx.transfers is not None and ctx.transfers.excess_ms is not None:
        copy_bound_excess = ctx.transfers.excess_ms
    return Finding(
        id="lock_serialised", title=title,
        sentence=sentence + _gain_sentence(scope, "Copying before the lock (lock_scope=compute)"),
        cost=ctx.share(max(not_compute - copy_bound_excess, 0.0)),
        numbers={"held_fraction": m.held_fraction, "wait_share": wait_share,
                 "not_compute_share": not_compute / held, "ceiling_per_min": m.ceiling_per_min,
                 "achieved_per_min": m.achieved_per_min, **numbers},
        evidence=Evidence.of(ctx.trace, spans + list(m.longest_waits + m.longest_holds)),
        suggestion="Take the copies out of the lock (lock_scope=compute) so one worker's copy overlaps "
                   "the other's kernels; more workers cannot beat the lock's ceiling.",
        predictions=predictions,
    )


def prep_bound(ctx: Context) -> Finding | None:
    if not ctx.barriers:
        return None
    waited = sum(b.gpu_cost_ms for b in ctx.barriers)
    rounds = sum(b.rounds for b in ctx.barriers)
    prep_last = sum(b.prep_last for b in ctx.barriers)
    if ctx.share(waited) < PREP_WAIT or prep_last < 0.3 * rounds:
        return None
    longest = max(b.gpu_waited.max_ms for b in ctx.barriers)
    prep = ctx.phases.get("prep_msm")
    ntt = ctx.phases.get("ntt_msm_h")
    held_share = waited / ctx.held_ms if ctx.held_ms else 0.0
    sentence = (
        f"The GPU thread waits at the barrier for prep_msm in {prep_last} of {rounds} rounds, "
        f"{waited:.0f} ms in all ({held_share:.0%} of the time the mutex is held"
        f", up to {longest:.0f} ms at once)"
    )
    if prep is not None and ntt is not None:
        sentence += (f": prep_msm takes {prep.durations.median_ms:.0f} ms (median, up to "
                     f"{prep.durations.max_ms:.0f}) against ntt_msm_h's {ntt.durations.median_ms:.0f} ms")
    predictions = ctx.predict(Change(prep_speedup=2.0))
    spans = [i for b in ctx.barriers for i in b.gpu_wait_spans]
    if prep is not None:
        spans.append(prep.slowest)
    return Finding(
        id="prep_bound", title="The GPU waits for prep_msm at the barrier, holding the mutex",
        sentence=sentence + "." + _gain_sentence(predictions, "prep_msm twice as fast"),
        cost=ctx.share(waited),
        numbers={"waited_ms": waited, "rounds": float(rounds), "prep_last": float(prep_last),
                 "held_share": held_share},
        evidence=Evidence.of(ctx.trace, spans),
        suggestion="Make prep_msm faster (more threads) or start it earlier; while the GPU thread waits "
                   "at the barrier the mutex is held and the GPU idles.",
        predictions=predictions,
    )


def _dominant_idle(ctx: Context, name: str, threshold: float) -> IdleCause | None:
    """The idle cause `name` on the GPU where it weighs most, when it reaches `threshold`."""
    if not ctx.idle:
        return None
    cause = max(ctx.idle, key=lambda r: r.share(name)).get(name)
    return cause if cause is not None and cause.share >= threshold else None


def synthesis_starved(ctx: Context) -> Finding | None:
    cause = _dominant_idle(ctx, "waiting_for_synthesis", STARVED)
    if cause is None:
        return None
    synth = ctx.phases.get("synthesis")
    threads = int(ctx.trace.config.get("synth_threads") or 0)
    sentence = f"The GPU idles {cause.share:.0%} of the run because no partition is ready"
    if synth is not None:
        sentence += (f": {threads or 'the'} synthesis threads take {synth.durations.median_ms:.0f} ms a "
                     f"partition (median)")
        if ctx.mutex:
            sentence += f" while a partition holds the mutex {ctx.mutex[0].holds.median_ms:.0f} ms"
    changes = [Change(synthesis_speedup=2.0)]
    if threads:
        changes.append(Change(synth_threads=threads * 2))
    predictions = ctx.predict(*changes)
    return Finding(
        id="synthesis_starved", title="The GPU waits for synthesis",
        sentence=sentence + "." + _gain_sentence(predictions, "Twice the synthesis rate"),
        cost=cause.share, numbers={"idle_share": cause.share},
        evidence=Evidence.of(ctx.trace, cause.evidence),
        suggestion="Add synthesis threads, make synthesis faster, or let it run further ahead "
                   "(synth_lookahead).",
        predictions=predictions,
    )


def workers_short(ctx: Context) -> Finding | None:
    cause = _dominant_idle(ctx, "proof_assembly", ASSEMBLY)
    if cause is None:
        return None
    after = [f"{p} {prof.durations.median_ms:.0f} ms" for p in ("b_g2_msm", "finish")
             if (prof := ctx.phases.get(p)) is not None]
    who = "the only GPU worker runs" if ctx.workers == 1 else f"all {ctx.workers} GPU workers run"
    predictions = ctx.predict(Change(gpu_workers=ctx.workers + 1))
    return Finding(
        id="workers_short", title="The GPU idles while every worker assembles proofs",
        sentence=f"The GPU idles {cause.share:.0%} of the run while {who} b_g2_msm and finish after "
                 f"releasing the mutex ({', '.join(after)} a partition)."
                 + _gain_sentence(predictions, f"{ctx.workers + 1} GPU workers"),
        cost=cause.share, numbers={"idle_share": cause.share, "workers": float(ctx.workers)},
        evidence=Evidence.of(ctx.trace, cause.evidence),
        suggestion="Add a GPU worker so that another partition's GPU work overlaps this CPU work.",
        predictions=predictions,
    )


def staging(ctx: Context) -> Finding | None:
    tr = ctx.transfers
    if tr is None:
        return None
    # Under contention the hidden staging is the slow part of the copy: the copy finding
    # already counts that time.
    hidden = 0.0 if "copy_bound" in ctx.fired else tr.hidden_staging_ms or 0.0
    total = tr.staging_ms + hidden
    if ctx.share(total) < STAGING:
        return None
    predictions = ctx.predict(ZEROCOPY) if tr.link else ()
    return Finding(
        id="staging", title="Copies are staged through pinned buffers on the host",
        sentence=f"Copies spend {total:.0f} ms ({ctx.share(total):.0%} of the run) copying a, b, c into "
                 f"pinned buffers first: {tr.staging_ms:.0f} ms in explicit staging, {hidden:.0f} ms hidden "
                 "inside pageable copies." + _gain_sentence(predictions, "Zerocopy"),
        cost=ctx.share(total), numbers={"staging_ms": tr.staging_ms, "hidden_staging_ms": hidden},
        evidence=Evidence.of(ctx.trace, tr.slowest),
        suggestion="Let synthesis write into pinned buffers (memory_mode=zerocopy) so nothing is staged.",
        predictions=predictions,
    )


def gpu_bound(ctx: Context) -> Finding | None:
    if not ctx.utilisation:
        return None
    u = ctx.utilisation[0]
    busy = u.kernel_busy if u.kernel_busy is not None else u.host_timed_compute
    if busy is None or busy < GPU_BOUND:
        return None
    basis = "device kernels" if u.kernel_busy is not None else u.compute_source
    predictions = ctx.predict(Change(compute_speedup=2.0))
    held = f"; the mutex is held {u.mutex_held:.0%}" if u.mutex_held is not None else ""
    numbers = {"busy": busy}
    steady = ""
    window = steady_window_ns(ctx.trace, u.gpu)
    if window is not None:
        s = gpu_utilisation(ctx.trace, u.gpu, *window)
        s_busy = s.kernel_busy if s.kernel_busy is not None else s.host_timed_compute
        if s_busy is not None:
            numbers["steady_busy"] = s_busy
            steady = f", {s_busy:.0%} in steady state"
            if s.mutex_held is not None:
                steady += f" (mutex held {s.mutex_held:.0%} of it)"
    return Finding(
        id="gpu_bound", title="GPU-bound: the host keeps the GPU busy",
        sentence=f"The GPU computes {busy:.0%} of the run ({basis}){steady}{held}."
                 + _bounding_phase(ctx) + _gain_sentence(predictions, "Kernels twice as fast"),
        cost=busy, numbers=numbers,
        evidence=Evidence.of(ctx.trace, ()),
        suggestion="Only faster kernels (or more GPUs) raise throughput from here.",
        predictions=predictions,
    )


def _bounding_phase(ctx: Context) -> str:
    """Which GPU phase bounds a GPU-bound run: the largest share of the median mutex hold."""
    if not ctx.mutex:
        return ""
    hold = ctx.mutex[0].holds.median_ms
    parts = [(p.durations.median_ms, p.phase) for name in GPU_PHASES
             if (p := ctx.phases.get(name)) is not None]
    if not parts or hold <= 0:
        return ""
    parts.sort(reverse=True)
    listed = ", ".join(f"{name} {ms:.0f} ms" for ms, name in parts)
    return (f" The run is bounded by the mutex holds, {hold:.0f} ms a partition (median): {listed}; "
            f"{parts[0][1]} is the largest, {parts[0][0] / hold:.0%} of a hold.")


def gpu_imbalance(ctx: Context) -> Finding | None:
    """One GPU idles while another is saturated: the run is only as fast as its busy GPU."""
    busy = [s for s in ctx.gpu_shares if s.busy is not None]
    if len(busy) < 2:
        return None
    top = max(busy, key=lambda s: s.busy or 0.0)
    low = min(busy, key=lambda s: s.busy or 0.0)
    top_busy, low_busy = top.busy or 0.0, low.busy or 0.0
    if top_busy - low_busy < IMBALANCE:
        return None
    sentence = (
        f"GPU {low.gpu} computes {low_busy:.0%} of the run against GPU {top.gpu}'s {top_busy:.0%} "
        f"({low.partitions} partitions against {top.partitions}; {low.throughput_per_min:.1f} against "
        f"{top.throughput_per_min:.1f} partitions/min)"
    )
    report = next((r for r in ctx.idle if r.gpu == low.gpu), None)
    cause = report.causes[0] if report is not None and report.causes else None
    if cause is not None:
        sentence += f"; GPU {low.gpu} idles mostly for {cause.label} ({cause.share:.0%} of the run)"
    return Finding(
        id="gpu_imbalance", title=f"GPU {low.gpu} idles while GPU {top.gpu} is saturated",
        sentence=sentence + ".",
        # Capacity the idler GPUs leave unused, as a share of all GPUs' time.
        cost=sum(top_busy - (s.busy or 0.0) for s in busy) / len(busy),
        numbers={"busiest_gpu": float(top.gpu), "idlest_gpu": float(low.gpu), "busiest_busy": top_busy,
                 "idlest_busy": low_busy, "busiest_partitions": float(top.partitions),
                 "idlest_partitions": float(low.partitions)},
        evidence=Evidence.of(ctx.trace, cause.evidence if cause is not None else ()),
        suggestion=f"Look at why GPU {low.gpu}'s workers have nothing to do (its findings and idle causes): "
                   "partitions go to whichever GPU's workers are free first, so an idle GPU means its "
                   "workers are stuck elsewhere or its device is slower.",
    )


def host_contention(ctx: Context) -> Finding | None:
    """Copies to different GPUs slow each other down through host memory."""
    c = ctx.contention
    if c is None or c.overlapping < CONTENDED_COPIES or c.alone_gbps is None or c.concurrent_gbps is None:
        return None
    slowdown = c.slowdown or 0.0
    r = c.other_gpu_correlation
    if slowdown < CONTENDED and not (r is not None and r <= CONTENDED_R and slowdown > 0):
        return None
    pageable = sum(g.pageable for g in c.per_gpu)
    sentence = (
        f"{c.overlapping} of {len(c.copies)} host-to-device copies ran while another GPU copied"
        + (f" (pageable copies on two GPUs at once for {c.pageable_overlap_ms:.0f} ms)" if pageable else "")
        + f"; those run at {c.concurrent_gbps:.1f} GB/s (median) against {c.alone_gbps:.1f} GB/s alone, "
        f"{slowdown:.0%} slower"
    )
    if r is not None:
        sentence += f" (r = {r:.2f} against copies running on other GPUs"
        if c.synth_correlation is not None:
            sentence += f", {c.synth_correlation:.2f} against synthesis threads running"
        sentence += ")"
    if c.synth_correlation is not None and r is not None and c.synth_correlation < r:
        sentence += "; synthesis threads explain the slowdown at least as well as the other GPUs' copies"
    worst = max(c.per_gpu, key=lambda g: g.overlapping)
    predictions = ctx.predict(ZEROCOPY) if pageable and ctx.transfers and ctx.transfers.link else ()
    return Finding(
        id="host_contention", title="Copies to different GPUs contend for host memory",
        sentence=sentence + "." + _gain_sentence(predictions, "Zerocopy"),
        cost=ctx.share(c.excess_ms) / len(c.gpus),
        numbers={"overlapping": float(c.overlapping), "alone_gbps": c.alone_gbps,
                 "concurrent_gbps": c.concurrent_gbps, "slowdown": slowdown,
                 "other_gpu_correlation": r if r is not None else 0.0,
                 "synth_correlation": c.synth_correlation if c.synth_correlation is not None else 0.0,
                 "pageable_overlap_ms": c.pageable_overlap_ms, "excess_ms": c.excess_ms,
                 "most_overlapped_gpu": float(worst.gpu)},
        evidence=Evidence.of(ctx.trace, c.slowest),
        suggestion="Copy from pinned memory (memory_mode=zerocopy): pinned copies are DMA reads with no "
                   "host memcpy of their own to compete with the other GPUs' staging and with synthesis.",
        predictions=predictions,
    )


@dataclass(frozen=True)
class Registered:
    """A detector with the roles it needs: it runs only on traces that have them, and a trace
    without them gets a note that names what is absent instead of a finding about it."""

    detect: Detector
    about: str  # what it judges, in words a trace without its roles can read
    needs: tuple[str, ...] = ()  # every one of these roles
    any_of: tuple[str, ...] = ()  # at least one of these
    # Skipped, without a note, when the trace has any of these: another detector reads them better.
    without: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.needs + self.any_of + self.without) - set(ROLES))
        if unknown:
            raise ValueError(f"{self.detect.__name__}: no such role {', '.join(unknown)} (model/roles.py)")

    @property
    def id(self) -> str:
        return self.detect.__name__

    def findings(self, ctx: Context) -> list[Finding]:
        """What it finds on `ctx`, as a list whatever the detector returns."""
        result = self.detect(ctx)
        if result is None:
            return []
        return result if isinstance(result, list) else [result]

    def absent(self, roles: Mapping[str, int]) -> tuple[str, ...]:
        """The roles it needs that the trace lacks (empty: it can run)."""
        lacking = tuple(r for r in self.needs if not roles.get(r))
        if self.any_of and not any(roles.get(r) for r in self.any_of):
            lacking += self.any_of
        return lacking

    def superseded(self, roles: Mapping[str, int]) -> bool:
        return any(roles.get(r) for r in self.without)


def runnable(detectors: tuple[Registered, ...], roles: Mapping[str, int]
             ) -> tuple[tuple[Registered, ...], dict[tuple[str, ...], list[str]]]:
    """The detectors a trace with these roles can feed, and the others grouped by what they lack."""
    run: list[Registered] = []
    skipped: dict[tuple[str, ...], list[str]] = {}
    for d in detectors:
        if d.superseded(roles):
            continue
        lacking = d.absent(roles)
        if lacking:
            skipped.setdefault(lacking, []).append(d.about)
        else:
            run.append(d)
    return tuple(run), skipped


# The pipeline's own findings: they read a consumer thread's spans, its lock and its barrier.
PIPELINE = ("consumer",)
LOCKED = ("consumer", "lock_hold")
DETECTORS: tuple[Registered, ...] = (
    Registered(copy_bound, "slow copies while a GPU lock is held", needs=LOCKED),
    Registered(variable_lock_phase, "a step under a GPU lock that varies", needs=LOCKED),
    Registered(lock_serialised, "a GPU lock held for work that is not GPU compute", needs=LOCKED),
    Registered(prep_bound, "the GPU thread waiting at a barrier for preparation work",
               needs=(*PIPELINE, "barrier_wait")),
    Registered(synthesis_starved, "the GPU starved by its producers", needs=(*PIPELINE, "producer")),
    Registered(workers_short, "the GPU idle while every consumer thread does host work", needs=PIPELINE),
    Registered(staging, "copies staged through pinned host buffers", needs=PIPELINE),
)
BOUND = Registered(gpu_bound, "a GPU kept busy", any_of=("kernel", "consumer"))
# Whole-run detectors for runs on several GPUs; the detectors above run once per GPU.
RUN_DETECTORS: tuple[Registered, ...] = (
    Registered(gpu_imbalance, "one GPU idle while another is saturated", needs=PIPELINE),
    Registered(host_contention, "copies to different GPUs contending for host memory", needs=PIPELINE),
)
