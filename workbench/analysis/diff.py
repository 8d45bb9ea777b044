"""Run A against run B: what changed in the settings, the throughput, each phase, each
utilisation figure and each idle cause, and which findings appeared or went away.

Contract: `diff(a, b, options) -> RunDiff` (or `diff_verdicts` when the verdicts exist).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.analysis.finding import Finding
from workbench.analysis.verdict import DiagnoseOptions, Verdict, diagnose
from workbench.trace.container import Trace

_CONFIG_KEYS = ("backend", "gpu_workers", "synth_threads", "synth_lookahead", "memory_mode",
                "lock_scope", "partitions", "log2_constraints", "bool_fraction", "synth_terms")


@dataclass(frozen=True)
class Delta:
    name: str
    a: float | None
    b: float | None

    @property
    def change(self) -> float | None:
        """Relative change from A to B (None where either side is missing or A is zero)."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return self.b / self.a - 1


@dataclass(frozen=True)
class RunDiff:
    settings: tuple[tuple[str, object, object], ...]  # (setting, A, B) where they differ
    throughput: Delta  # partitions per minute
    phases: tuple[Delta, ...]  # median ms
    utilisation: tuple[Delta, ...]  # fractions of the run; copy rate in GB/s
    idle: tuple[Delta, ...]  # share of the run per cause
    appeared: tuple[Finding, ...]
    went_away: tuple[Finding, ...]
    persisted: tuple[tuple[Finding, Finding], ...]
    a: Verdict
    b: Verdict


def diff(a: Trace, b: Trace, options: DiagnoseOptions | None = None) -> RunDiff:
    return diff_verdicts(diagnose(a, options), diagnose(b, options), a.config, b.config)


def diff_verdicts(
    a: Verdict, b: Verdict, config_a: dict[str, object] | None = None,
    config_b: dict[str, object] | None = None,
) -> RunDiff:
    config_a, config_b = config_a or {}, config_b or {}
    settings = tuple(
        (k, config_a.get(k), config_b.get(k)) for k in _CONFIG_KEYS if config_a.get(k) != config_b.get(k)
    )
    phases_a = {p.phase: p.durations.median_ms for p in a.phases.phases}
    phases_b = {p.phase: p.durations.median_ms for p in b.phases.phases}
    order = list(phases_a) + [p for p in phases_b if p not in phases_a]
    phases = tuple(Delta(p, phases_a.get(p), phases_b.get(p)) for p in order)
    ids_a, ids_b = {f.id: f for f in a.findings}, {f.id: f for f in b.findings}
    return RunDiff(
        settings=settings,
        throughput=Delta("partitions/min", a.summary.throughput_per_min, b.summary.throughput_per_min),
        phases=phases, utilisation=_utilisation(a, b), idle=_idle(a, b),
        appeared=tuple(f for i, f in ids_b.items() if i not in ids_a),
        went_away=tuple(f for i, f in ids_a.items() if i not in ids_b),
        persisted=tuple((ids_a[i], f) for i, f in ids_b.items() if i in ids_a),
        a=a, b=b,
    )


def _figures(v: Verdict) -> dict[str, float | None]:
    u = v.utilisation[0] if v.utilisation else None
    rates = v.transfers.rates if v.transfers else None
    return {
        "mutex held": u.mutex_held if u else None,
        "compute (host-timed)": u.host_timed_compute if u else None,
        "kernel busy (device)": u.kernel_busy if u else None,
        "copy busy (device)": u.copy_busy if u else None,
        "NVML duty cycle": u.nvml_duty_cycle if u else None,
        "copy GB/s (median)": rates.median if rates else None,
    }


def _utilisation(a: Verdict, b: Verdict) -> tuple[Delta, ...]:
    fa, fb = _figures(a), _figures(b)
    return tuple(Delta(k, fa[k], fb[k]) for k in fa if fa[k] is not None or fb[k] is not None)


def _idle(a: Verdict, b: Verdict) -> tuple[Delta, ...]:
    if not a.idle and not b.idle:
        return ()
    sa = {c.cause: c.share for c in a.idle[0].causes} if a.idle else {}
    sb = {c.cause: c.share for c in b.idle[0].causes} if b.idle else {}
    causes = list(sa) + [c for c in sb if c not in sa]
    return tuple(Delta(c, sa.get(c, 0.0), sb.get(c, 0.0)) for c in causes)
