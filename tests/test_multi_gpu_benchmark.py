"""benchmarks/multi_gpu.py: a dry run on emulated GPUs, and the recorded two-H200 runs."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "multi_gpu.py"


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_dry_run_on_emulated_gpus(tmp_path):
    out = _run("--backend", "cpu", "--log2", "6", "--partitions", "8", "--synth-threads", "2",
               "--data", str(tmp_path))
    assert sorted(p.name for p in tmp_path.glob("*.wbtrace")) == [
        "pageable_1gpu.wbtrace", "pageable_2gpu.wbtrace", "zerocopy_1gpu.wbtrace", "zerocopy_2gpu.wbtrace"]
    assert "zerocopy_2gpu" in out and "gpu1:" in out
    assert "zerocopy: two GPUs" in out and "pageable: two GPUs" in out


def test_the_recorded_two_gpu_runs():
    """Two H200s of one host, 40 partitions of 2^22, 28 synthesis processes."""
    out = _run("--summarize", "--data", str(ROOT / "notebooks" / "data" / "h200x2_2e22"))
    assert "zerocopy: two GPUs 1.59x one over the whole run, steady state 1.82x" in out
    assert "gpu1: 20 partitions, kernel busy 57% (steady 84%)" in out
