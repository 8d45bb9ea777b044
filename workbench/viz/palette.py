"""The colours of every view, and the legend entries (kinds) that bars are grouped in.

Colours are chosen to stay apart under protanopia, deuteranopia and tritanopia as well as
normal vision (a test simulates each and measures CIEDE2000), by families a reader learns
once: the pipeline's GPU compute in blues and greens (a trace's kernels in hues of their own),
copies vermillion and orange, the lock wait pink, barrier waits amber (yellow on the prep side,
orange for the consumer's phase, dark brown for the GPU side's own record, which lies inside
it), the lock hold pale grey so that the work done under it stands out, host work in tans and
browns, one-off setup a pale blue-grey.

A bar's kind is its legend entry: a pipeline phase of our own threads is its own kind (the
one-off setup phases share "setup"); any other span is grouped by its role (model/roles.py):
kernels by name for the few that took longest and "other kernels" for the rest, host ranges
likewise, copies, memsets, syncs and the rest by role alone. A legend therefore stays a few
dozen entries long whatever a trace holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# Pipeline phases in pipeline order, which is also the order of legends and tables.
PHASE_COLORS = {
    "synthesis": "#C8A27A",
    "buffer_checkout": "#E6D5BE",
    "pool_checkout": "#D9C19F",
    "host_register": "#9C7A54",
    "prep_msm": "#8C6D46",
    "barrier_wait (prep)": "#F0E442",
    "upload": "#F4A582",
    "mutex_wait": "#CC79A7",
    "mutex_hold": "#DDDDDD",
    "ntt_msm_h": "#0072B2",
    "staging_copy": "#EE8866",
    "h2d_copy": "#D55E00",
    "host_unregister": "#B89B72",
    "ntt": "#56B4E9",
    "coset_intt": "#88CCEE",
    "msm_h": "#332288",
    "barrier_wait": "#E69F00",
    "barrier_wait (gpu)": "#553300",
    "prep_upload": "#F6C19A",
    "batch_add": "#009E73",
    "batch_add_g2": "#7FD1B9",
    "batch_add_cpu": "#7FD1B9",
    "tail_msm": "#117733",
    "tail_msm_g2": "#5AAE61",
    "tail_msm_cpu": "#5AAE61",
    "b_g2_msm": "#6699CC",
    "finish": "#7A5C3A",
    "verify": "#A88B6A",
}
SETUP = "setup"
SETUP_COLOR = "#BFD0DB"
# One-off phases of the run's setup, drawn on the run lane: one legend entry between them.
SETUP_PHASES = frozenset({
    "setup", "proving_key", "twiddles", "parse_key_points", "kernels", "upload_key", "link_probe",
    "warm_up", "synthesis_processes", "synthesis_collect",
})

# Kernels and host ranges keep their names for the few that took longest. A named kernel's
# colour is none of the pipeline phases' (a legend holds both: the case study's once showed
# affine_round in ntt_msm_h's blue): navy, green, violet, dark teal, plum, cornflower and, for
# the rest, lavender, each at least 11 CIEDE2000 from every phase and role colour and 20 from
# one another (tests/test_viz_palette.py).
KERNEL_COLORS = ("#224466", "#44DD88", "#BB44DD", "#447766", "#662277", "#5577DD")
OTHER_KERNELS, OTHER_KERNELS_COLOR = "other kernels", "#BBAADD"
HOST_COLORS = ("#C8A27A", "#8C6D46", "#E6D5BE", "#A88B6A")
OTHER_HOST, OTHER_HOST_COLOR = "other host work", "#D8CCBC"
NAMED_ROLES = {"kernel": (KERNEL_COLORS, OTHER_KERNELS, OTHER_KERNELS_COLOR),
               "host": (HOST_COLORS, OTHER_HOST, OTHER_HOST_COLOR)}

# Every other role by role alone; waits and holds as the pipeline's own.
ROLE_COLORS = {
    "copy": PHASE_COLORS["h2d_copy"],
    "memset": "#EE8866",
    "sync": "#AA4499",
    "launch": "#BBCC33",
    "runtime": "#C8C8C8",
    "lock_wait": PHASE_COLORS["mutex_wait"],
    "lock_hold": PHASE_COLORS["mutex_hold"],
    "cond_wait": "#E7A8CC",
    "barrier_wait": PHASE_COLORS["barrier_wait"],
    "producer": PHASE_COLORS["synthesis"],
    "prep": PHASE_COLORS["prep_msm"],
    "consumer": "#B08D68",
    "unit": "#EFEFEF",
    "os_call": "#A0A0A0",
    "other": "#8C8C8C",
}

# Counter series, one figure's series in this order (they differ by hue and lightness).
SERIES_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")

# Kinds that must be told apart at a glance, with the colour of each (the palette test
# checks every pair under each colour-vision simulation).
DISTINCT = {
    "lock hold": PHASE_COLORS["mutex_hold"],
    "lock wait": PHASE_COLORS["mutex_wait"],
    "barrier wait, prep side": PHASE_COLORS["barrier_wait (prep)"],
    "barrier wait, consumer": PHASE_COLORS["barrier_wait"],
    "barrier wait, GPU side": PHASE_COLORS["barrier_wait (gpu)"],
    "copy": ROLE_COLORS["copy"],
    "kernel": KERNEL_COLORS[0],
}
# What is drawn inside what (inner, outer): each must stand out from the bar around it.
NESTED = (
    *((phase, "mutex_hold") for phase in ("ntt_msm_h", "h2d_copy", "staging_copy", "barrier_wait",
                                          "barrier_wait (gpu)", "batch_add", "tail_msm", "b_g2_msm")),
    *((phase, "ntt_msm_h") for phase in ("h2d_copy", "staging_copy", "ntt", "coset_intt", "msm_h")),
    ("staging_copy", "h2d_copy"), ("barrier_wait (gpu)", "barrier_wait"),
    ("prep_upload", "batch_add"), ("batch_add_g2", "batch_add"), ("tail_msm_g2", "tail_msm"),
    ("h2d_copy", "upload"),
)

_ORDER = {kind: i for i, kind in enumerate([*PHASE_COLORS, SETUP])}


_BY_KIND: dict[str, str] = {OTHER_KERNELS: OTHER_KERNELS_COLOR, OTHER_HOST: OTHER_HOST_COLOR,
                            **ROLE_COLORS}


def phase_color(phase: str) -> str:
    """The colour of a pipeline phase (setup phases share one); any other name is a kind
    drawn in the role colour it was given, see `Kinds`."""
    if phase in PHASE_COLORS:
        return PHASE_COLORS[phase]
    if phase in SETUP_PHASES:
        return SETUP_COLOR
    return _BY_KIND.get(phase, ROLE_COLORS["other"])


def pipeline_kinds() -> list[str]:
    """The kinds a run of the pipeline draws, known before it starts (the live view's)."""
    return [*PHASE_COLORS, SETUP]


def series_color(index: int) -> str:
    return SERIES_COLORS[index % len(SERIES_COLORS)]


def phase_order(phases: Iterable[str]) -> list[str]:
    """Pipeline order first, phases nobody named here after, by name."""
    return sorted(set(phases), key=lambda p: (_ORDER.get(p, len(_ORDER)), p))


def legend_order(busy: Mapping[str, float]) -> list[str]:
    """Kinds as a legend lists them: pipeline phases in pipeline order, then the rest by the
    time they took, longest first (the "other ..." groups last)."""
    others = (OTHER_KERNELS, OTHER_HOST)
    return sorted(busy, key=lambda k: (_ORDER.get(k, len(_ORDER)), k in others, -busy[k], k))


class Kinds:
    """Which legend entry each span goes in, and its colour.

    For a whole trace, `rank` first hands the entries to the kernel and host names that took
    longest. The live view feeds it batch after batch: `rerank` hands them again to the names
    that took longest so far and says which names changed entry, so the view can move their
    bars already drawn (the first kernels to arrive are seldom the ones that take the time).
    A name keeps its colour while it keeps its entry.
    """

    def __init__(self, named: int = len(KERNEL_COLORS), named_host: int = len(HOST_COLORS)) -> None:
        self.limits = {"kernel": named, "host": named_host}
        self.named: dict[str, list[str]] = {role: [] for role in NAMED_ROLES}
        self.colors: dict[str, str] = {}
        self._name_color: dict[str, str] = {}

    def rank(self, totals: Mapping[tuple[str, str], float]) -> None:
        """`totals`: time per (role, name) over the whole trace; the longest get entries."""
        for (role, name), _ in sorted(totals.items(), key=lambda item: -item[1]):
            if role in self.named:
                self._claim(role, name)

    def rerank(self, totals: Mapping[tuple[str, str], float]) -> dict[str, tuple[str, str]]:
        """`totals`: time per (role, name) so far. Returns each name whose entry changed, with
        its new kind and colour."""
        changes: dict[str, tuple[str, str]] = {}
        for role, (colors, other, other_color) in NAMED_ROLES.items():
            names = [n for r, n in totals if r == role]
            top = sorted(names, key=lambda n: (-totals[(role, n)], n))[:self.limits[role]]
            kept = [n for n in self.named[role] if n in top]
            if len(kept) == len(self.named[role]) == len(top):
                continue
            for name in self.named[role]:
                if name not in top:
                    changes[name] = (other, other_color)
                    self.colors.setdefault(other, other_color)
            taken = {self._name_color[n] for n in kept}
            free = [c for c in colors if c not in taken]
            for k, name in enumerate(n for n in top if n not in kept):
                color = free[k % len(free)] if free else colors[0]
                self._name_color[name] = self.colors[name] = color
                changes[name] = (name, color)
            self.named[role] = kept + [n for n in top if n not in kept]
        return changes

    def _claim(self, role: str, name: str) -> bool:
        names = self.named[role]
        if name in names:
            return True
        if len(names) >= self.limits[role]:
            return False
        colors = NAMED_ROLES[role][0]
        taken = {self._name_color[n] for n in names}
        self._name_color[name] = next((c for c in colors if c not in taken), colors[len(names) % len(colors)])
        names.append(name)
        return True

    def kind(self, phase: str, role: str, own: bool) -> str:
        """`own`: the span lies on one of the pipeline's own threads (its phase names it)."""
        if own and phase in PHASE_COLORS:
            kind, color = phase, PHASE_COLORS[phase]
        elif own and phase in SETUP_PHASES:
            kind, color = SETUP, SETUP_COLOR
        elif role in NAMED_ROLES:
            _, other, other_color = NAMED_ROLES[role]
            if self._claim(role, phase):
                kind, color = phase, self._name_color[phase]
            else:
                kind, color = other, other_color
        else:
            kind, color = role, ROLE_COLORS.get(role, ROLE_COLORS["other"])
        self.colors.setdefault(kind, color)
        return kind
