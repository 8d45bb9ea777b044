"""The verdict section: the analysis's findings as HTML, or a note saying there are none.

The diagnosis is `analysis/verdict.py`, imported like any other module; a failure in it is a
bug to see, so it is not hidden behind a note. What is shown of a verdict is read field by
field, so a finding without, say, a suggestion simply shows no suggestion line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from typing import Any

from workbench.analysis import verdict as analysis_verdict
from workbench.trace.container import Trace
from workbench.viz.tables import gpu_table

TITLE_FIELDS = ("title", "headline", "summary", "message", "name", "finding")
TEXT_FIELDS = ("sentence", "detail", "details", "explanation")
CHANGE_FIELDS = ("suggestion", "change", "action")
EVIDENCE_SHOWN = 3

Line = tuple[str, str]  # (label, text); an empty label is plain prose


@dataclass(frozen=True)
class Verdict:
    findings: tuple[tuple[str, tuple[Line, ...]], ...] = ()  # (title, lines)
    headline: str = ""
    notes: tuple[str, ...] = ()
    gpus: str = ""  # HTML table of the run GPU by GPU, when it had several
    contention: str = ""  # copies to different GPUs against each other, when measured


def diagnose(trace: Trace) -> Verdict:
    return view_of(analysis_verdict.diagnose(trace), trace)


def view_of(result: Any, trace: Trace) -> Verdict:
    """What to show of a diagnosis already made (of `trace`)."""
    findings = getattr(result, "findings", result)
    if findings is None or isinstance(findings, str | bytes) or not isinstance(findings, Iterable):
        findings = [findings] if findings else []
    # A foreign program's findings weigh a share of its trace; ours a share of the run.
    whole = "run" if getattr(result, "pipeline", True) else "trace"
    return Verdict(
        tuple(_finding(f, trace, whole) for f in findings),
        headline=str(getattr(result, "headline", "") or ""),
        notes=tuple(str(n) for n in getattr(result, "notes", ()) or ()),
        gpus=_gpus(result), contention=_contention(getattr(result, "contention", None)),
    )


def _gpus(result: Any) -> str:
    try:
        return gpu_table(tuple(getattr(result, "gpus", ()) or ()))
    except (AttributeError, TypeError, ValueError):  # an older or newer record shape: no table
        return ""


def _contention(c: Any) -> str:
    if c is None:
        return ""
    try:
        def rate(x: Any) -> str:
            return "-" if x is None else f"{x:.2f} GB/s"

        per_gpu = "; ".join(f"GPU {g.gpu}: {g.copies} copies, {g.overlapping} overlapped, median "
                            f"{rate(g.median_gbps)}" for g in c.per_gpu)
        r = c.other_gpu_correlation
        s = c.synth_correlation
        return (f"copies across GPUs: {per_gpu}. Overlapped copies run at {rate(c.concurrent_gbps)} "
                f"(median) against {rate(c.alone_gbps)} alone; pageable copies on two GPUs at once for "
                f"{c.pageable_overlap_ms:.0f} ms; r(rate, other GPUs' copies) "
                f"{'-' if r is None else f'{r:+.2f}'}, r(rate, synthesis threads) "
                f"{'-' if s is None else f'{s:+.2f}'}.")
    except (AttributeError, TypeError, ValueError):
        return _text(c)


def _field(finding: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        value = finding.get(name) if isinstance(finding, dict) else getattr(finding, name, None)
        if value not in (None, "", [], {}, ()):
            return value
    return None


def _finding(finding: Any, trace: Trace, whole: str = "run") -> tuple[str, tuple[Line, ...]]:
    if isinstance(finding, str):
        return finding, ()
    title = str(_field(finding, TITLE_FIELDS) or finding)
    lines: list[Line] = []
    cost = _field(finding, ("cost",))
    if isinstance(cost, float):
        title += f" ({cost:.0%} of the {whole})"
    if (text := _field(finding, TEXT_FIELDS)) is not None:
        lines.append(("", _text(text)))
    if (change := _field(finding, CHANGE_FIELDS)) is not None:
        lines.append(("change", _text(change)))
    for prediction in _field(finding, ("predictions",)) or ():
        lines.append(("predicted", _prediction(prediction)))
    if (numbers := _field(finding, ("numbers",))) is not None:
        lines.append(("numbers", _text(numbers)))
    if (evidence := _field(finding, ("evidence",))) is not None and (text := _evidence(evidence, trace)):
        lines.append(("evidence", text))
    return title, tuple(lines)


def _prediction(p: Any) -> str:
    try:
        return (f"{p.change}: {p.gain:+.0%} throughput ({p.measured_per_min:.1f} -> "
                f"{p.predicted_per_min:.1f} partitions/min)")
    except (AttributeError, TypeError, ValueError):
        return _text(p)


def _evidence(evidence: Any, trace: Trace) -> str:
    spans = getattr(evidence, "spans", None)
    if spans is None:
        return _text(evidence)
    partitions = list(getattr(evidence, "partitions", ()) or ())
    if not spans and not partitions:
        return ""
    text = f"{len(spans)} spans" + (f" of partitions {_text(partitions)}" if partitions else "")
    examples = []
    for i in list(spans)[:EVIDENCE_SHOWN]:
        if 0 <= int(i) < len(trace.spans):
            s = trace.span(int(i))
            part = f" p{s.partition}" if s.partition >= 0 else ""
            examples.append(f"{s.track} {s.name}{part} {s.duration_ns / 1e6:.1f} ms")
    return text + (f", e.g. {'; '.join(examples)}" if examples else "")


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_text(v) for v in value[:10]) + (" ..." if len(value) > 10 else "")
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def verdict_html(verdict: Verdict) -> str:
    parts = [f"<p><b>{escape(verdict.headline)}</b></p>"] if verdict.headline else []
    parts.append(verdict.gpus)  # already HTML, escaped where it was built
    if not verdict.findings:
        parts.append("<p>The diagnosis found nothing holding the pipeline back.</p>")
    items = []
    for title, lines in verdict.findings:
        rows = "".join(
            f"<div>{f'<b>{escape(k)}</b>: ' if k else ''}{escape(v)}</div>" for k, v in lines)
        items.append(f"<li><div><b>{escape(title)}</b></div>{rows}</li>")
    if items:
        parts.append("<ol class='wb-verdict'>" + "".join(items) + "</ol>")
    if verdict.contention:
        parts.append(f"<p>{escape(verdict.contention)}</p>")
    parts += [f"<p class='wb-note'>note: {escape(n)}</p>" for n in verdict.notes]
    return "".join(parts)
