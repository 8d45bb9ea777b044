"""HTML tables of a grid of runs (analysis/grid.py): each run's figures in one row, the
utilisation measures side by side, and what-if replays next to the runs that made the
change. Strings, for notebooks and reports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workbench.analysis.grid import CellMetrics, PredictionCheck
from workbench.analysis.utilisation import GpuUtilisation
from workbench.sweep.study import Spread
from workbench.viz.tables import table


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None, pattern: str = "{:.1f}") -> str:
    return "-" if value is None else pattern.format(value)


def cells_table(cells: Mapping[str, CellMetrics]) -> str:
    rows = []
    for name, m in cells.items():
        ntt, badd, tail = (m.phases.get(p) for p in ("ntt_msm_h", "batch_add", "tail_msm"))
        rows.append([
            name, _num(m.throughput_per_min), _num(m.mutex_ceiling_per_min),
            _num(m.synthesis_median_ms, "{:.0f}"),
            _num(ntt.median_ms if ntt else None), _num(ntt.spread if ntt else None, "{:.2f}x"),
            _num(ntt.steady_spread if ntt else None, "{:.2f}x"), _pct(badd.cv if badd else None),
            _pct(tail.cv if tail else None), _num(m.copy_gbps_median), _num(m.device_copy_gbps_median),
            _pct(m.mutex_held), _pct(m.kernel_busy), _pct(m.kernel_busy_active),
            _pct(m.kernel_busy_steady), m.findings[0] if m.findings else "-",
        ])
    return table(
        ["run", "partitions/min", "mutex ceiling /min", "synthesis ms", "ntt_msm_h ms", "ntt_msm_h spread",
         "spread, steady", "batch_add CV", "tail_msm CV", "copy GB/s", "copy GB/s (device)", "mutex held",
         "kernel busy", "kernel busy, GPU active", "kernel busy, steady", "first finding"],
        rows,
        caption="spread: slowest over fastest partition; steady: without each worker's first partition; "
                "GPU active: from the first mutex hold to the last; steady: from every worker's first hold "
                "done to the first of their last holds",
    )


def utilisation_table(runs: Mapping[str, GpuUtilisation]) -> str:
    rows = [[name, _pct(u.mutex_held), _pct(u.host_timed_compute), _pct(u.kernel_busy), _pct(u.copy_busy),
             _pct(u.nvml_duty_cycle), _num(u.nvml_pcie_rx_gbps)] for name, u in runs.items()]
    return table(
        ["run", "mutex held", "compute timed on the host", "kernel busy (device records)",
         "copy busy (device records)", "NVML duty cycle", "NVML PCIe rx GB/s"],
        rows, caption="share of the run's wall time, each measured as its name says",
    )


def checks_table(checks: Sequence[tuple[str, str, PredictionCheck]]) -> str:
    rows = []
    for base, cell, c in checks:
        rows.append([f"{base} + {c.change}", _num(c.base_per_min), _num(c.predicted_per_min), cell,
                     _num(c.measured_per_min), _pct(c.error) if c.error is not None else (c.failed or "-"),
                     _pct(c.replay_error), _num(c.synthesis_ratio, "{:.2f}x"),
                     _num(c.predicted_same_synthesis_per_min), _pct(c.error_same_synthesis)])
    return table(["replay", "base /min", "predicted /min", "run that made the change", "measured /min",
                  "prediction error", "unchanged replay error", "synthesis speed, measured run",
                  "predicted at that speed", "error at that speed"], rows,
                 caption="synthesis speed drifts between runs; the last three columns replay the change "
                         "with synthesis at the measured run's median")


def spreads_table(spreads: Mapping[str, Mapping[str, Spread]]) -> str:
    """Each cell's figures across its repeats: median, and lowest to highest."""
    columns = [("throughput_per_min", "partitions/min", "{:.1f}"),
               ("mutex_ceiling_per_min", "mutex ceiling /min", "{:.1f}"),
               ("synthesis_median_ms", "synthesis ms", "{:.0f}"), ("ntt_msm_h_ms", "ntt_msm_h ms", "{:.1f}"),
               ("copy_gbps_median", "copy GB/s", "{:.1f}"), ("mutex_held", "mutex held", "{:.0%}"),
               ("kernel_busy", "kernel busy", "{:.0%}"),
               ("kernel_busy_steady", "kernel busy, steady", "{:.0%}")]
    rows = []
    for cell, found in spreads.items():
        runs = max((s.count for s in found.values()), default=0)
        row = [cell, str(runs)]
        for key, _, pattern in columns:
            s = found.get(key)
            row.append("-" if s is None else f"{pattern.format(s.median)} ({pattern.format(s.low)} to "
                                             f"{pattern.format(s.high)})")
        rows.append(row)
    return table(["cell", "runs", *(title for _, title, _ in columns)], rows,
                 caption="median over the cell's completed repeats, lowest to highest in brackets")
