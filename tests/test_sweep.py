"""`workbench sweep` on the local executor (no Ray needed): grid files checked as `workbench run`
checks its knobs, the runs in the grid's order, a failing run reported while the others go on,
Ctrl-C keeping the finished runs, and the same proofs as `workbench run` of the same config."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.sweep import load_grid, parse_grid, read_index
from workbench.trace import load

ROOT = Path(__file__).resolve().parents[1]
BASE = '[base]\nbackend = "cpu"\npartitions = 3\nlog2_constraints = 5\n'


def write(tmp_path: Path, text: str, name: str = "grid.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "key", "allowed"), [
    (BASE + "memory_mode = \"fast\"\n", "base.memory_mode", "one of pageable | pinned | zerocopy"),
    (BASE + "[cells.a]\nsynth_threadz = 3\n", "cells.a.synth_threadz", "allowed: backend, bool_fraction"),
    (BASE + "[cells.a]\ngpu_workers = 0\n", "cells.a.gpu_workers", "an integer from 1 to 16"),
    ("order = \"random\"\n" + BASE, "order", "one of grid | interleave | shuffle"),
    ("repeat = 2\n" + BASE, "repeat", "allowed: base, axes, cells, repeats"),
    (BASE + "[axes]\nlock_scope = \"compute\"\n", "axes.lock_scope", "a non-empty list of values"),
    (BASE + "[axes]\nlock_scope = [\"coarse\", \"tight\"]\n", "axes.lock_scope", "one of coarse | compute"),
    (BASE + "[cells.a]\ninject_fault = \"nowhere:1\"\n", "cells.a.inject_fault", "no phase 'nowhere'"),
    (BASE + "[cells.a]\n[[checks]]\nbase = \"a\"\ncell = \"b\"\n", "checks[0].cell", "cells: a"),
    (BASE + "[cells.\"a b\"]\n", "cells.a b", "letters, digits"),
])
def test_a_bad_grid_is_refused_in_one_line_naming_file_key_and_what_is_allowed(
        tmp_path, capsys, text, key, allowed):
    grid = write(tmp_path, text)
    assert main(["sweep", str(grid), "--local", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"workbench: error: {grid}: {key}") and allowed in err, err
    assert not (tmp_path / "out").exists()  # refused before any folder or run


def test_bad_toml_and_json_name_their_file(tmp_path, capsys):
    for name, text in (("g.toml", "[base\n"), ("g.json", '{"base": {"partitions": 2,}}')):
        grid = write(tmp_path, text, name)
        assert main(["sweep", str(grid), "--local"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{grid}: " in err and ("TOML" in err or "JSON" in err), err


def test_orders_and_axes():
    grid = parse_grid({"base": {"backend": "cpu"}, "repeats": 2, "order": "interleave",
                       "axes": {"memory_mode": ["pageable", "zerocopy"], "gpu_workers": [1, 3]}})
    names = [c.name for c in grid.cells]
    assert names == ["memory_mode-pageable+gpu_workers-1", "memory_mode-pageable+gpu_workers-3",
                     "memory_mode-zerocopy+gpu_workers-1", "memory_mode-zerocopy+gpu_workers-3"]
    assert grid.cells[3].config.memory_mode == "zerocopy" and grid.cells[3].config.gpu_workers == 3
    runs = grid.runs()
    assert [(r.name, r.repeat) for r in runs] == [(n, k) for k in range(2) for n in names]
    by_cell = parse_grid({"repeats": 2, "order": "grid", "cells": {"a": {}, "b": {}}}).runs()
    assert [r.label for r in by_cell] == ["a.r0", "a.r1", "b.r0", "b.r1"]
    shuffled = [parse_grid({"repeats": 3, "order": "shuffle", "seed": s, "cells": {"a": {}, "b": {}}}).runs()
                for s in (1, 1, 2)]
    labels = [[r.label for r in runs] for runs in shuffled]
    assert labels[0] == labels[1] and sorted(labels[0]) == ["a.r0", "a.r1", "a.r2", "b.r0", "b.r1", "b.r2"]
    assert labels[0] != labels[2]  # another seed, another order (fixed seeds: this holds)


def test_the_case_study_grid_file_is_valid_and_names_its_sixteen_cells():
    grid = load_grid(ROOT / "benchmarks" / "case_study.toml")
    assert len(grid.cells) == 16 and grid.cells[0].name == "zerocopy_t14_w2"
    t1 = next(c for c in grid.cells if c.name == "pageable_t1_w2").config
    assert (t1.synth_threads, t1.synth_lookahead, t1.partitions, t1.backend) == (1, 1, 8, "gpu")
    assert {(c.base, c.cell) for c in grid.checks} >= {("pageable_t14_w2", "zerocopy_t14_w2")}


def test_a_failing_run_is_reported_and_the_others_go_on_with_the_same_proofs_as_workbench_run(
        tmp_path, capsys):
    grid = write(tmp_path, "proofs = true\n" + BASE + '[cells.good]\nmemory_mode = "zerocopy"\n'
                 '[cells.broken]\ninject_fault = "tail_msm:1"\n[cells.after]\nseed = 5\n')
    out = tmp_path / "sweep"
    assert main(["sweep", str(grid), "--local", "--out", str(out), "--no-progress"]) == 1
    captured = capsys.readouterr()
    index = read_index(out)
    assert [(e.label, e.status) for e in index.entries] == [
        ("good", "completed"), ("broken", "failed"), ("after", "completed")]
    broken = index.entries[1]
    assert "fault injected into tail_msm of partition 1" in broken.error
    assert "broken: failed" in captured.err and "fault injected into tail_msm" in captured.err
    assert index.status == "completed" and index.executor == "local"
    for entry in index.entries:
        assert load(out / entry.trace).config == entry.config and entry.seed == entry.config["seed"]
        assert entry.host and entry.end >= entry.start
    assert "good" in captured.out and "after" in captured.out  # the table
    # The same config through `workbench run`: the same proofs, byte for byte.
    direct = tmp_path / "direct.json"
    assert main(["run", "--backend", "cpu", "--partitions", "3", "--log2-constraints", "5", "--seed", "5",
                 "--no-trace", "--no-progress", "--proofs", str(direct)]) == 0
    assert (out / "after.proofs.json").read_bytes() == direct.read_bytes()
    assert json.loads(direct.read_text())["proofs"]
    assert (out / "good.proofs.json").read_bytes() != direct.read_bytes()  # another seed: other proofs


def test_summarize_reads_the_folder_again_and_writes_the_report(tmp_path, capsys):
    grid = write(tmp_path, "repeats = 2\n" + BASE + '[cells.a]\n[cells.b]\nmemory_mode = "pinned"\n'
                 '[report]\ntitle = "two cells"\npairs = [["a", "b"]]\n')
    out = tmp_path / "sweep"
    assert main(["sweep", str(grid), "--local", "--out", str(out), "--no-progress"]) == 0
    first = capsys.readouterr().out
    report, figures = tmp_path / "r.html", tmp_path / "f.json"
    assert main(["sweep", "--summarize", str(out), "--report", str(report), "--json", str(figures)]) == 0
    again = capsys.readouterr().out
    table = [line for line in first.splitlines() if line.startswith(("a ", "b "))]
    assert table and all(line in again for line in table)
    data = json.loads(figures.read_text())
    index = read_index(out)
    for cell in ("a", "b"):
        runs = [e for e in index.entries if e.cell == cell]
        measured = sorted(load(out / e.trace).meta["partitions_done"] for e in runs)
        assert measured == [3, 3] and data["cells"][cell]["runs"] == 2
        spread = data["cells"][cell]["spreads"]["throughput_per_min"]
        assert spread["low"] <= spread["median"] <= spread["high"] and spread["count"] == 2
    html = report.read_text()
    assert "two cells" in html and "Across repeats" in html and "a against b" in html
    assert main(["sweep", str(grid), "--local", "--out", str(out)]) == 2  # a folder holds one sweep
    assert "holds a sweep already" in capsys.readouterr().err


def test_ctrl_c_keeps_finished_runs_and_says_which_were_cut_short(tmp_path):
    grid = write(tmp_path, '[base]\nbackend = "cpu"\nlog2_constraints = 8\npartitions = 40\n'
                 "synth_threads = 1\n[cells.a]\npartitions = 2\n[cells.b]\n[cells.c]\n[cells.d]\n")
    out = tmp_path / "sweep"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "sweep", str(grid), "--local", "--out",
                             str(out), "--no-progress"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # a run finished, the next one under way
        if (out / "index.json").exists() and read_index(out).entries[1].status == "running":
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError("the sweep did not get to its second run")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    index = read_index(out)
    assert index.status == "interrupted"
    assert [e.status for e in index.entries] == ["completed", "cut_short", "not_run", "not_run"]
    assert load(out / index.entries[0].trace).meta["partitions_done"] == 2
    cut = load(out / index.entries[1].trace)  # the stopped run's trace holds what it did
    assert cut.meta["outcome"] == "stopped" and cut.meta["partitions_done"] < 40
    assert "cut short" in stderr and "Traceback" not in stderr
    assert "a " in stdout  # the finished run's table


def test_the_notebook_view_fills_in_as_runs_end_and_opens_a_runs_gantt(tmp_path):
    pytest.importorskip("ipywidgets", reason="the notebook extra is not installed")
    import workbench.notebook as wb

    grid = {"base": {"backend": "cpu", "partitions": 2, "log2_constraints": 5},
            "cells": {"quiet": {}, "broken": {"inject_fault": "finish:0"}}}
    view = wb.sweep(grid, tmp_path / "sweep", local=True, wait=True)
    assert view.done and view.error is None and view.index.status == "completed"
    html = view.table.value
    assert "quiet" in html and "completed" in html and "fault injected into finish of partition 0" in html
    rate, headline = view.headlines["quiet"]
    assert rate > 0 and headline and headline.split(":")[0] in html  # the verdict's headline in its row
    assert list(view.choice.options) == ["quiet", "broken"] and view.stop_button.disabled
    opened = []
    view.open_gantt = opened.append
    view.choice.value = "broken"
    view.gantt_button.click()
    assert opened == [tmp_path / "sweep" / "broken.wbtrace"]


def test_without_ray_the_runs_go_one_after_another_here_and_it_says_so(tmp_path, capsys, monkeypatch):
    import workbench.sweep.ray_executor as ray_executor

    monkeypatch.setattr(ray_executor, "ray_unavailable_reason", lambda: "Ray is not installed (test)")
    grid = write(tmp_path, BASE + "[cells.a]\n")
    assert main(["sweep", str(grid), "--out", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err
    assert "executor local" in err and "one after another in this process: Ray is not installed (test)" in err
    assert read_index(tmp_path / "s").executor == "local"
    assert main(["sweep", str(grid), "--address", "10.0.0.1:6379", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "workbench: error: --address and --exclusive-host need Ray: Ray is not installed (test)"
