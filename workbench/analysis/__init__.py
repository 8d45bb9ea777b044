"""Analysis: pure functions from a trace to tables and findings. No printing, no plotting."""

from workbench.analysis.diff import Delta, RunDiff, diff, diff_verdicts
from workbench.analysis.distribution import Distribution
from workbench.analysis.finding import Evidence, Finding
from workbench.analysis.idle import IdleCause, IdleReport, idle_report
from workbench.analysis.locks import BarrierReport, MutexReport, barrier_reports, mutex_reports
from workbench.analysis.phases import PhaseProfile, PhaseReport, phase_report
from workbench.analysis.summary import (
    BarrierPartyStats,
    MutexWorkerStats,
    PhaseStats,
    RunSummary,
    summarize,
)
from workbench.analysis.transfers import CopyRate, LinkSpeed, TransferReport, copy_rates, transfer_report
from workbench.analysis.utilisation import GpuUtilisation, utilisation
from workbench.analysis.verdict import DiagnoseOptions, Verdict, diagnose
from workbench.analysis.whatif import (
    ZEROCOPY,
    Change,
    Prediction,
    WhatIf,
    WhatIfError,
    WhatIfOptions,
    predict,
)

__all__ = [
    "ZEROCOPY",
    "BarrierPartyStats",
    "BarrierReport",
    "Change",
    "CopyRate",
    "Delta",
    "DiagnoseOptions",
    "Distribution",
    "Evidence",
    "Finding",
    "GpuUtilisation",
    "IdleCause",
    "IdleReport",
    "LinkSpeed",
    "MutexReport",
    "MutexWorkerStats",
    "PhaseProfile",
    "PhaseReport",
    "PhaseStats",
    "Prediction",
    "RunDiff",
    "RunSummary",
    "TransferReport",
    "Verdict",
    "WhatIf",
    "WhatIfError",
    "WhatIfOptions",
    "barrier_reports",
    "copy_rates",
    "diagnose",
    "diff",
    "diff_verdicts",
    "idle_report",
    "mutex_reports",
    "phase_report",
    "predict",
    "summarize",
    "transfer_report",
    "utilisation",
]
