"""Run A against run B."""

import dataclasses

import pytest
from golden import CASES, build, case

from workbench.analysis import DiagnoseOptions, diagnose, diff
from workbench.render.verdict_text import render_diff, render_verdict


def test_fixing_the_copies_makes_the_copy_finding_go_away():
    before = case("copy_bound")
    fixed = build(dataclasses.replace(CASES["copy_bound"], source="pinned", copy_gbps=lambda n: 50.0,
                                      memory_mode="zerocopy"))
    d = diff(before, fixed, DiagnoseOptions(link_gbps=55, whatif=False))
    assert "copy_bound" in [f.id for f in d.went_away]
    assert d.settings == (("memory_mode", "pageable", "zerocopy"),)
    assert d.throughput.change > 0.1
    ntt = next(p for p in d.phases if p.name == "ntt_msm_h")
    assert ntt.change < -0.5
    idle = {i.name: i for i in d.idle}
    assert idle["copy_under_lock"].b < idle["copy_under_lock"].a
    text = render_diff(d, "before", "after")
    assert "went away in B: Slow host-to-device copies" in text and "memory_mode pageable -> zerocopy" in text


def test_a_run_against_itself_changes_nothing():
    trace = case("prep_bound")
    d = diff(trace, trace, DiagnoseOptions(whatif=False))
    assert not d.appeared and not d.went_away and not d.settings
    assert d.throughput.change == pytest.approx(0)
    assert all(p.change == pytest.approx(0) for p in d.phases if p.change is not None)
    assert [a.id for a, _ in d.persisted] == ["prep_bound"]


def test_rendered_verdict_quotes_evidence_spans():
    trace = case("prep_bound")
    text = render_verdict(diagnose(trace, DiagnoseOptions(whatif=False)), trace)
    assert "barrier/worker" in text and "evidence: spans" in text and "wait p" in text
