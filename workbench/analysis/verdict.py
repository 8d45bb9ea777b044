"""The verdict: what holds the GPU back, by how much, and what to change.

Runs every analysis, lets each detector (analysis/detectors.py) make its claim, and ranks
the claims by the share of the run they account for. A GPU-bound run (nothing to fix on
the host) is reported after real problems but before minor ones, so a clean run's verdict
says so first.

Contract: `diagnose(trace, options) -> Verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.analysis.detectors import DETECTORS, Context, gpu_bound
from workbench.analysis.finding import Finding
from workbench.analysis.idle import IdleReport, idle_report
from workbench.analysis.locks import BarrierReport, MutexReport, barrier_reports, mutex_reports
from workbench.analysis.phases import PhaseReport, phase_report
from workbench.analysis.summary import RunSummary, run_window_ns, summarize
from workbench.analysis.tracks import worker_ids
from workbench.analysis.transfers import TransferReport, transfer_report
from workbench.analysis.utilisation import GpuUtilisation, utilisation
from workbench.analysis.whatif import WhatIf, WhatIfError, WhatIfOptions
from workbench.trace.container import Trace

MINOR = 0.05  # findings accounting for less of the run than this rank after the rest


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

    def get(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(f.id for f in self.findings)


def diagnose(trace: Trace, options: DiagnoseOptions | None = None) -> Verdict:
    options = options or DiagnoseOptions()
    transfers = transfer_report(trace, options.link_gbps, options.copy_bytes)
    link = transfers.link.gbps if transfers and transfers.link else options.link_gbps
    whatif = None
    notes = list(_notes(trace))
    if options.whatif:
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
    workers = int(trace.config.get("gpu_workers") or len(worker_ids(trace)) or 1)
    scope = str(trace.config.get("lock_scope") or ("compute" if trace.span_mask(name="upload").any()
                                                   else "coarse"))
    ctx = Context(
        trace=trace, summary=summarize(trace), utilisation=utilisation(trace),
        mutex=mutex_reports(trace), barriers=barrier_reports(trace), phases=phase_report(trace),
        transfers=transfers, idle=idle_report(trace), whatif=whatif,
        window_ms=(end - start) / 1e6, workers=workers, lock_scope=scope,
    )
    found: list[Finding] = []
    for detector in DETECTORS:
        finding = detector(ctx)
        if finding is not None:
            found.append(finding)
            ctx.fired.add(finding.id)
    major = sorted((f for f in found if f.cost >= MINOR), key=lambda f: -f.cost)
    minor = sorted((f for f in found if f.cost < MINOR), key=lambda f: -f.cost)
    bound = gpu_bound(ctx)
    findings = tuple(major + ([bound] if bound else []) + minor)
    notes.extend(f"prediction skipped ({reason})" for reason in ctx.failed_predictions)
    replay_error = None
    if whatif is not None and whatif.shape.measured_per_min:
        replay_error = whatif.baseline_per_min / whatif.shape.measured_per_min - 1
    return Verdict(
        headline=_headline(findings, ctx), findings=findings, summary=ctx.summary,
        utilisation=ctx.utilisation, mutex=ctx.mutex, barriers=ctx.barriers, phases=ctx.phases,
        transfers=transfers, idle=ctx.idle, replay_error=replay_error, notes=tuple(notes),
    )


def _headline(findings: tuple[Finding, ...], ctx: Context) -> str:
    if findings:
        return f"{findings[0].title}: {findings[0].sentence}"
    if not ctx.summary.partitions_done:
        return "No partition finished: nothing to judge."
    return "No bottleneck stands out: no cause accounts for a visible share of the run."


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
    if trace.meta.get("outcome") not in (None, "completed"):
        notes.append(f"the run did not complete ({trace.meta.get('outcome')}): {trace.meta.get('error')}")
    return notes
