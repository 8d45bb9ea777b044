"""Plain-text rendering of a run summary for the terminal."""

from __future__ import annotations

from typing import Any

from workbench.analysis.role_summary import RoleSummary
from workbench.analysis.summary import RunSummary
from workbench.render.safe import terminal_safe


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        padded = (c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return "  ".join(padded)

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _config_line(config: dict[str, Any]) -> str:
    keys = ("backend", "gpus", "gpu_workers", "synth_threads", "synth_lookahead", "memory_mode",
            "lock_scope", "log2_constraints", "bool_fraction")
    return "config: " + " ".join(f"{k}={config[k]}" for k in keys if k in config)


@terminal_safe
def render_untraced(outcome: str, done: int, wall_s: float, config: dict[str, Any] | None = None) -> str:
    """A run without a trace: what the pipeline counted and timed itself, no per-phase figures."""
    rate = done / wall_s * 60 if wall_s > 0 else 0.0
    out = [f"{outcome}: {done} partitions in {wall_s:.2f} s = {rate:.1f} partitions/min "
           "(no trace recorded: no phase, mutex or barrier figures)"]
    if config:
        out.append(_config_line(config))
    return "\n".join(out)


@terminal_safe
def render_summary(summary: RunSummary, config: dict[str, Any] | None = None) -> str:
    out: list[str] = []
    head = (f"{summary.outcome}: {summary.partitions_done} partitions in {summary.wall_s:.2f} s "
            f"= {summary.throughput_per_min:.1f} partitions/min; "
            f"GPU mutex held {summary.mutex_held_fraction:.0%} of wall time")
    out.append(head)
    if summary.proofs_verified is not None:
        out.append(f"{summary.proofs_verified} of {summary.partitions_done} proofs verified")
    if config:
        out.append(_config_line(config))
    out.append("")
    out.append(table(
        ["phase", "count", "min ms", "median ms", "max ms", "max/min"],
        [[p.phase, str(p.count), f"{p.min_ms:.1f}", f"{p.median_ms:.1f}", f"{p.max_ms:.1f}",
          f"{p.max_ms / p.min_ms:.2f}" if p.min_ms > 0 else "-"] for p in summary.phases],
    ))
    if summary.mutex:
        out.append("")
        out.append(table(
            ["GPU mutex", "holds", "held ms", "median hold", "waited ms", "median wait", "max wait"],
            [[f"worker {m.worker}", str(m.holds), f"{m.held_ms:.1f}", f"{m.held_median_ms:.1f}",
              f"{m.waited_ms:.1f}", f"{m.waited_median_ms:.1f}", f"{m.waited_max_ms:.1f}"]
             for m in summary.mutex],
        ))
    if summary.barrier:
        out.append("")
        out.append(table(
            ["barrier", "party", "rounds", "waited ms", "median wait", "max wait", "last to arrive"],
            [[f"worker {b.worker}", b.party, str(b.rounds), f"{b.waited_ms:.1f}",
              f"{b.waited_median_ms:.1f}", f"{b.waited_max_ms:.1f}", str(b.last_to_arrive)]
             for b in summary.barrier],
        ))
    return "\n".join(out)


@terminal_safe
def render_role_summary(summary: RoleSummary) -> str:
    """A program that is not our pipeline: its spans by role, and the names that took longest."""
    spans = sum(r.spans for r in summary.roles)
    source = f"{summary.source}: " if summary.source else ""
    head = (f"{source}{spans} spans on {summary.tracks} tracks over {summary.window_s:.3g} s "
            "(no proving pipeline)")
    rows = [[r.role, str(r.spans), f"{r.total_ms:.1f}"] for r in summary.roles]
    out = [head, "", table(["role", "spans", "total ms"], rows), "", "longest by role (total ms, spans):"]
    for r in summary.roles:
        names = "; ".join(f"{name[:60]} {ms:.1f} ms ({n})" for name, n, ms in r.longest)
        out.append(f"  {r.role}: {names}")
    return "\n".join(out)
