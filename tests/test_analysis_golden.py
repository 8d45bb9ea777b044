"""Golden cases: traces with a known cause; the verdict must name it, with its numbers."""

import json
from pathlib import Path

import numpy as np
import pytest
from golden import CASES, case

from workbench.analysis import DiagnoseOptions, diagnose
from workbench.importers import load_any

DATA = Path(__file__).parent / "data"


def _check(verdict, expected):
    assert verdict.findings, verdict.notes
    assert verdict.findings[0].id == expected["top"], [(f.id, f.cost) for f in verdict.findings]
    for absent in expected["absent"]:
        assert absent not in verdict.ids, absent
    for finding_id, numbers in expected["numbers"].items():
        finding = verdict.get(finding_id)
        for name, (low, high) in numbers.items():
            assert low <= finding.numbers[name] <= high, (finding_id, name, finding.numbers[name])
    for finding_id, (low, high) in expected["gain"].items():
        best = verdict.get(finding_id).best_prediction
        assert best is not None and low <= best.gain <= high, (finding_id, best)
    for finding_id, fragments in expected["sentence"].items():
        for fragment in fragments:
            assert fragment in verdict.get(finding_id).sentence, (fragment, verdict.get(finding_id).sentence)
    assert verdict.headline.startswith(verdict.findings[0].title)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_case_names_its_cause(name):
    expected = json.loads((DATA / name / "expected.json").read_text())
    trace = case(name)
    verdict = diagnose(trace, DiagnoseOptions(**expected["options"]))
    _check(verdict, expected)
    # The replay of a golden run reproduces it: the structure the replay rebuilds is the real one.
    assert abs(verdict.replay_error) < 0.02


def test_seed_log_tells_the_production_story():
    expected = json.loads((DATA / "cuzk_seed" / "expected.json").read_text())
    trace = load_any(DATA / "cuzk_seed" / "daemon.log")
    _check(diagnose(trace, DiagnoseOptions(**expected["options"])), expected)
    # Without copy sizes the copy rate is unknown; the decomposition still tells the story.
    verdict = diagnose(trace, DiagnoseOptions(link_gbps=55))
    assert verdict.findings[0].id in expected["without_sizes"]["top_any_of"]
    assert set(expected["without_sizes"]["present"]) <= set(verdict.ids)
    swing = verdict.get("variable_lock_phase")
    assert "batch_add and tail_msm stay constant" in swing.sentence
    assert swing.numbers["hold_variance_share"] > 0.9


def _durations(trace, name):
    mask = trace.span_mask(name=name) & ~trace.span_mask(track_prefix="gpu")
    return trace.durations_ns(mask), np.flatnonzero(mask)


def test_copy_numbers_match_the_spans_that_prove_them():
    trace = case("copy_bound")
    finding = diagnose(trace, DiagnoseOptions(link_gbps=55)).get("copy_bound")
    durations, idx = _durations(trace, "h2d_copy")
    rates = np.array([trace.spans.attrs[i]["bytes"] for i in idx]) / durations
    assert finding.numbers["copy_gbps"] == pytest.approx(float(np.median(rates)), rel=1e-6)
    ntt, _ = _durations(trace, "ntt_msm_h")
    assert finding.numbers["ntt_msm_h_swing"] == pytest.approx(ntt.max() / ntt.min(), rel=1e-6)
    # The evidence is the slowest copies and the longest and shortest ntt_msm_h.
    names = {trace.span(i).name for i in finding.evidence.spans}
    assert names == {"h2d_copy", "ntt_msm_h"}
    copies = [i for i in finding.evidence.spans if trace.span(i).name == "h2d_copy"]
    assert max(trace.span(i).duration_ns for i in copies) == durations.max()
    assert finding.evidence.partitions


def test_prep_wait_equals_the_prep_overrun_of_every_round():
    trace = case("prep_bound")
    finding = diagnose(trace, DiagnoseOptions(whatif=False)).get("prep_bound")
    ntt_end = {s.partition: s.end_ns for s in trace.select(name="ntt_msm_h")}
    prep_end = {s.partition: s.end_ns for s in trace.select(name="prep_msm")}
    overrun = sum(max(prep_end[p] - ntt_end[p], 0) for p in ntt_end) / 1e6
    assert finding.numbers["waited_ms"] == pytest.approx(overrun)
    assert finding.numbers["prep_last"] == sum(prep_end[p] > ntt_end[p] for p in ntt_end)
    assert not finding.predictions  # what-if switched off


def test_utilisation_names_each_figure_for_what_it_is():
    verdict = diagnose(case("copy_bound"), DiagnoseOptions(whatif=False))
    (gpu,) = verdict.utilisation
    # Device records exist: kernels busy less than the host believes (mutex held), NVML agrees.
    assert gpu.kernel_busy < gpu.host_timed_compute < gpu.mutex_held
    assert gpu.nvml_duty_cycle == pytest.approx(gpu.kernel_busy, abs=0.05)
    assert 0 < gpu.copy_busy < 0.1
    assert gpu.held_over_compute == pytest.approx(gpu.mutex_held / gpu.kernel_busy)
    plain = diagnose(case("prep_bound"), DiagnoseOptions(whatif=False)).utilisation[0]
    assert plain.kernel_busy is None and plain.copy_busy is None and plain.nvml_duty_cycle is None
    assert plain.host_timed_compute is not None


def test_idle_by_cause_adds_up_and_blames_the_known_cause():
    for name, cause in (("copy_bound", "copy_under_lock"), ("prep_bound", "barrier"),
                        ("synthesis_starved", "waiting_for_synthesis")):
        (idle,) = diagnose(case(name), DiagnoseOptions(whatif=False)).idle
        assert sum(c.ms for c in idle.causes) == pytest.approx(idle.idle_ms)
        assert idle.busy_ms + idle.idle_ms == pytest.approx(idle.window_ms)
        assert idle.causes[0].cause == cause, (name, idle.causes)
        assert idle.causes[0].evidence
        locked = ("copy_under_lock", "barrier", "other_under_lock")
        under_lock = sum(c.ms for c in idle.causes if c.cause in locked)
        assert idle.mutex_free_ms == pytest.approx(idle.idle_ms - under_lock)
