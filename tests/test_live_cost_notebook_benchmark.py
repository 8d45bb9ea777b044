"""benchmarks/live_cost_notebook.py: the panel's run watched through a real kernel's widget
comm, its front end (the benchmark's own process) rebuilding the bokeh widget's document and
applying every patch. A short CPU-backend run, watched and unwatched: the front end must
receive every span of the run as a bar and hold at the end what the kernel's document holds;
Ctrl-C (or a stop from outside) must leave no process of the kernel behind; bad input is one line."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("jupyter_bokeh", reason="the notebook extra is not installed")
pytest.importorskip("jupyter_client", reason="no kernel client")
pytest.importorskip("ipykernel", reason="no kernel")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "live_cost_notebook.py"
TAG = "WORKBENCH_NOTEBOOK_BENCH"
# This checkout's code in the kernel too, not an installed copy.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def tagged(tag: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if f"{TAG}={tag}".encode() in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.parametrize("view", ["process", "kernel"])
def test_the_notebook_front_end_receives_every_bar_of_a_watched_run(tmp_path, view):
    out = tmp_path / "nb.json"
    tag = uuid.uuid4().hex
    done = subprocess.run([sys.executable, str(SCRIPT), "--partitions", "80", "--rounds", "1",
                           "--view", view, "--json", str(out)],
                          capture_output=True, text=True, timeout=180, cwd=ROOT, env={**ENV, TAG: tag})
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    watched, unwatched = (next(r for r in report["runs"] if r["watched"] is w) for w in (True, False))
    assert report["view"] == view and report["backend"] == "cpu" and report["rounds"] == 1
    assert report["partitions"] == 80 and watched["spans"] == unwatched["spans"] > 80 * 10  # the same run
    # Every span reached the front end as a bar, through the comm's patches (pieces reassembled,
    # binary buffers among them), and its copy holds what the kernel's document holds.
    assert watched["bars_received"] == watched["spans"] and watched["ignored"] == 0
    # The kernel's own widget sends each array as a buffer; the relayed view's patches carry
    # theirs inline (one message an update: doc_relay.py).
    assert (watched["buffers"] > 0) == (view == "kernel")
    assert watched["held"] == watched["view_held"] > 0 and watched["live_widgets"] == 1
    # The front end echoed every change back, as a page does; the kernel's or the process's
    # document took none of the echoed streams again (it would hold more bars than the front end).
    assert watched["echoed"] >= watched["patches"] > 0
    if view == "kernel":  # an update a message at least (a change a message)
        assert watched["patches"] >= watched["updates"] > 0
    else:  # each message the view's process made, handed on and applied (one an update that changed)
        assert watched["patches"] == watched["process_relayed"] > 0
    assert watched["comm_bytes"] > 0
    assert watched["kernel_cpu_s"] > 0 and unwatched["kernel_cpu_s"] > 0 and watched["frontend_cpu_s"] > 0
    assert report["ratio"] == pytest.approx(watched["rate"] / unwatched["rate"])
    assert report["cpu_ratio"] == pytest.approx(watched["kernel_cpu_s"] / unwatched["kernel_cpu_s"])
    assert report["bars_received"] == watched["spans"] and report["target"] == 0.95
    assert "the front end received" in done.stdout and "target)" in done.stdout
    assert tagged(tag) == []  # the kernel and whatever it started are gone


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_shuts_the_kernel_down_and_leaves_nothing(signum):
    tag = uuid.uuid4().hex
    bench = subprocess.Popen([sys.executable, str(SCRIPT), "--spans", "200000", "--rounds", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**ENV, TAG: tag})
    try:
        assert bench.stdout is not None
        said = bench.stdout.readline()  # after the warm-ups: the long watched run starts next
        assert said.startswith("kernel pid "), said
        kernel = int(said.split()[2].rstrip(";"))
        time.sleep(1.0)
        assert kernel in tagged(tag)
        bench.send_signal(signum)
        _, err = bench.communicate(timeout=60)
    finally:
        bench.kill()
    assert bench.returncode == 130, err
    assert "interrupted: the kernel is shut down, nothing of it left running" in err
    assert tagged(tag) == [] and not Path(f"/proc/{kernel}").exists()


@pytest.mark.parametrize("args", [["--rounds", "0"], ["--view", "browser"], ["--spans", "x"],
                                  ["--view", "kernel", "--unpaced"],
                                  ["--log2", "40"], ["--json", "/no/such/dir/x.json"]])
def test_bad_input_is_one_line_and_exit_2(args):
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=ENV)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("live_cost_notebook: ")
