"""Analysis: pure functions from a trace to tables and findings. No printing, no plotting."""

from workbench.analysis.summary import (
    BarrierPartyStats,
    MutexWorkerStats,
    PhaseStats,
    RunSummary,
    summarize,
)

__all__ = ["BarrierPartyStats", "MutexWorkerStats", "PhaseStats", "RunSummary", "summarize"]
