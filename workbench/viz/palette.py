"""One colour per phase, the same in every view, so a phase is recognised at a glance.

Copies are red, waits grey or pink, GPU-lock work warm, CPU work cool; phases nobody has
named here (kernels from the device collectors, spans of a user's own pipeline) get a colour
from a fixed palette by a stable hash of their name, so a name keeps its colour across runs.
"""

from __future__ import annotations

import zlib

PHASE_COLORS = {  # in pipeline order, which is also the order of legends and tables
    "synthesis": "#4e79a7",
    "buffer_checkout": "#a0cbe8",
    "pool_checkout": "#86bcb6",
    "host_register": "#b6992d",
    "prep_msm": "#59a14f",
    "barrier_wait (prep)": "#d9d4d1",
    "upload": "#f1ce63",
    "mutex_wait": "#d37295",
    "mutex_hold": "#79706e",
    "ntt_msm_h": "#f28e2b",
    "staging_copy": "#ff9d9a",
    "h2d_copy": "#e15759",
    "host_unregister": "#d4b95e",
    "ntt": "#edc948",
    "coset_intt": "#ffbe7d",
    "msm_h": "#b07aa1",
    "barrier_wait": "#bab0ac",
    "barrier_wait (gpu)": "#9c938f",
    "batch_add": "#76b7b2",
    "tail_msm": "#9c755f",
    "b_g2_msm": "#8cd17d",
    "finish": "#499894",
    "setup": "#cfcfcf",
    "proving_key": "#b4b4b4",
    "twiddles": "#a0a0a0",
}

_SPARE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
)


def phase_color(phase: str) -> str:
    known = PHASE_COLORS.get(phase)
    if known is not None:
        return known
    return _SPARE[zlib.crc32(phase.encode()) % len(_SPARE)]


_ORDER = {phase: i for i, phase in enumerate(PHASE_COLORS)}


def phase_order(phases: set[str]) -> list[str]:
    """Pipeline order first, phases nobody named here after, by name."""
    return sorted(phases, key=lambda p: (_ORDER.get(p, len(_ORDER)), p))
