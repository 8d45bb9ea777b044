"""The verdict: what holds the GPU back, by how much, and what to change.

Runs every analysis, lets each detector (analysis/detectors.py) make its claim, and ranks
the claims by the share of the run they account for. A GPU-bound run (nothing to fix on
the host) is reported after real problems but before minor ones, so a clean run's verdict
says so first.

Several GPUs: the detectors run once per GPU, each on the part of the trace that GPU's
workers, mutex and devices recorded (synthesis and the run's own records are shared), and
their findings carry the GPU in id, title and sentence. A per-GPU finding's cost is that
GPU's share divided by the number of GPUs, so it ranks against whole-run findings (GPU
imbalance, host memory contention between GPUs) on the same scale: the share of all GPUs'
time. Predictions replay the whole run, since every knob applies to every GPU.

Contract: `diagnose(trace, options) -> Verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from workbench.analysis.contention import HostContention, host_contention
from workbench.analysis.copy_kinds import CopyKinds, copy_kinds
from workbench.analysis.detectors import BOUND, DETECTORS, RUN_DETECTORS, Context, Registered, runnable
from workbench.analysis.device_idle import DeviceIdle, device_idle
from workbench.analysis.finding import Finding
from workbench.analysis.idle import IdleReport, idle_report
from workbench.analysis.lock_waits import LockWaits, lock_waits
from workbench.analysis.locks import BarrierReport, MutexReport, barrier_reports, mutex_reports
from workbench.analysis.phases import PhaseReport, phase_report
from workbench.analysis.program_findings import IDLE, PROGRAM_DETECTORS, headline
from workbench.analysis.summary import RunSummary, run_window_ns, summarize
from workbench.analysis.tracks import worker_ids
from workbench.analysis.transfers import TransferReport, transfer_report
from workbench.analysis.units import UnitReport, unit_report
from workbench.analysis.utilisation import GpuShare, GpuUtilisation, gpu_shares, utilisation, worker_gpus
from workbench.analysis.whatif import WhatIf, WhatIfError, WhatIfOptions
from workbench.model.roles import role_counts
from workbench.model.tracks import parse as parse_track
from workbench.trace.container import CounterTable, InstantTable, SpanTable, Trace

MINOR = 0.05  # findings accounting for less of the run than this rank after the rest
# The pipeline model replays a trace that has these roles (model/pipeline.py); others get no what-if.
REPLAYABLE = ("consumer", "lock_hold")


@dataclass(frozen=True)
class DiagnoseOptions:
    link_gbps: float | None = None  # host-to-device link speed, when the trace cannot measure it
    copy_bytes: float | None = None  # bytes a partition copies, for logs that record times only
    host_cores: float | None = None  # for the replay; None: from the backend (see whatif)
    whatif: bool = True  # predict what each suggested change would do


@dataclass(frozen=True)
class Verdict:
    headline: str
    findings: tuple[Finding, ...]
    summary: RunSummary
    utilisation: tuple[GpuUtilisation, ...]
    mutex: tuple[MutexReport, ...]
    barriers: tuple[BarrierReport, ...]
    phases: PhaseReport
    transfers: TransferReport | None
    idle: tuple[IdleReport, ...]
    replay_error: float | None  # how far the unchanged replay is from the measured throughput
    notes: tuple[str, ...]  # what limits the verdict: emulated memory, reconstructed times, ...
    gpus: tuple[GpuShare, ...] = ()  # each GPU's partitions, throughput and busy share
    contention: HostContention | None = None  # copies to different GPUs (None: one GPU)
    roles: dict[str, int] = field(default_factory=dict)  # spans of each role the trace holds
    device: tuple[DeviceIdle, ...] = ()  # what each GPU waited for (any GPU program)
    copies: CopyKinds | None = None  # device copies by direction and memory kind
    units: UnitReport | None = None  # a repeated unit of work, constant against variable
    locks: LockWaits | None = None  # lock, condition and barrier waits on host threads

    @property
    def pipeline(self) -> bool:
        """Whether the trace holds a pipeline's consumer threads (our runs, cuzk logs)."""
        return bool(self.roles.get("consumer"))

    def get(self, finding_id: str) -> Finding | None:
        """The finding with this id; on several GPUs a bare id ("copy_bound") also finds the
        first GPU's ("copy_bound/gpu1")."""
        exact = next((f for f in self.findings if f.id == finding_id), None)
        if exact is not None:
            return exact
        return next((f for f in self.findings if f.id.startswith(f"{finding_id}/gpu")), None)

    def on_gpu(self, finding_id: str, gpu: int) -> Finding | None:
        wanted = f"{finding_id}/gpu{gpu}"
        return next((f for f in self.findings if f.id == wanted), None)

    @property
    def multi_gpu(self) -> bool:
        return len(self.gpus) > 1

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(f.id for f in self.findings)


def diagnose(trace: Trace, options: DiagnoseOptions | None = None) -> Verdict:
    options = options or DiagnoseOptions()
    roles = role_counts(trace)
    transfers = transfer_report(trace, options.link_gbps, options.copy_bytes)
    link = transfers.link.gbps if transfers and transfers.link else options.link_gbps
    whatif = None
    notes = list(_notes(trace))
    lacking = [r for r in REPLAYABLE if not roles.get(r)]
    if options.whatif and lacking:
        notes.append(f"no what-if predictions: the pipeline replay needs spans of role "
                     f"{' and '.join(REPLAYABLE)}; the trace has none of role {', '.join(lacking)}")
    elif options.whatif:
        try:
            whatif = WhatIf(trace, WhatIfOptions(link, options.copy_bytes, options.host_cores))
            _ = whatif.baseline_per_min
        except WhatIfError as err:
            notes.append(f"no what-if predictions: {err}")
            whatif = None
    if whatif is not None:
        if whatif.shape.host_cores is not None and options.host_cores is None:
            notes.append(f"what-if: the CPU backend's phases mostly hold the interpreter lock, so the "
                         f"replay gives them {whatif.shape.host_cores:g} cores between them")
        if not any(c.synthesis_ns for c in whatif.shape.costs):
            notes.append("what-if: no synthesis times recorded, so the replay has partitions always ready")
    start, end = run_window_ns(trace)
    ctx = _context(trace, transfers, whatif, end - start, roles, options)
    pipeline = bool(roles.get("consumer"))
    ctx.gpu_shares = gpu_shares(trace, ctx.utilisation) if pipeline else ()
    if len(ctx.gpu_shares) > 1:
        return _diagnose_gpus(trace, options, ctx, notes)
    findings = _run_detectors(ctx, notes)
    notes.extend(f"prediction skipped ({reason})" for reason in ctx.failed_predictions)
    idle = ctx.idle if pipeline else tuple(d.report() for d in ctx.device)
    if not pipeline:
        unjudged = dict.fromkeys(reason for d in ctx.device for reason in d.not_judged)
        if unjudged:
            notes.append(f"GPU idle causes not judged: {'; '.join(unjudged)}")
    return Verdict(
        headline=_headline(findings, ctx), findings=findings, summary=ctx.summary,
        utilisation=ctx.utilisation, mutex=ctx.mutex, barriers=ctx.barriers, phases=ctx.phases,
        transfers=transfers, idle=idle, replay_error=_replay_error(whatif), notes=tuple(notes),
        gpus=ctx.gpu_shares, roles=roles, device=ctx.device, copies=ctx.copies, units=ctx.units,
        locks=ctx.locks,
    )


def _context(
    trace: Trace, transfers: TransferReport | None, whatif: WhatIf | None, window_ns: int,
    roles: dict[str, int], options: DiagnoseOptions,
) -> Context:
    workers = int(trace.config.get("gpu_workers") or len(worker_ids(trace)) or 1)
    scope = str(trace.config.get("lock_scope") or ("compute" if trace.span_mask(name="upload").any()
                                                   else "coarse"))
    return Context(
        trace=trace, summary=summarize(trace), utilisation=utilisation(trace),
        mutex=mutex_reports(trace), barriers=barrier_reports(trace), phases=phase_report(trace),
        transfers=transfers, idle=idle_report(trace), whatif=whatif,
        window_ms=window_ns / 1e6, workers=workers, lock_scope=scope, roles=roles,
        device=device_idle(trace), copies=copy_kinds(trace, options.link_gbps), units=unit_report(trace),
        locks=lock_waits(trace),
    )


ALL_DETECTORS: tuple[Registered, ...] = (*DETECTORS, *PROGRAM_DETECTORS)


def _run_detectors(ctx: Context, notes: list[str]) -> tuple[Finding, ...]:
    found: list[Finding] = []
    run, skipped = runnable((*ALL_DETECTORS, IDLE, BOUND), ctx.roles)
    notes.extend(_skip_notes(skipped))
    for registered in run:
        if registered is BOUND:
            continue
        for finding in registered.findings(ctx):
            found.append(finding)
            ctx.fired.add(finding.id)
    return _rank(found, BOUND.findings(ctx) if BOUND in run else [])


def _skip_notes(skipped: dict[tuple[str, ...], list[str]]) -> list[str]:
    """A note per group of skipped detectors that lack a role in common, naming the absent
    roles and what could not be judged."""
    groups: list[tuple[list[str], list[str]]] = []
    for lacking, about in skipped.items():
        group = next((g for g in groups if set(g[0]) & set(lacking)), None)
        if group is None:
            groups.append((list(lacking), list(about)))
        else:
            group[0].extend(r for r in lacking if r not in group[0])
            group[1].extend(about)
    return [f"not judged (the trace has no spans of role {', '.join(lacking)}): {'; '.join(about)}"
            for lacking, about in groups]


def _rank(found: list[Finding], bound: list[Finding]) -> tuple[Finding, ...]:
    major = sorted((f for f in found if f.cost >= MINOR), key=lambda f: -f.cost)
    minor = sorted((f for f in found if f.cost < MINOR), key=lambda f: -f.cost)
    return tuple(major + sorted(bound, key=lambda f: -f.cost) + minor)


def _replay_error(whatif: WhatIf | None) -> float | None:
    if whatif is not None and whatif.shape.measured_per_min:
        return whatif.baseline_per_min / whatif.shape.measured_per_min - 1
    return None


def _diagnose_gpus(trace: Trace, options: DiagnoseOptions, run: Context, notes: list[str]) -> Verdict:
    run.contention = host_contention(trace, options.copy_bytes)
    owner = worker_gpus(trace)
    n = len(run.gpu_shares)
    found: list[Finding] = []
    bound: list[Finding] = []
    failed = list(run.failed_predictions)
    for share in run.gpu_shares:
        sub, index = gpu_trace(trace, share.gpu, owner)
        sub_transfers = transfer_report(sub, options.link_gbps, options.copy_bytes)
        ctx = _context(sub, sub_transfers, run.whatif, int(run.window_ms * 1e6), role_counts(sub), options)
        ctx.memo = run.memo
        per_gpu, _ = runnable(DETECTORS, ctx.roles)
        for registered in per_gpu:
            for finding in registered.findings(ctx):
                found.append(_on_gpu(finding, share.gpu, n, index))
                ctx.fired.add(finding.id)
        if not BOUND.absent(ctx.roles):
            bound.extend(_on_gpu(b, share.gpu, n, index) for b in BOUND.findings(ctx))
        failed += ctx.failed_predictions
    whole_run, skipped = runnable(RUN_DETECTORS, run.roles)
    notes.extend(_skip_notes(skipped))
    for registered in whole_run:
        found.extend(registered.findings(run))
    failed += run.failed_predictions
    findings = _rank(found, bound)
    notes.append(f"{n} GPUs: findings about one GPU name it; their cost is a share of all {n} GPUs' time; "
                 "predictions replay the whole run")
    notes.extend(f"prediction skipped ({reason})" for reason in dict.fromkeys(failed))
    return Verdict(
        headline=_headline(findings, run), findings=findings, summary=run.summary,
        utilisation=run.utilisation, mutex=run.mutex, barriers=run.barriers, phases=run.phases,
        transfers=run.transfers, idle=run.idle, replay_error=_replay_error(run.whatif), notes=tuple(notes),
        gpus=run.gpu_shares, contention=run.contention, roles=run.roles, device=run.device, copies=run.copies,
        units=run.units, locks=run.locks,
    )


def _on_gpu(finding: Finding, gpu: int, gpus: int, index: np.ndarray) -> Finding:
    spans = tuple(int(index[i]) for i in finding.evidence.spans)
    return replace(
        finding, id=f"{finding.id}/gpu{gpu}", title=f"GPU {gpu}: {finding.title}",
        sentence=_gpu_prefix(gpu) + _lower_first(finding.sentence), cost=finding.cost / gpus,
        numbers={**finding.numbers, "gpu": float(gpu), "gpu_cost": finding.cost},
        evidence=replace(finding.evidence, spans=spans),
    )


def _gpu_prefix(gpu: int) -> str:
    return f"On GPU {gpu}, "


def _lower_first(text: str) -> str:
    # "The GPU idles" reads "on GPU 1, the GPU idles"; an acronym or a phase name stays as is.
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        return text[0].lower() + text[1:]
    return text


def gpu_trace(trace: Trace, gpu: int, owner: dict[int, int] | None = None) -> tuple[Trace, np.ndarray]:
    """The part of a trace one GPU recorded: its workers' threads, barriers, mutex, device
    and counter tracks, with everything no GPU owns (synthesis, the queue, the run). Returns
    it with the index of each of its spans in the whole trace."""
    owner = worker_gpus(trace) if owner is None else owner
    keep = np.ones(len(trace.strings.values), dtype=bool)
    for i, track in enumerate(trace.strings.values):
        parsed = parse_track(track)  # a GPU's own tracks, and its workers' threads and barriers
        if parsed.gpu >= 0:
            keep[i] = parsed.gpu == gpu
        elif parsed.worker in owner:
            keep[i] = owner[parsed.worker] == gpu
    s, t, c = trace.spans, trace.instants, trace.counters
    index = np.flatnonzero(keep[s.track]) if len(s) else np.zeros(0, np.int64)
    at = np.flatnonzero(keep[t.track]) if len(t) else np.zeros(0, np.int64)
    ct = np.flatnonzero(keep[c.track]) if len(c) else np.zeros(0, np.int64)
    spans = SpanTable(s.track[index], s.name[index], s.start_ns[index], s.end_ns[index],
                      s.partition[index], s.worker[index], [s.attrs[i] for i in index.tolist()])
    instants = InstantTable(t.track[at], t.name[at], t.ts_ns[at], t.partition[at], t.worker[at],
                            [t.attrs[i] for i in at.tolist()])
    counters = CounterTable(c.track[ct], c.name[ct], c.ts_ns[ct], c.value[ct])
    mine = {str(w): g for w, g in owner.items() if g == gpu}
    meta = {**trace.meta, "gpus": 1, "worker_gpu": mine}
    config = {**trace.config, "gpus": 1}
    return Trace(trace.strings, spans, instants, counters, config, meta, dict(trace.thread_names)), index


def _headline(findings: tuple[Finding, ...], ctx: Context) -> str:
    if not ctx.roles.get("consumer"):
        # Any GPU program: what its GPU waited for, whatever finding ranks first.
        said = headline(ctx)
        if said is not None:
            return said
        if not findings:
            held = ", ".join(f"{n} {role}" for role, n in ctx.roles.items())
            held = f"spans by role: {held}" if held else "no spans"
            return f"No GPU kernels in the trace ({held}): nothing to say about what a GPU waited for."
    if findings:
        top = findings[0]
        gpu = top.numbers.get("gpu")
        sentence = top.sentence
        if gpu is not None and top.id.endswith(f"/gpu{int(gpu)}"):
            # The title already names the GPU.
            sentence = sentence.removeprefix(_gpu_prefix(int(gpu)))
            sentence = sentence[:1].upper() + sentence[1:]
        return f"{top.title}: {sentence}"
    if not ctx.summary.partitions_done:
        return "No partition finished: nothing to judge."
    return "No bottleneck stands out: no cause accounts for a visible share of the run."


# From this many synthesis threads in one interpreter its lock can set their pace (on the H200
# host 14 threads took 44.7 s a 2^22 partition with the default switch interval; see
# pipeline/synth_processes.py).
SHARED_LOCK_THREADS = 4


def _notes(trace: Trace) -> list[str]:
    notes = []
    if trace.meta.get("memory_emulated"):
        notes.append("memory is emulated (CPU backend): copies are host memcpys, not transfers over a link")
    imported = trace.meta.get("import")
    if isinstance(imported, dict):
        fmt = imported.get("format", "an import")
        skipped = imported.get("skipped") or {}
        if skipped:
            counts = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
            notes.append(f"imported from {fmt}; skipped: {counts}")
        else:
            notes.append(f"imported from {fmt}")
        if imported.get("reconstructed"):
            notes.append(f"times reconstructed from durations: {imported['reconstructed']}")
        for missing in imported.get("missing", ()):
            notes.append(f"missing from the export: {missing}")
    outcome, error = trace.meta.get("outcome"), trace.meta.get("error")
    # "unknown" is an importer saying it cannot tell (a foreign trace records no outcome), not a failure.
    if outcome not in (None, "completed", "unknown"):
        notes.append(f"the run did not complete ({outcome})" + (f": {error}" if error else ""))
    threads = trace.config.get("synth_threads")
    in_threads = trace.config.get("synthesis") == "threads"
    if in_threads and isinstance(threads, int) and threads >= SHARED_LOCK_THREADS:
        notes.append(f"synthesis ran in {threads} threads of one interpreter, which take turns on its lock: "
                     "their speed depends on what else the interpreter runs, which native threads' does not; "
                     "synthesis=processes runs each in a process of its own")
    return notes
