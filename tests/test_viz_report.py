"""The self-contained HTML report, its verdict section and the `report` / `lab` commands."""

from __future__ import annotations

import re
import types
from dataclasses import dataclass

import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from workbench import cli
from workbench.analysis import verdict as analysis_verdict
from workbench.config import RunConfig
from workbench.pipeline.run import run_pipeline
from workbench.trace import store
from workbench.trace.container import Trace
from workbench.viz.findings import diagnose
from workbench.viz.report import render_report


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Trace:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "srs-cache"))
        return run_pipeline(RunConfig(backend="cpu", partitions=3, log2_constraints=6)).trace


@dataclass
class FakeFinding:
    title: str
    sentence: str
    suggestion: str
    cost: float
    evidence: object


def fake_verdict(monkeypatch, diagnose_fn) -> None:
    monkeypatch.setattr(analysis_verdict, "diagnose", diagnose_fn)


def test_report_is_one_file_that_needs_no_network(trace):
    html = render_report(trace, title="my run")
    # No tag loads anything: scripts and styles are all inline (the scripts' own text, Bokeh's
    # widgets among it, may well spell out tags it builds).
    assert not re.search(r"<script[^>]*src=", html)
    outside = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)
    assert not re.search(r"<(link|img)[^>]*(src|href)=", outside)
    assert "<title>my run</title>" in html and "run configuration" in html
    assert "memory_mode" in html and "GPU mutex per worker" in html and "phases" in html
    assert "Bokeh" in html and "gantt_bars_0" in html and "distributions_boxes" in html
    assert "emulated" in html


def test_report_shows_the_verdict_when_the_analysis_gives_one(trace, monkeypatch):
    evidence = types.SimpleNamespace(spans=(0, 1), partitions=(2,))
    prediction = types.SimpleNamespace(change="zerocopy", gain=0.35, measured_per_min=10.0,
                                       predicted_per_min=13.5)
    finding = FakeFinding("ntt_msm_h swings 3.3x", "its copy runs at 2.8 GB/s", "use zerocopy", 0.4, evidence)
    finding.predictions = (prediction,)  # type: ignore[attr-defined]
    fake_verdict(monkeypatch, lambda t: types.SimpleNamespace(
        headline="copy-bound under the lock", findings=[finding], notes=["memory emulated"]))
    html = render_report(trace)
    for text in ("copy-bound under the lock", "ntt_msm_h swings 3.3x (40% of the run)",
                 "its copy runs at 2.8 GB/s", "use zerocopy", "zerocopy: +35% throughput",
                 "2 spans of partitions 2, e.g. ", "note: memory emulated"):
        assert text in html, text


def test_a_failing_diagnosis_shows_its_error(trace, monkeypatch):
    def broken(t):
        raise KeyError("missing column")

    fake_verdict(monkeypatch, broken)
    with pytest.raises(KeyError, match="missing column"):
        render_report(trace)


def test_verdict_accepts_plain_lists_and_dicts(trace, monkeypatch):
    findings = [{"summary": "lock-serialised", "numbers": {"held": 0.9}}, "balanced"]
    fake_verdict(monkeypatch, lambda t: findings)
    verdict = diagnose(trace)
    assert [title for title, _ in verdict.findings] == ["lock-serialised", "balanced"]
    assert verdict.findings[0][1] == (("numbers", "held: 0.9"),)


def test_the_real_diagnosis_fills_the_section(trace):
    assert diagnose(trace).headline


def test_report_command_writes_the_file(trace, tmp_path, capsys):
    path = store.save(trace, tmp_path / "run.wbtrace")
    assert cli.main(["report", str(path), "-o", str(tmp_path / "out" / "r.html")]) == 2
    assert "folder" in capsys.readouterr().err and not (tmp_path / "out").exists()
    (tmp_path / "out").mkdir()
    assert cli.main(["report", str(path), "-o", str(tmp_path / "out" / "r.html")]) == 0
    assert (tmp_path / "out" / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert "opens without network" in capsys.readouterr().out
    assert cli.main(["report", str(path), "--no-verdict"]) == 0
    assert "verdict left out" in (tmp_path / "run.html").read_text()


def test_a_report_of_a_file_is_named_by_the_file(trace, tmp_path, capsys):
    """Reports of two runs once had the same title ("workbench run: completed, 3 partitions"):
    the page, its heading and its figures carry the file's name unless --title gives one."""
    path = store.save(trace, tmp_path / "pageable_t2.wbtrace")
    assert cli.main(["report", str(path), "--no-verdict"]) == 0
    html = (tmp_path / "pageable_t2.html").read_text()
    heading = "pageable_t2.wbtrace: completed, 3 partitions"
    assert f"<title>{heading}</title>" in html and f"<h1>{heading}</h1>" in html
    assert "pageable_t2.wbtrace: Gantt" in html and "pageable_t2.wbtrace: duration per phase" in html
    titled = ["--title", "before", "-o", str(tmp_path / "b.html")]
    assert cli.main(["report", str(path), "--no-verdict", *titled]) == 0
    named = (tmp_path / "b.html").read_text()
    assert "<title>before</title>" in named and "pageable_t2.wbtrace" not in named
    capsys.readouterr()


def test_report_command_rejects_bad_input(tmp_path, trace, capsys):
    assert cli.main(["report", str(tmp_path / "missing.wbtrace")]) == 2
    assert "no file at" in capsys.readouterr().err
    path = store.save(trace, tmp_path / "run.wbtrace")
    assert cli.main(["report", str(path), "--max-bars", "5"]) == 2
    assert "--max-bars 5 is not allowed" in capsys.readouterr().err


def test_lab_command_opens_the_notebooks_folder(tmp_path, capsys):
    assert cli.main(["lab", "--notebooks", str(tmp_path), "--port", "9999", "--no-browser", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "-m jupyterlab" in out and f"--ServerApp.root_dir={tmp_path}" in out and "--port=9999" in out
    assert cli.main(["lab", "--notebooks", str(tmp_path / "nope"), "--dry-run"]) == 2
    assert "no notebooks folder" in capsys.readouterr().err


@pytest.mark.parametrize("ip, warned", [
    ("0.0.0.0", True), ("::", True), ("192.168.1.7", True), ("10.0.0.1", True), ("lab.example.org", True),
    ("127.0.0.1", False), ("127.0.0.2", False), ("::1", False), ("[::1]", False), ("localhost", False),
])
def test_lab_warns_when_it_listens_beyond_this_machine(ip, warned):
    from workbench.commands.report import exposure_warning

    warning = exposure_warning(ip)
    assert (warning is not None) == warned
    if warned:
        assert f"--ip {ip}" in warning and "token" in warning and "shell" in warning


def test_lab_prints_the_warning_before_it_would_start_the_server(tmp_path, capsys):
    assert cli.main(["lab", "--notebooks", str(tmp_path), "--ip", "0.0.0.0", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("workbench: warning: --ip 0.0.0.0 listens on every network interface")
    assert "shell" in err
    assert cli.main(["lab", "--notebooks", str(tmp_path), "--dry-run"]) == 0  # 127.0.0.1: nothing to say
    assert capsys.readouterr().err == ""


def test_a_missing_optional_library_names_the_extra_to_install():
    from workbench.viz.deps import MissingExtra, require

    with pytest.raises(MissingExtra, match=r"pip install 'workbench\[notebook\]'"):
        require("a_library_that_is_not_installed")
