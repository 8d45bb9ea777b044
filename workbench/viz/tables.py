"""HTML tables of a run: configuration, summary, per-phase, GPU mutex and barrier statistics.

Plain HTML strings, shared by the report and the panel's live summary, so both read alike.
Tables side by side go in a `wb-row`: each keeps its natural width and the row wraps, so
one table never runs under its neighbour (a block too wide for the page scrolls sideways).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from workbench.analysis.role_summary import RoleSummary
from workbench.analysis.summary import RunSummary

CSS = """
.wb-table { border-collapse: collapse; font: 12px/1.4 system-ui, sans-serif; margin: 4px 0 12px; }
.wb-table th, .wb-table td { padding: 2px 8px; border-bottom: 1px solid #e3e3e3; }
.wb-table th { background: #f4f4f4; text-align: left; }
.wb-table td.n { text-align: right; font-variant-numeric: tabular-nums; }
.wb-headline { font: 600 13px/1.4 system-ui, sans-serif; margin: 4px 0; }
.wb-row { display: flex; flex-wrap: wrap; gap: 12px 24px; align-items: flex-start; }
.wb-row > div { flex: 0 0 auto; width: max-content; max-width: 100%; overflow-x: auto; }
.wb-row .wb-table { width: max-content; table-layout: auto; margin: 4px 0 12px; }
.wb-row .wb-headline { width: 0; min-width: 100%; }  /* wraps to its tables' width, not beyond */
"""

CONFIG_ORDER = (
    "backend", "gpu_workers", "synth_threads", "synth_lookahead", "memory_mode", "lock_scope",
    "partitions", "log2_constraints", "bool_fraction", "synth_terms", "seed", "trace",
)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(_cell(v, first=i == 0) for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    cap = f"<caption style='text-align:left'>{escape(caption)}</caption>" if caption else ""
    return f"<table class='wb-table'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any, first: bool) -> str:
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(value, float):
        text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
    else:
        text = str(value)
    return f"<td class='n'>{escape(text)}</td>" if numeric and not first else f"<td>{escape(text)}</td>"


def headline(summary: RunSummary) -> str:
    verified = ("" if summary.proofs_verified is None
                else f"; {summary.proofs_verified} of {summary.partitions_done} proofs verified")
    return (f"<div class='wb-headline'>{escape(summary.outcome)}: {summary.partitions_done} "
            f"partitions in {summary.wall_s:.2f} s = {summary.throughput_per_min:.1f} partitions/min; "
            f"GPU mutex held {summary.mutex_held_fraction:.0%} of wall time{verified}</div>")


def side_by_side(blocks: Sequence[str]) -> str:
    """HTML blocks in a row that wraps rather than overlapping them."""
    return "<div class='wb-row'>" + "".join(f"<div>{b}</div>" for b in blocks) + "</div>"


def config_table(config: dict[str, Any], meta: dict[str, Any] | None = None) -> str:
    keys = [k for k in CONFIG_ORDER if k in config] + sorted(set(config) - set(CONFIG_ORDER))
    rows: list[list[Any]] = [[k, str(config[k])] for k in keys]
    facts = {"backend": "backend used", "device": "device", "memory_emulated": "memory emulated",
             "outcome": "outcome", "error": "error"}
    for key, label in facts.items():
        # "unknown" is what a foreign trace's outcome is: a run of ours always knows its own.
        if meta and meta.get(key) is not None and meta.get(key) != "unknown":
            rows.append([label, str(meta[key])])
    return table(["setting", "value"], rows, "run configuration")


def phase_table(summary: RunSummary) -> str:
    return table(
        ["phase", "count", "min ms", "median ms", "max ms", "max/min", "total ms"],
        [[p.phase, p.count, p.min_ms, p.median_ms, p.max_ms,
          f"{p.max_ms / p.min_ms:.2f}" if p.min_ms > 0 else "-", p.total_ms] for p in summary.phases],
        "phases",
    )


def _worker(worker: int, worker_gpu: Mapping[int, int] | None) -> str:
    # The GPU is named only when the run had several, so one-GPU tables read as before.
    if worker_gpu and len(set(worker_gpu.values())) > 1 and worker in worker_gpu:
        return f"gpu{worker_gpu[worker]} worker {worker}"
    return f"worker {worker}"


def mutex_table(summary: RunSummary, worker_gpu: Mapping[int, int] | None = None) -> str:
    if not summary.mutex:
        return ""
    return table(
        ["worker", "holds", "held ms", "median hold ms", "waited ms", "median wait ms", "max wait ms"],
        [[_worker(m.worker, worker_gpu), m.holds, m.held_ms, m.held_median_ms, m.waited_ms,
          m.waited_median_ms, m.waited_max_ms] for m in summary.mutex],
        "GPU mutex per worker",
    )


def barrier_table(summary: RunSummary, worker_gpu: Mapping[int, int] | None = None) -> str:
    if not summary.barrier:
        return ""
    return table(
        ["worker", "party", "rounds", "waited ms", "median wait ms", "max wait ms", "last to arrive"],
        [[_worker(b.worker, worker_gpu), b.party, b.rounds, b.waited_ms, b.waited_median_ms,
          b.waited_max_ms, b.last_to_arrive] for b in summary.barrier],
        "prep / GPU barrier per worker",
    )


def _share(value: Any) -> str:
    return "-" if value is None else f"{value:.0%}"


def gpu_table(gpus: Sequence[Any]) -> str:
    """The run GPU by GPU (analysis GpuShare records, read by name): empty for one GPU, whose
    figures the summary already gives."""
    if len(gpus) < 2:
        return ""
    return table(
        ["GPU", "workers", "partitions", "share of partitions", "partitions/min", "busy", "mutex held"],
        [[f"GPU {g.gpu}", " ".join(map(str, g.workers)), g.partitions, _share(g.partition_share),
          g.throughput_per_min, _share(g.busy), _share(g.mutex_held)] for g in gpus],
        "per GPU (busy: " + ", ".join(sorted({str(g.busy_basis) for g in gpus})) + ")",
    )


def summary_html(
    summary: RunSummary, gpus: Sequence[Any] = (), worker_gpu: Mapping[int, int] | None = None,
) -> str:
    return (headline(summary) + gpu_table(gpus) + phase_table(summary) + mutex_table(summary, worker_gpu)
            + barrier_table(summary, worker_gpu))


def role_summary_html(summary: RoleSummary) -> str:
    """A program that is not our pipeline: its spans by role and the names that took longest."""
    spans = sum(r.spans for r in summary.roles)
    head = (f"<div class='wb-headline'>{escape(summary.source or 'trace')}: {spans:,} spans on "
            f"{summary.tracks} tracks over {summary.window_s:.3g} s (no proving pipeline)</div>")
    rows = [[r.role, r.spans, r.total_ms, _longest(r)] for r in summary.roles]
    return head + table(["role", "spans", "total ms", "longest (total ms, spans)"], rows)


def _longest(total: Any) -> str:
    return "; ".join(f"{name[:60]} {ms:.1f} ms ({n})" for name, n, ms in total.longest)
