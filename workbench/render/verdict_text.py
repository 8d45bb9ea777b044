"""Plain-text rendering of a verdict and of a run diff, for the terminal."""

from __future__ import annotations

from workbench.analysis.diff import Delta, RunDiff
from workbench.analysis.finding import Finding
from workbench.analysis.verdict import Verdict
from workbench.render.safe import terminal_safe
from workbench.render.text import table
from workbench.trace.container import Trace

EVIDENCE_SHOWN = 3


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


@terminal_safe
def render_verdict(verdict: Verdict, trace: Trace | None = None, details: bool = True) -> str:
    """The verdict in full, or (details=False) its headline and findings with the notes that
    qualify them."""
    pipeline = verdict.pipeline
    if not details:
        return "\n".join([verdict.headline, "", *_findings(verdict, trace), *_notes(verdict)])
    s = verdict.summary
    out = [verdict.headline, ""]
    if pipeline:
        out.append(f"{s.outcome}: {s.partitions_done} partitions in {s.wall_s:.2f} s = "
                   f"{s.throughput_per_min:.1f} partitions/min")
    else:
        held = ", ".join(f"{role} {n}" for role, n in verdict.roles.items())
        out.append(f"trace of {s.wall_s:.2f} s; " + (f"spans by role: {held}" if held else "no spans"))
    if len(verdict.gpus) > 1:
        out.extend(_gpus(verdict))
    whole = "share of the run" if pipeline else "share of the trace"
    for u in () if len(verdict.gpus) > 1 else verdict.utilisation:
        rows: list[tuple[str, float | None]] = [
            ("mutex held", u.mutex_held),
            (f"compute ({u.compute_source})", u.host_timed_compute),
            ("kernel busy (device records)", u.kernel_busy),
            ("copy busy (device records)", u.copy_busy),
            ("NVML duty cycle", u.nvml_duty_cycle),
        ]
        out.append("")
        # A trace without the pipeline shows only the figures it has.
        out.append(table([f"GPU {u.gpu}", whole],
                         [[label, _pct(value)] for label, value in rows if pipeline or value is not None]))
        if u.held_over_compute is not None:
            out.append(f"the mutex is held {u.held_over_compute:.1f}x as long as the GPU computes")
    out.append("")
    out.extend(_findings(verdict, trace))
    out.extend(_details(verdict))
    out.extend(_program(verdict))
    if verdict.replay_error is not None:
        out.append("")
        out.append(f"what-if: the unchanged replay is {verdict.replay_error:+.1%} from the measured "
                   "throughput")
    out.extend(_notes(verdict))
    return "\n".join(out)


def _findings(verdict: Verdict, trace: Trace | None) -> list[str]:
    out = ["Findings" if verdict.findings else "No findings."]
    for n, finding in enumerate(verdict.findings, start=1):
        out.extend(_finding(n, finding, trace, "run" if verdict.pipeline else "trace"))
    return out


def _notes(verdict: Verdict) -> list[str]:
    return ["", *(f"note: {note}" for note in verdict.notes)] if verdict.notes else []


def _finding(n: int, finding: Finding, trace: Trace | None, whole: str = "run") -> list[str]:
    lines = [f"{n:2d}. {finding.title} [{finding.id}; {finding.cost:.0%} of the {whole}]",
             f"    {finding.sentence}", f"    change: {finding.suggestion}"]
    for p in finding.predictions:
        lines.append(f"    predicted: {p.change}: {p.gain:+.0%} ({p.measured_per_min:.1f} -> "
                     f"{p.predicted_per_min:.1f} partitions/min)")
    if finding.evidence.spans or finding.evidence.partitions:
        shown = []
        if trace is not None:
            for i in finding.evidence.spans[:EVIDENCE_SHOWN]:
                span = trace.span(i)
                partition = f" p{span.partition}" if span.partition >= 0 else ""
                shown.append(f"{span.track} {span.name}{partition} {_ms(span.duration_ns / 1e6)}")
        partitions = ", ".join(str(p) for p in finding.evidence.partitions)
        lines.append(f"    evidence: spans {', '.join(map(str, finding.evidence.spans))}"
                     + (f" (partitions {partitions})" if partitions else "")
                     + (f"; e.g. {'; '.join(shown)}" if shown else ""))
    return lines


def _ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.2g} ms"


def _program(v: Verdict) -> list[str]:
    """What any GPU program's trace shows: copies by kind, the repeated unit, lock waits."""
    out: list[str] = []
    c = v.copies
    if c is not None and not v.pipeline:
        link = f"{c.link.gbps:.1f} GB/s ({c.link.source})" if c.link else "unknown (give --link-gbps)"
        out += ["", f"copies by direction and memory kind; link {link}"]
        out.append(table(["copies", "count", "MB", "ms", "GB/s", "median GB/s", "of the link"], [
            [k.label, str(k.count), f"{k.bytes / 1e6:.1f}", f"{k.ms:.2f}", _rate(k.gbps),
             _rate(k.median_gbps), _pct(c.link_share(k))] for k in c.kinds
        ]))
    u = v.units
    # A split that finds nothing but host time says nothing.
    if u is not None and u.decomposed:
        d = u.durations
        out += ["", f"{u.name} ({u.source}): {d.count} instances, {d.min_ms:.1f}-{d.max_ms:.1f} ms, median "
                    f"{d.median_ms:.1f}, CV {d.cv:.2f}"]
        out.append(table(["part", "median ms", "min", "max", "CV", "share of the variation", "kind"], [
            [p.name, f"{p.durations.median_ms:.1f}", f"{p.durations.min_ms:.1f}", f"{p.durations.max_ms:.1f}",
             f"{p.durations.cv:.2f}", _pct(p.variance_share), "constant" if p.constant else "variable"]
            for p in u.components
        ]))
    w = v.locks
    if w is not None and not v.pipeline:
        out += ["", f"lock, condition and barrier waits: {w.waits.count}, {w.waits.total_ms:.1f} ms in all, "
                    f"longest {w.waits.max_ms:.2f} ms"]
        out.append(table(["thread", "waits", "ms", "longest ms"], [
            [g.key, str(g.waits.count), f"{g.waits.total_ms:.2f}", f"{g.waits.max_ms:.2f}"] for g in w.threads
        ]))
        out.append(table(["lock", "waits", "ms", "longest ms"], [
            [g.key, str(g.waits.count), f"{g.waits.total_ms:.2f}", f"{g.waits.max_ms:.2f}"] for g in w.locks
        ]))
    return out


def _rate(gbps: float | None) -> str:
    return "-" if gbps is None else f"{gbps:.2f}"


def _gpus(v: Verdict) -> list[str]:
    """The whole run GPU by GPU: one column per GPU, so an idle GPU next to a busy one shows."""
    heads = ["", *(f"GPU {g.gpu}" for g in v.gpus)]
    rows = [
        ["workers", *(" ".join(map(str, g.workers)) or "-" for g in v.gpus)],
        ["partitions", *(f"{g.partitions} ({g.partition_share:.0%})" for g in v.gpus)],
        ["partitions/min", *(f"{g.throughput_per_min:.1f}" for g in v.gpus)],
        ["busy", *(_pct(g.busy) for g in v.gpus)],
    ]
    by_gpu = {u.gpu: u for u in v.utilisation}
    figures: list[tuple[str, str]] = [
        ("mutex held", "mutex_held"), ("compute timed on the host", "host_timed_compute"),
        ("kernel busy (device records)", "kernel_busy"), ("copy busy (device records)", "copy_busy"),
        ("NVML duty cycle", "nvml_duty_cycle"),
    ]
    for label, name in figures:
        values = [getattr(by_gpu[g.gpu], name) if g.gpu in by_gpu else None for g in v.gpus]
        if any(x is not None for x in values):
            rows.append([label, *(_pct(x) for x in values)])
    ratios = [by_gpu[g.gpu].held_over_compute if g.gpu in by_gpu else None for g in v.gpus]
    if any(r is not None for r in ratios):
        rows.append(["mutex held / compute", *("-" if r is None else f"{r:.1f}x" for r in ratios)])
    out = ["", table(heads, rows)]
    basis = sorted({g.busy_basis for g in v.gpus})
    out.append(f"busy = {', '.join(basis)}")
    return out


def _contention(v: Verdict) -> list[str]:
    c = v.contention
    if c is None:
        return []
    out = ["", table(["copies by GPU", "copies", "pageable", "median GB/s", "overlapped"], [
        [f"GPU {g.gpu}", str(g.copies), str(g.pageable),
         "-" if g.median_gbps is None else f"{g.median_gbps:.2f}", str(g.overlapping)] for g in c.per_gpu
    ])]

    def rate(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} GB/s"

    def r(x: float | None) -> str:
        return "-" if x is None else f"{x:+.2f}"

    out.append(f"across GPUs: {c.overlapping} copies overlapped another GPU's copy "
               f"({c.pageable_overlap_ms:.0f} ms of pageable copies on two GPUs at once); "
               f"median {rate(c.concurrent_gbps)} overlapped against {rate(c.alone_gbps)} alone; "
               f"r(rate, other GPUs' copies) {r(c.other_gpu_correlation)}, "
               f"r(rate, synthesis threads) {r(c.synth_correlation)}")
    return out


def _details(v: Verdict) -> list[str]:
    out: list[str] = []
    for idle in v.idle:
        out += ["", f"GPU {idle.gpu} idle {idle.idle_ms:.0f} of {idle.window_ms:.0f} ms "
                    f"(busy = {idle.basis})"]
        out.append(table(["idle cause", "ms", "share"], [
            [c.label, f"{c.ms:.1f}", _pct(c.share)] for c in idle.causes
        ]))
    if v.phases.phases:
        out.append("")
        out.append(table(["phase", "count", "min ms", "median", "p90", "max", "CV", "kind", "r(synth)"], [
            [p.phase, str(p.durations.count), f"{p.durations.min_ms:.1f}", f"{p.durations.median_ms:.1f}",
             f"{p.durations.p90_ms:.1f}", f"{p.durations.max_ms:.1f}", f"{p.durations.cv:.2f}",
             "constant" if p.constant else "variable",
             "-" if p.synth_correlation is None else f"{p.synth_correlation:+.2f}"]
            for p in v.phases.phases
        ]))
    for m in v.mutex:
        out.append("")
        out.append(f"{m.track}: held {m.held_fraction:.0%}; hand-off gap median "
                   f"{m.handoff_gaps.median_ms:.2f} ms; holds back to back allow {m.ceiling_per_min:.1f} "
                   f"partitions/min, the run reached {m.achieved_per_min:.1f}")
        out.append(table(["worker", "holds", "hold median", "hold p90", "waits", "wait median", "wait max"], [
            [str(w.worker), str(w.holds.count), f"{w.holds.median_ms:.1f}", f"{w.holds.p90_ms:.1f}",
             str(w.waits.count), f"{w.waits.median_ms:.1f}", f"{w.waits.max_ms:.1f}"] for w in m.workers
        ]))
    if v.barriers:
        out.append("")
        out.append(table(["barrier", "rounds", "GPU waited ms", "prep waited ms", "prep last"], [
            [b.track, str(b.rounds), f"{b.gpu_waited.total_ms:.1f}", f"{b.prep_waited.total_ms:.1f}",
             str(b.prep_last)] for b in v.barriers
        ]))
    tr = v.transfers
    if tr is not None and tr.rates is not None:
        out.append("")
        link = f"{tr.link.gbps:.1f} GB/s ({tr.link.source})" if tr.link else "unknown"
        out.append(f"copies: {tr.rates.count}, median {tr.rates.median:.2f} GB/s (min {tr.rates.min:.2f}, "
                   f"max {tr.rates.max:.2f}); link {link}; {tr.under_lock_ms:.0f} ms under the mutex"
                   + (f"; hidden staging {tr.hidden_staging_ms:.0f} ms" if tr.hidden_staging_ms else ""))
    out.extend(_contention(v))
    return out


def _change(delta: Delta, share: bool = False) -> list[str]:
    def show(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}" if share else f"{value:.2f}"

    a, b = show(delta.a), show(delta.b)
    change = "-" if delta.change is None else f"{delta.change:+.0%}"
    return [delta.name, a, b, change]


@terminal_safe
def render_diff(d: RunDiff, label_a: str = "A", label_b: str = "B",
                emulated: tuple[bool, bool] = (False, False)) -> str:
    """`emulated`: whether each run's memory modes were emulated (the CPU backend)."""
    out = [f"A: {label_a}", f"B: {label_b}"]
    if d.settings:
        out.append("settings: " + "; ".join(f"{k} {a} -> {b}" for k, a, b in d.settings))
    if any(emulated) and any(k == "memory_mode" for k, _, _ in d.settings):
        which = "both runs" if all(emulated) else "run A" if emulated[0] else "run B"
        out.append(f"note: memory is emulated in {which} (CPU backend): the memory modes differ in how "
                   "host memory is allocated and copied, not in transfers over a link")
    # Two programs that are not pipelines have no partitions or phases to compare: their shares
    # are of each trace.
    pipeline = d.a.pipeline or d.b.pipeline
    whole = "run" if pipeline else "trace"
    if pipeline:
        t = d.throughput
        out.append(f"throughput: {t.a:.1f} -> {t.b:.1f} partitions/min"
                   + (f" ({t.change:+.1%})" if t.change is not None else ""))
        out.append("")
        out.append(table(["phase (median ms)", "A", "B", "change"], [_change(p) for p in d.phases]))
    if d.utilisation:
        out.append("")
        out.append(table(["utilisation", "A", "B", "change"],
                         [_change(u, share="GB/s" not in u.name) for u in d.utilisation]))
    if d.idle:
        out.append("")
        out.append(table([f"idle cause (share of {whole})", "A", "B", "change"], [
            [i.name, _pct(i.a), _pct(i.b),
             "-" if i.a is None or i.b is None else f"{(i.b - i.a) * 100:+.0f} pts"] for i in d.idle
        ]))
    out.append("")
    for word, findings in (("appeared in B", d.appeared), ("went away in B", d.went_away)):
        for f in findings:
            out.append(f"{word}: {f.title} [{f.id}; {f.cost:.0%} of the {whole}]")
    for a, b in d.persisted:
        out.append(f"in both: {b.title} [{b.id}; {a.cost:.0%} -> {b.cost:.0%} of the {whole}]")
    out.append("")
    out.append(f"A: {d.a.headline}")
    out.append(f"B: {d.b.headline}")
    return "\n".join(out)
