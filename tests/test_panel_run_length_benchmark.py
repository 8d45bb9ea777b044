"""benchmarks/panel_run_length.py: the panel's default run timed, against the issue's baseline."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "panel_run_length.py"


def test_it_times_the_panels_run_and_the_quick_one_and_says_the_ratio(tmp_path):
    out = tmp_path / "length.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--repeats", "1", "--partitions", "2",
                           "--json", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["panel"]["completed"] == [2] and figures["panel"]["log2"] == 13
    assert figures["configuration"]["completed"] == [8]
    assert figures["panel"]["median_s"] > 0 and figures["configuration"]["median_s"] > 0
    assert "x the issue's 1 s" in done.stdout and figures["baseline_s"] == 1.0


def test_bad_input_is_one_line_and_exit_2():
    done = subprocess.run([sys.executable, str(SCRIPT), "--repeats", "0"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "--repeats is 0" in done.stderr
