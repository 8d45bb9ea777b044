"""A grid of runs read side by side: the figures a case study compares, per run, and the
what-if replays of one run checked against another run that really made the change.

Contract:
- `cell_metrics(trace) -> CellMetrics`: throughput, the spread of each GPU phase (max / min
  over partitions) and its coefficient of variation, copy rates, the utilisations over the
  whole run and over the span in which the GPU had work, the mutex's ceiling (holds back to
  back), the verdict's headline and its findings in rank order.
- `check_prediction(base, change, measured) -> PredictionCheck`: the replay of `base` with
  `change`, next to the throughput `measured` actually reached.

Pure: traces in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workbench.analysis.summary import summarize
from workbench.analysis.tracks import GPU_PHASES, PHASE_THREADS, kind_mask
from workbench.analysis.transfers import copy_rates
from workbench.analysis.utilisation import gpu_utilisation, held_intervals, steady_window_ns
from workbench.analysis.verdict import Verdict, diagnose
from workbench.analysis.whatif import Change, WhatIfError, WhatIfOptions, predict
from workbench.trace.container import Trace


@dataclass(frozen=True)
class PhaseSpread:
    phase: str
    count: int
    median_ms: float
    spread: float  # slowest over fastest
    cv: float  # standard deviation over mean
    # The same without each worker's first partition, whose first launches load kernels and
    # grow memory pools (one 507 ms ntt_msm_h among 84 ms ones on the H200): steady state.
    steady_spread: float | None
    steady_cv: float | None


def _spread_cv(durations: np.ndarray) -> tuple[float, float] | None:
    if len(durations) < 2 or durations.min() <= 0:
        return None
    return float(durations.max() / durations.min()), float(durations.std() / durations.mean())


@dataclass(frozen=True)
class CellMetrics:
    throughput_per_min: float
    partitions: int
    phases: dict[str, PhaseSpread]
    synthesis_median_ms: float | None
    copy_gbps_median: float | None  # host-timed, bytes over the copy span
    device_copy_gbps_median: float | None  # bytes over the device-timed copy
    link_gbps: float | None
    mutex_held: float | None
    kernel_busy: float | None  # over the whole run
    kernel_busy_active: float | None  # from the first mutex hold's start to the last one's end
    # In steady state (steady_window_ns): what the kernel-busy target is about.
    kernel_busy_steady: float | None
    mutex_held_steady: float | None
    mutex_ceiling_per_min: float | None  # partitions per minute if holds ran back to back
    hold_median_ms: float | None
    headline: str
    findings: tuple[str, ...]  # finding ids, most costly first


def phase_spread(trace: Trace, phase: str) -> PhaseSpread | None:
    mask = kind_mask(trace, *PHASE_THREADS, name=phase)
    durations = trace.durations_ns(mask) / 1e6
    whole = _spread_cv(durations)
    if whole is None:
        return None
    starts, workers = trace.spans.start_ns[mask], trace.spans.worker[mask]
    first = np.zeros(len(durations), bool)
    for w in np.unique(workers):
        mine = np.flatnonzero(workers == w)
        first[mine[np.argmin(starts[mine])]] = True
    steady = _spread_cv(durations[~first])
    return PhaseSpread(phase, len(durations), float(np.median(durations)), whole[0], whole[1],
                       steady[0] if steady else None, steady[1] if steady else None)


def active_window_ns(trace: Trace, gpu: int = 0) -> tuple[int, int] | None:
    """From the start of the first mutex hold to the end of the last: the part of the run in
    which the GPU had partitions, without the pipeline's fill and drain."""
    held = held_intervals(trace, gpu)
    if held is None or not len(held.starts):
        return None
    return int(held.starts.min()), int(held.ends.max())


def cell_metrics(trace: Trace, verdict: Verdict | None = None) -> CellMetrics:
    """The run's figures; pass its verdict where one is at hand (diagnosing is the costly
    part, and the verdict holds the summary, utilisations and mutex reports too)."""
    verdict = verdict or diagnose(trace)
    rates = copy_rates(trace)
    host = [r.gbps for r in rates if r.gbps is not None]
    device = [r.bytes / (r.device_ms * 1e6) for r in rates if r.device_ms]
    gpu = verdict.utilisation[0] if verdict.utilisation else None
    window = active_window_ns(trace)
    active = gpu_utilisation(trace, 0, *window) if window else None
    steady_window = steady_window_ns(trace)
    steady = gpu_utilisation(trace, 0, *steady_window) if steady_window else None
    mutex = verdict.mutex
    phases = {p: s for p in GPU_PHASES if (s := phase_spread(trace, p)) is not None}
    synth = _synthesis_median(trace)
    link = trace.meta.get("link_gbps")
    return CellMetrics(
        throughput_per_min=verdict.summary.throughput_per_min,
        partitions=verdict.summary.partitions_done,
        phases=phases,
        synthesis_median_ms=synth / 1e6 if synth is not None else None,
        copy_gbps_median=float(np.median(host)) if host else None,
        device_copy_gbps_median=float(np.median(device)) if device else None,
        link_gbps=float(link) if link else None,
        mutex_held=gpu.mutex_held if gpu else None,
        kernel_busy=gpu.kernel_busy if gpu else None,
        kernel_busy_active=active.kernel_busy if active else None,
        kernel_busy_steady=steady.kernel_busy if steady else None,
        mutex_held_steady=steady.mutex_held if steady else None,
        mutex_ceiling_per_min=mutex[0].ceiling_per_min if mutex else None,
        hold_median_ms=mutex[0].holds.median_ms if mutex else None,
        headline=verdict.headline,
        findings=tuple(f.id for f in verdict.findings),
    )


@dataclass(frozen=True)
class PredictionCheck:
    change: str
    base_per_min: float  # the run the replay starts from, as measured
    predicted_per_min: float | None
    measured_per_min: float  # the run that really made the change
    replay_error: float | None  # the unchanged replay against the base run
    failed: str | None = None
    # Two runs also differ in what the change does not touch; synthesis speed drifts most
    # (10.2-13.5 s a partition across the H200 grid). The same replay with synthesis sped up
    # (or slowed) to the measured run's median separates the model's error from that drift.
    synthesis_ratio: float | None = None  # base synthesis median over the measured run's
    predicted_same_synthesis_per_min: float | None = None

    @property
    def error(self) -> float | None:
        """Prediction over measurement, minus one."""
        return _error(self.predicted_per_min, self.measured_per_min)

    @property
    def error_same_synthesis(self) -> float | None:
        return _error(self.predicted_same_synthesis_per_min, self.measured_per_min)


def _error(predicted: float | None, measured: float) -> float | None:
    return None if predicted is None or not measured else predicted / measured - 1


def _synthesis_median(trace: Trace) -> float | None:
    durations = trace.durations_ns(trace.span_mask(name="synthesis"))
    return float(np.median(durations)) if len(durations) else None


def check_prediction(base: Trace, change: Change, measured: Trace,
                     options: WhatIfOptions | None = None) -> PredictionCheck:
    measured_per_min = summarize(measured).throughput_per_min
    base_per_min = summarize(base).throughput_per_min
    try:
        prediction = predict(base, change, options)
    except WhatIfError as err:
        return PredictionCheck(change.describe(), base_per_min, None, measured_per_min, None, str(err))
    before, after = _synthesis_median(base), _synthesis_median(measured)
    ratio = before / after if before and after else None
    same = None
    if ratio is not None:
        speedup = change.synthesis_speedup * ratio
        same = predict(base, replace(change, synthesis_speedup=speedup), options).predicted_per_min
    return PredictionCheck(prediction.change, base_per_min, prediction.predicted_per_min,
                           measured_per_min, prediction.replay_error, None, ratio, same)
