"""A sweep's table as text lines (the CLI prints them; the case study's script too): one row per
cell with its representative run's figures, throughput's spread across repeats, the verdict's
headline; then the what-if checks, and the runs that did not complete."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def table_lines(summary: dict[str, Any]) -> list[str]:
    repeats = any(c.get("runs", 1) > 1 for c in summary["cells"].values())
    lines = [f"{'cell':<26} {'part/min':>8} " + (f"{'runs':>4} {'min-max':>11} " if repeats else "")
             + f"{'ceiling':>7} {'synth ms':>8} {'ntt_h ms':>8} {'ntt_h x':>7} {'steady':>6} "
             f"{'b_add cv':>8} {'tail cv':>7} {'copy GB/s':>9} {'held':>5} {'kernels':>7} {'active':>6} "
             f"{'steady':>6}  verdict"]
    for name, c in summary["cells"].items():
        ph = c["phases"]
        spread = c.get("spreads", {}).get("throughput_per_min")
        span = f"{spread['low']:.1f}-{spread['high']:.1f}" if spread else "-"
        middle = spread["median"] if spread else c["throughput_per_min"]
        lines.append(
            f"{name:<26} {middle:8.1f} " + (f"{c.get('runs', 1):>4} {span:>11} " if repeats else "")
            + f"{_fmt(c['mutex_ceiling_per_min'], '{:.1f}'):>7} "
            f"{_fmt(c['synthesis_median_ms'], '{:.0f}'):>8} "
            f"{_fmt(ph.get('ntt_msm_h', {}).get('median_ms'), '{:.1f}'):>8} "
            f"{_fmt(ph.get('ntt_msm_h', {}).get('spread'), '{:.2f}'):>7} "
            f"{_fmt(ph.get('ntt_msm_h', {}).get('steady_spread'), '{:.2f}'):>6} "
            f"{_fmt(ph.get('batch_add', {}).get('cv'), '{:.0%}'):>8} "
            f"{_fmt(ph.get('tail_msm', {}).get('cv'), '{:.0%}'):>7} "
            f"{_fmt(c['copy_gbps_median'], '{:.1f}'):>9} {_fmt(c['mutex_held'], '{:.0%}'):>5} "
            f"{_fmt(c['kernel_busy'], '{:.0%}'):>7} {_fmt(c['kernel_busy_active'], '{:.0%}'):>6} "
            f"{_fmt(c.get('kernel_busy_steady'), '{:.0%}'):>6}  {c['headline']}")
    for check in summary["checks"]:
        if check["failed"]:
            lines.append(f"what-if {check['base']} + {check['change']}: {check['failed']}")
            continue
        lines.append(
            f"what-if {check['base']} + {check['change']}: predicted {check['predicted_per_min']:.1f}/min, "
            f"{check['cell']} measured {check['measured_per_min']:.1f}/min, "
            f"error {_fmt(check['error'], '{:+.1%}')} "
            f"(replay error {_fmt(check['replay_error'], '{:+.1%}')}); at the measured run's synthesis speed "
            f"({_fmt(check['synthesis_ratio'], '{:.2f}x')}) "
            f"{_fmt(check['predicted_same_synthesis_per_min'], '{:.1f}/min')}, "
            f"error {_fmt(check['error_same_synthesis'], '{:+.1%}')}")
    for problem in summary.get("problems", []):
        said = f": {problem['error']}" if problem["error"] else ""
        lines.append(f"{problem['label']}: {problem['status'].replace('_', ' ')}{said}")
    return lines
