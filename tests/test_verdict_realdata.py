"""The verdict on real PyTorch profiler and Chrome traces of other programs: every file loads,
the verdict speaks of no worker, partition, mutex or phase the trace lacks, and where the
trace has kernels its headline's idle share is the one this test works out again from the
JSON itself (kernel intervals merged over the window from the first to the last event)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from workbench.analysis import diagnose
from workbench.importers import load_any
from workbench.model.pipeline import PROVER
from workbench.render.verdict_text import render_verdict

DATA = Path(__file__).parent / "data"
KINETO = sorted((DATA / "kineto").glob("*.json.gz"))
CHROME = sorted(p for p in (DATA / "chrome").glob("*.json") if "only-begin" not in p.name)
PIPELINE_WORDS = re.compile(
    r"\b(?:GPU worker|workers?|partitions?|mutex|synthesis|barrier|prep_msm|"
    + "|".join(re.escape(p) for p in PROVER.phases if p not in ("synthesis", "finish")) + r")\b")


def _events(path: Path) -> list[dict]:
    data = json.loads(gzip.decompress(path.read_bytes()))
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict)]


def _idle_share(events: list[dict]) -> float | None:
    # The profiler's own recording window ("Trace") is no activity of the program.
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") != "Trace"]
    kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans if e.get("cat") == "kernel")
    if not kernels:
        return None
    lo = min(e["ts"] for e in spans)
    hi = max(e["ts"] + e.get("dur", 0) for e in spans)
    busy, cur = 0.0, None
    for s, e in kernels:
        if cur is not None and s <= cur[1]:
            cur[1] = max(cur[1], e)
            continue
        if cur is not None:
            busy += cur[1] - cur[0]
        cur = [s, e]
    assert cur is not None
    busy += cur[1] - cur[0]
    return 1 - busy / (hi - lo)


def _speaks_of_no_pipeline(verdict, text: str) -> None:
    said = " ".join([verdict.headline, *(f.title + " " + f.sentence for f in verdict.findings)])
    assert not PIPELINE_WORDS.search(said), PIPELINE_WORDS.search(said)
    assert "0 partitions" not in text and "did not complete" not in text


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name[:40])
def test_kineto_verdict_says_what_the_gpu_waited_for(path: Path) -> None:
    trace = load_any(path)
    verdict = diagnose(trace)
    _speaks_of_no_pipeline(verdict, render_verdict(verdict, trace))
    expected = _idle_share(_events(path))
    if expected is None:
        assert "kernel" not in verdict.headline.lower() or "no gpu kernels" in verdict.headline.lower()
        return
    m = re.match(r"The GPU idles (\d+)% of the ([\d.]+) (ms|s) trace", verdict.headline)
    assert m, verdict.headline
    assert int(m.group(1)) == round(100 * expected)
    assert re.search(r"the largest cause: \d+%", verdict.headline)


@pytest.mark.parametrize("path", CHROME, ids=lambda p: p.name)
def test_chrome_traces_without_a_gpu_get_no_gpu_story(path: Path) -> None:
    trace = load_any(path)
    verdict = diagnose(trace)
    text = render_verdict(verdict, trace)
    _speaks_of_no_pipeline(verdict, text)
    assert "idles" not in verdict.headline


def test_diff_of_two_foreign_traces_compares_what_they_have(capsys):
    from workbench.cli import main

    a, b = KINETO[0], KINETO[2]
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "idle cause (share of trace)" in out and "kernel busy (device)" in out
    assert not PIPELINE_WORDS.search(out.replace(str(a), "").replace(str(b), ""))
    assert "of the run" not in out
