"""benchmarks/live_cost.py watched by its websocket viewer (benchmarks/live_client.py), the
viewer used where a host has no browser: a short CPU-backend run, watched and unwatched, the
view in a process of its own and in the run's. The
viewer is a real client of the served document in a process of its own; it must receive every
span the run recorded as a bar, and hold at the end what the server's document holds."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "live_cost.py"


@pytest.mark.parametrize("view", ["process", "kernel"])
def test_the_websocket_viewer_receives_every_bar_of_a_watched_run(tmp_path, view):
    out = tmp_path / "live.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--partitions", "8", "--log2", "4", "--rounds", "1",
                           "--viewer", "websocket", "--view", view, "--json", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          # This checkout's code, not an installed copy (a script's folder leads its path).
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)})
    assert done.returncode == 0, done.stderr
    assert "viewer: a websocket client of the server document" in done.stdout
    report = json.loads(out.read_text())
    watched, unwatched = (next(r for r in report["runs"] if r["watched"] is w) for w in (True, False))
    assert report["viewer"] == "websocket" and report["partitions"] == 8 and report["rounds"] == 1
    assert report["view"] == view
    assert watched["spans"] == unwatched["spans"] > 8 * 10  # the same run, each partition's spans
    assert watched["bars_received"] == watched["spans"]  # every span reached the viewer as a bar
    assert watched["drawn"] == watched["held"] > 0 and watched["caught_up"] == 1.0
    assert watched["patches"] >= watched["updates"] > 0
    assert report["ratio"] == pytest.approx(watched["rate"] / unwatched["rate"])
    assert report["cpu_ratio"] == pytest.approx(watched["cpu_s"] / unwatched["cpu_s"])
    if view == "process":  # the view's work was the child's; this process only fed it the rows
        assert watched["shipped"] == watched["spans"] and watched["view_cpu_s"] > watched["feed_cpu_s"] > 0


def test_rounds_alternate_watched_and_unwatched_and_none_starts_past_the_budget(tmp_path, capsys):
    """The round loop both live-cost benchmarks share (live_cost.play_rounds)."""
    import argparse
    import importlib.util
    import time

    spec = importlib.util.spec_from_file_location("live_cost", SCRIPT)
    live_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(live_cost)
    out = tmp_path / "r.json"
    order: list[bool] = []

    def run(watched: bool) -> dict:
        order.append(watched)
        return {"rate": float(len(order))}

    for budget, started_ago, rounds in ((None, 0.0, 3), (50.0, 100.0, 1)):
        order.clear()
        args = argparse.Namespace(rounds=3, budget_s=budget, json=str(out))
        runs, loads, report = {True: [], False: []}, [], {"runs": []}
        live_cost.play_rounds(args, time.perf_counter() - started_ago, report, runs, loads, run,
                              lambda k, watched, r: f"round {k + 1} {watched}")
        assert order == [True, False] * rounds and len(runs[True]) == len(runs[False]) == rounds
        written = json.loads(out.read_text())["runs"]
        assert [(r["round"], r["watched"]) for r in written] == [(k + 1, w) for k in range(rounds)
                                                                 for w in (True, False)]
    assert "round 2 not started: it would end past the 50 s budget" in capsys.readouterr().out
