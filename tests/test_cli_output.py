"""What the commands print: a run's summary with or without a trace and the progress bar's last
figure, `diff` of emulated memory modes, `diagnose --brief`, and `whatif`'s options."""

from __future__ import annotations

import re
import sys

import pytest
from golden import case

from workbench.cli import main
from workbench.trace import save

SMALL = ["--backend", "cpu", "--log2-constraints", "5", "--partitions", "4"]
HEAD = re.compile(r"^completed: (\d+) partitions in (\d+\.\d+) s = (\d+\.\d) partitions/min", re.M)


def test_a_run_without_a_trace_is_summarised_from_its_own_count_and_clock(capsys):
    assert main(["run", *SMALL, "--no-trace", "--no-progress"]) == 0
    out = capsys.readouterr().out
    head = HEAD.search(out)
    assert head, out
    done, wall = int(head[1]), float(head[2])
    assert done == 4 and wall > 0
    # The wall is printed to 0.01 s and the rate to 0.1: the rate must lie within what the
    # printed wall allows (a 0.09 s run's wall is 0.085-0.095 s, a 6% spread).
    assert done / (wall + 0.005) * 60 - 0.05 <= float(head[3]) <= done / (wall - 0.005) * 60 + 0.05
    assert "no trace recorded" in out and "trace:" not in out


def test_the_bar_ends_on_the_summary_rate_and_diff_says_memory_is_emulated(tmp_path, capsys, monkeypatch):
    a, b = tmp_path / "a.wbtrace", tmp_path / "b.wbtrace"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # the bar draws on a terminal only
    assert main(["run", *SMALL, "--trace", str(a)]) == 0
    out, err = capsys.readouterr()
    bars = re.findall(r"\] (\d+)/4 partitions +[\d.]+s +([\d.]+)/min\n", err)
    summary = HEAD.search(out)
    assert bars and summary, (out, err)
    assert bars[-1] == (summary[1], summary[3])  # same partitions, same rate, to the digit

    assert main(["run", *SMALL, "--memory-mode", "zerocopy", "--no-progress", "--trace", str(b)]) == 0
    capsys.readouterr()
    assert main(["diff", str(a), str(b), "--no-whatif"]) == 0
    out = capsys.readouterr().out
    assert "settings: memory_mode pageable -> zerocopy" in out
    assert "note: memory is emulated in both runs (CPU backend)" in out


def test_diagnose_brief_is_the_headline_and_findings_only(tmp_path, capsys):
    path = save(case("copy_bound"), tmp_path / "t.wbtrace")
    assert main(["diagnose", str(path), "--link-gbps", "55"]) == 0
    full = capsys.readouterr().out.splitlines()
    assert main(["diagnose", str(path), "--link-gbps", "55", "--brief"]) == 0
    brief = capsys.readouterr().out.splitlines()
    assert brief[0] == full[0] and "Findings" in brief
    assert not [line for line in brief if re.fullmatch(r"[- ]*-[- ]*", line)]  # no table rule
    assert full[2].startswith("completed: ") and full[2] not in brief  # the throughput line
    assert not [line for line in brief if "share of the run" in line]
    findings = full[full.index("Findings"):]
    numbered = [line for line in findings if re.match(r" *\d+\. ", line)]
    assert numbered and all(line in brief for line in numbered)


def test_whatif_refuses_no_whatif_and_names_link_gbps(tmp_path, capsys):
    path = save(case("lock_serialised"), tmp_path / "t.wbtrace")
    with pytest.raises(SystemExit) as refused:
        main(["whatif", str(path), "--gpu-workers", "3", "--no-whatif"])
    assert refused.value.code == 2
    assert "unrecognized arguments: --no-whatif" in capsys.readouterr().err
    assert main(["whatif", str(path), "--zerocopy"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"workbench: error: {path}") and "--link-gbps" in err, err
