"""The fleet view: many hosts' files read at once, each host's bound named, the hosts ranked.

The truth is the planting (tests/fleet_hosts.py writes each host's daemon log from the
daemon's format strings with one bottleneck planted), never the workbench's own output: the
bound planted, the figures planted (swing of ntt_msm_h, copy rate), the lines written.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import re
import sqlite3
import statistics
from collections import Counter
from pathlib import Path

import pytest
from fleet_hosts import COPY_BYTES, LINK_GBPS, MIX, plant, plant_garbage

from workbench.analysis.fleet import rank, unreadable
from workbench.analysis.verdict import DiagnoseOptions
from workbench.cli import main
from workbench.fleet import FleetError, expand, read_fleet
from workbench.fleet.read import host_from_content, host_from_name
from workbench.model.pipeline import CUZK_NTT_H_PARTS
from workbench.render.fleet_text import render_fleet

DATA = Path(__file__).parent / "data"
NSYS = DATA / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"
KINETO = [DATA / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz",
          DATA / "kineto" / "triton_example_triton_example.json.gz"]
OPTIONS = DiagnoseOptions(LINK_GBPS, COPY_BYTES)
PIPELINE_BOUNDS = {"copy_bound", "variable_lock_phase", "lock_serialised", "prep_bound", "synthesis_starved",
                   "workers_short", "staging", "gpu_bound", "gpu_imbalance", "host_contention"}
# Each span name's figure in the daemon's line it was read from.
KEYS = {"ntt_msm_h": "ntt_msm_h_ms", "barrier_wait": "barrier_wait_ms", "batch_add": "batch_add_ms",
        "tail_msm": "tail_msm_ms", "prep_msm": "prep_msm_ms", "b_g2_msm": "b_g2_msm_ms",
        "hold": "mutex_held_ms",
        "synthesis": "synth_ms", "pre_lock_cpu": "pre_lock_cpu_ms", "split_vectors": "split_vectors_ms"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet")
    truth = plant(folder)
    garbage = plant_garbage(folder)
    read = read_fleet(expand([folder]), OPTIONS)  # the default: a process pool
    return truth, garbage, read


def test_every_planted_bound_is_named(fleet):
    truth, garbage, read = fleet
    assert not read.interrupted and read.files == len(MIX) + len(garbage)
    assert read.parallel.startswith("process")
    by_host = {r.host: r for r in read.records}
    # Hosts are named by their logs' own lines (the files are cuzk-NN.log).
    assert set(by_host) == set(truth) | {"notes", "broken", "empty"}
    wrong = {host: (planted.bound, by_host[host].bound) for host, planted in truth.items()
             if by_host[host].group != planted.bound}
    assert wrong == {}
    for host in ("notes", "broken", "empty"):
        record = by_host[host]
        file = next(f for f in garbage if host in f.name)
        assert not record.readable and record.error.startswith(str(file))


def test_the_hosts_rank_by_bound_then_cost(fleet):
    truth, garbage, read = fleet
    view = rank(read.records)
    planted = Counter(p.bound for p in truth.values())
    problems = sorted((b for b in planted if b != "gpu_bound"), key=lambda b: -planted[b])
    order = [*problems, "gpu_bound", "unreadable"]
    assert [c.group for c in view.counts] == order
    assert [c.hosts for c in view.counts] == [planted[b] for b in order[:-1]] + [len(garbage)]
    assert view.sentence.startswith(f"{planted[order[0]]} hosts copy-bound, {planted['lock_serialised']} "
                                    f"lock-serialised, {planted['synthesis_starved']} synthesis-starved")
    assert view.sentence.endswith(f"{len(garbage)} unreadable")
    groups = [r.group for r in view.records]
    assert groups == sorted(groups, key=order.index)
    for group in order:
        costs = [r.cost for r in view.records if r.group == group]
        assert costs == sorted(costs, reverse=True), group


def test_the_key_numbers_are_the_planted_ones(fleet):
    truth, _, read = fleet
    by_host = {r.host: r for r in read.records}
    for host, planted in truth.items():
        if planted.bound != "copy_bound":
            continue
        ntt = [c.ntt_msm_h for c in planted.calls]
        copies = [c.ntt_msm_h - sum(getattr(c, k) if k != "ntt_kernels" else c.ntt_kernels
                                    for k in CUZK_NTT_H_PARTS) for c in planted.calls]
        numbers = by_host[host].numbers
        assert numbers["ntt_msm_h_swing"] == pytest.approx(max(ntt) / min(ntt), rel=1e-6), host
        rate = statistics.median(COPY_BYTES / (ms * 1e6) for ms in copies)
        assert numbers["copy_gbps"] == pytest.approx(rate, rel=0.01), host
        assert numbers["reference_gbps"] == LINK_GBPS


def test_the_evidence_names_the_log_lines_that_show_it(fleet):
    truth, _, read = fleet
    checked = 0
    for r in read.records:
        if r.host not in truth or r.bound == "gpu_bound":
            continue
        assert r.evidence, r.host
        lines = truth[r.host].file.read_text().splitlines()
        for e in r.evidence:
            assert e.line is not None and e.where(r.source) == f"{truth[r.host].file.name}:{e.line}"
            text = lines[e.line - 1]
            if e.name == "h2d_copy":
                assert "CUZK_NTT_H:" in text, text
            elif e.name == "wait":
                key = "mutex_wait_ms" if e.track.startswith("mutex/") else "barrier_wait_ms"
                assert f"{key}={round(e.ms)}" in text, (e, text)
            else:
                assert f"{KEYS[e.name]}={round(e.ms)}" in text, (e, text)
            checked += 1
    assert checked > len(truth)


def test_the_table_shows_every_host_safely(fleet):
    _, _, read = fleet
    view = rank(read.records)
    text = render_fleet(view)
    rows = text.splitlines()[4:]  # the counts, a blank line, the headers and their rule
    assert len(rows) == len(read.records)
    assert [row.split()[1] for row in rows] == [r.host for r in view.records]
    hostile = unreadable("evil\x1b]0;pwned\x07", "x.log", "x.log: bad\x1b[2J")
    assert "\x1b" not in render_fleet(rank([hostile]))


def test_foreign_traces_get_a_program_verdict_and_do_not_break_the_table(tmp_path):
    planted = plant(tmp_path, ("copy", "healthy"))
    files = [*sorted(planted[h].file for h in planted), NSYS, *KINETO]
    read = read_fleet(files, OPTIONS, parallel="serial")
    by_source = {r.source: r for r in read.records}
    for path in (NSYS, *KINETO):
        record = by_source[str(path)]
        assert record.readable and not record.pipeline, record
        assert record.bound not in PIPELINE_BOUNDS and "mutex_held" not in record.numbers
        assert record.kind == ("nsys" if path == NSYS else "chrome")
    with sqlite3.connect(NSYS) as db:
        (hostname,) = db.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV "
                                 "WHERE name = 'Hostname'").fetchone()
    assert by_source[str(NSYS)].host == hostname
    assert by_source[str(KINETO[1])].host == "triton_example_triton_example"  # a Kineto trace names no host
    with gzip.open(KINETO[0]) as f:
        kernels = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels and by_source[str(KINETO[0])].bound.startswith("idle_")  # its GPU waited for something
    text = render_fleet(rank(read.records))
    assert all(r.host in text for r in read.records)
    assert {r.group for r in read.records if r.pipeline} == {"copy_bound", "gpu_bound"}


def test_hosts_are_named_from_the_content_else_the_file(tmp_path):
    lines = {"journald.log": "Mar  2 10:00:03.123 gpu-17.dc2 cuzk[2231]: CUZK_TIMING: prep_msm_ms=3\n",
             "iso.log": "2026-03-02T10:00:03+0000 rack4n2 cuzk[7]: CUZK_TIMING: prep_msm_ms=3\n",
             "level.log": "2026-03-02T10:00:03Z INFO cuzk: CUZK_TIMING: prep_msm_ms=3\n",
             "bare.log": "CUZK_TIMING: prep_msm_ms=3\n"}
    for name, text in lines.items():
        (tmp_path / name).write_text(text)
    named = {name: host_from_content(tmp_path / name, "cuzk") for name in lines}
    assert named == {"journald.log": "gpu-17.dc2", "iso.log": "rack4n2", "level.log": None, "bare.log": None}
    assert host_from_name(Path("a/node3.json.gz")) == "node3" and host_from_name(Path("n.wbtrace")) == "n"
    twins = rank([unreadable("n1", "a/x.log", "r"), unreadable("n1", "b/y.log", "r")])
    assert sorted(r.host for r in twins.records) == ["n1 (x.log)", "n1 (y.log)"]


def test_a_directory_expands_to_its_readable_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").write_text("x")
    for name in ("b.log", "a.log", "sub/c.log", "locked.log"):
        (tmp_path / name).write_text("x")
    os.chmod(tmp_path / "locked.log", 0)
    readable = os.access(tmp_path / "locked.log", os.R_OK)  # root reads anything
    got = [p.relative_to(tmp_path).as_posix() for p in expand([tmp_path])]
    assert got == ["a.log", "b.log", *(["locked.log"] if readable else []), "sub/c.log"]


def _small_fleet(folder):
    planted = plant(folder, ("copy", "lock", "synth", "healthy"))
    plant_garbage(folder)
    return planted


def test_the_command_prints_the_table_and_writes_the_json_and_report(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    planted = _small_fleet(logs)
    report, records = tmp_path / "fleet.html", tmp_path / "fleet.json"
    rc = main(["fleet", str(logs), "--parallel", "serial", "--link-gbps", str(LINK_GBPS), "--copy-bytes",
               str(COPY_BYTES), "--report", str(report), "--json", str(records), "--details"])
    out = capsys.readouterr().out
    assert rc == 0
    head = out.splitlines()[0].split(", ")  # one host each: the order is the costs'
    assert head[-2:] == ["1 GPU-bound", "3 unreadable"] and head[0].startswith("1 host ")
    assert {h.removeprefix("1 host ").removeprefix("1 ") for h in head[:3]} == {
        "copy-bound", "lock-serialised", "synthesis-starved"}
    document = json.loads(records.read_text())
    assert {h["host"]: h["group"] for h in document["hosts"] if h["host"] in planted} == {
        host: p.bound for host, p in planted.items()}
    assert document["interrupted"] is False and document["files"] == 7
    html = report.read_text()
    assert all(host in html for host in planted) and "copy-bound" in html and "Bokeh" in html
    assert not re.search(r"<script[^>]+src=", html)  # self-contained: no script fetched
    copy_host = next(h for h, p in planted.items() if p.bound == "copy_bound")
    first = next(h for h in document["hosts"] if h["host"] == copy_host)["evidence"][0]["where"]
    assert first in html and first in out


def test_nothing_readable_exits_2_and_an_empty_folder_is_refused(tmp_path, capsys):
    garbage = plant_garbage(tmp_path)
    assert main(["fleet", *map(str, garbage), "--parallel", "serial"]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("3 hosts unreadable")
    assert "none of the 3 files could be read" in captured.err
    (tmp_path / "void").mkdir()
    assert main(["fleet", str(tmp_path / "void")]) == 2
    assert "no files to read" in capsys.readouterr().err


def test_ctrl_c_keeps_what_was_read(tmp_path, capsys, monkeypatch):
    _small_fleet(tmp_path)
    files = expand([tmp_path])

    def stop_at_second(record, done, total):
        if done == 2:
            raise KeyboardInterrupt

    before = set(multiprocessing.active_children())  # another test's, not this pool's
    read = read_fleet(files, OPTIONS, parallel="process", workers=2, on_record=stop_at_second)
    assert read.interrupted and len(read.records) == 2 and read.files == len(files)
    assert set(multiprocessing.active_children()) - before == set()  # the pool's workers ended with it
    monkeypatch.setattr("workbench.commands.fleet._Progress.update",
                        lambda self, record, done, total: stop_at_second(record, done, total))
    records = tmp_path.parent / f"{tmp_path.name}.json"
    assert main(["fleet", str(tmp_path), "--parallel", "serial", "--json", str(records)]) == 130
    captured = capsys.readouterr()
    assert "interrupted: 2 of 7 hosts read" in captured.out and "interrupted; 2 of 7" in captured.err
    assert len(json.loads(records.read_text())["hosts"]) == 2


def test_ray_asked_for_without_ray_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as if not installed
    with pytest.raises(FleetError, match=r"workbench\[cluster\]"):
        read_fleet([tmp_path / "x.log"], parallel="ray")
    assert main(["fleet", str(tmp_path), "--parallel", "serial", "--address", "ray://x:1"]) == 2
    assert "--address" in capsys.readouterr().err


def test_the_notebook_shows_the_table_and_hands_back_the_records(tmp_path, monkeypatch):
    pytest.importorskip("IPython")
    import workbench.notebook as wb

    planted = plant(tmp_path, ("synth", "prep"))
    shown: list = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    handle = wb.fleet(tmp_path, parallel="serial", whatif=False)
    assert [r.host for r in handle.records] == ["prover-00", "prover-01"]
    assert {r.host: r.group for r in handle.records} == {h: p.bound for h, p in planted.items()}
    (html,) = shown
    assert "1 host synthesis-starved, 1 prep-bound" in html.data and "prover-01" in html.data
