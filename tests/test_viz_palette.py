"""The palette: what must be told apart stays apart under each colour-vision deficiency;
spans are grouped into few legend entries by phase, role and time."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from colour_vision import SIMULATIONS, delta_e2000, lab, worst_difference

from workbench.importers import load_any
from workbench.viz.bars import trace_bars
from workbench.viz.palette import KERNEL_COLORS, OTHER_KERNELS, PHASE_COLORS, ROLE_COLORS, Kinds, legend_order

MIN_DELTA_E = 10.0  # CIEDE2000: well past "noticeably different" (about 2), for thin bars at a glance
MIN_DELTA_E_INSIDE = 15.0  # a thin bar drawn on the bar around it needs more
MIN_CHROMA_INSIDE = 20.0  # and one of the two must have a colour: no grey on grey
CASE_STUDY = "notebooks/data/h200_2e22/pageable_t14_w2.wbtrace"


def kernel_colours() -> list[str]:
    kinds = Kinds()
    names = [f"kernel_{i}" for i in range(len(KERNEL_COLORS) + 2)]
    return [kinds.colors[kinds.kind(name, "kernel", own=False)] for name in names]


# The kinds the Gantt must tell apart at a glance, by the names a trace gives them.
MUST_DIFFER = {
    "mutex hold": PHASE_COLORS["mutex_hold"],
    "mutex wait": PHASE_COLORS["mutex_wait"],
    "barrier wait, prep side": PHASE_COLORS["barrier_wait (prep)"],
    "barrier wait, consumer": PHASE_COLORS["barrier_wait"],
    "barrier wait, GPU side": PHASE_COLORS["barrier_wait (gpu)"],
    "copy (pipeline)": PHASE_COLORS["h2d_copy"],
    "copy (any trace)": ROLE_COLORS["copy"],
    "lock hold (any trace)": ROLE_COLORS["lock_hold"],
    "lock wait (any trace)": ROLE_COLORS["lock_wait"],
}
SAME_THING = {frozenset({"copy (pipeline)", "copy (any trace)"}),
              frozenset({"mutex hold", "lock hold (any trace)"}),
              frozenset({"mutex wait", "lock wait (any trace)"})}
# Drawn inside one another on a lane (inner, outer), as the pipeline nests them.
INSIDE = [(p, "mutex_hold") for p in ("ntt_msm_h", "h2d_copy", "barrier_wait", "barrier_wait (gpu)",
                                      "batch_add", "tail_msm")]
INSIDE += [(p, "ntt_msm_h") for p in ("h2d_copy", "ntt", "msm_h")] + [("barrier_wait (gpu)", "barrier_wait")]


def test_the_simulations_are_the_standard_ones():
    # Pure red under full protanopia loses most of its lightness and all its redness; white stays.
    assert lab("#ffffff", "deuteranopia") == pytest.approx((100.0, 0.0, 0.0), abs=0.5)
    l_normal, a_normal, _ = lab("#ff0000")
    l_protan, a_protan, _ = lab("#ff0000", "protanopia")
    assert a_normal > 75 and abs(a_protan) < 15 and l_protan < l_normal
    # Sharma, Wu and Dalal's CIEDE2000 test pair 1.
    assert delta_e2000((50, 2.6772, -79.7751), (50, 0, -82.7485)) == pytest.approx(2.0425, abs=1e-4)
    assert set(SIMULATIONS) == {"normal", "protanopia", "deuteranopia", "tritanopia"}


@pytest.mark.parametrize(("a", "b"), [pair for pair in itertools.combinations(MUST_DIFFER, 2)
                                      if frozenset(pair) not in SAME_THING])
def test_hold_waits_and_copies_differ_under_every_colour_vision(a, b):
    difference, vision = worst_difference(MUST_DIFFER[a], MUST_DIFFER[b])
    assert difference >= MIN_DELTA_E, f"{a} and {b}: ΔE {difference:.1f} under {vision}"


@pytest.mark.parametrize("other", list(MUST_DIFFER))
def test_kernels_differ_from_holds_waits_and_copies(other):
    for colour in kernel_colours():
        difference, vision = worst_difference(colour, MUST_DIFFER[other])
        assert difference >= MIN_DELTA_E, f"kernel {colour} and {other}: ΔE {difference:.1f} under {vision}"


@pytest.mark.parametrize(("inner", "outer"), INSIDE)
def test_a_bar_stands_out_from_the_bar_it_is_drawn_in(inner, outer):
    difference, vision = worst_difference(PHASE_COLORS[inner], PHASE_COLORS[outer])
    assert difference >= MIN_DELTA_E_INSIDE, f"{inner} inside {outer}: ΔE {difference:.1f} under {vision}"
    chroma = max(math.hypot(*lab(PHASE_COLORS[p])[1:]) for p in (inner, outer))
    assert chroma >= MIN_CHROMA_INSIDE, f"{inner} inside {outer}: grey on grey (chroma {chroma:.1f})"


def test_kernels_beyond_the_few_share_one_entry_and_roles_name_the_rest():
    kinds = Kinds()
    kinds.rank({("kernel", f"k{i}"): float(100 - i) for i in range(10)} | {("copy", "h2d"): 1e9})
    assert [kinds.kind(f"k{i}", "kernel", own=False) for i in range(10)] == (
        [f"k{i}" for i in range(len(KERNEL_COLORS))] + [OTHER_KERNELS] * (10 - len(KERNEL_COLORS)))
    assert kinds.kind("h2d", "copy", own=False) == "copy" and kinds.kind("d2h", "copy", own=False) == "copy"
    # A pipeline phase is its own entry on our threads, and its role elsewhere.
    assert kinds.kind("ntt", "consumer", own=True) == "ntt"
    assert kinds.kind("twiddles", "host", own=True) == "setup"
    assert legend_order({"copy": 5.0, "ntt": 1.0, OTHER_KERNELS: 9.0, "k0": 2.0, "synthesis": 0.5}) == [
        "synthesis", "ntt", "copy", "k0", OTHER_KERNELS]


def test_a_case_study_legend_keeps_the_longest_kernels_and_groups_the_rest():
    trace = load_any(CASE_STUDY)
    bars = trace_bars(trace)
    text = trace.strings.values
    on_streams = np.array(["/stream/" in text[t] for t in trace.spans.track.tolist()])
    names = np.array([text[n] for n in trace.spans.name.tolist()], dtype=object)
    time = trace.spans.end_ns - trace.spans.start_ns
    totals = {n: int(time[on_streams & (names == n)].sum()) for n in set(names[on_streams].tolist())}
    longest = sorted(totals, key=lambda n: -totals[n])[:len(KERNEL_COLORS)]
    kinds = set(bars.kind.tolist())
    assert set(longest) <= kinds and OTHER_KERNELS in kinds
    assert not kinds & (set(totals) - set(longest))  # the rest only under "other kernels"
    assert len(kinds) <= 40 < len(set(bars.phase.tolist()))
    # Every bar of a kind has that kind's one colour.
    pairs = set(zip(bars.kind.tolist(), bars.color.tolist(), strict=True))
    assert len(pairs) == len(kinds)


def test_a_case_study_legends_kernel_entries_differ_from_every_other_entry():
    """The case study's legend once gave four kernels the very colour of a pipeline phase beside
    them (affine_round and ntt_msm_h, msm_accumulate and msm_h, ...): each entry of a kernel, and
    "other kernels", must differ from every other entry at a glance."""
    bars = trace_bars(load_any(CASE_STUDY))
    colour = dict(zip(bars.kind.tolist(), bars.color.tolist(), strict=True))
    kernels = {kind for kind, role in zip(bars.kind.tolist(), bars.role.tolist(), strict=True)
               if role == "kernel"}
    assert len(kernels) == len(KERNEL_COLORS) + 1  # the named few and "other kernels"
    close = [(a, b, round(delta_e2000(lab(colour[a]), lab(colour[b])), 1))
             for a, b in itertools.combinations(sorted(colour), 2)
             if (a in kernels or b in kernels) and delta_e2000(lab(colour[a]), lab(colour[b])) < MIN_DELTA_E]
    assert not close, close
