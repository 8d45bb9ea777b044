"""`workbench record` on the GPU machine: a CUDA program of ours and a PyTorch training loop.

    python benchmarks/record_gpu.py --out DIR [--quick]

1. tests/programs/cuda_work.cu, built with nvcc and recorded: the kernels, copies (by memory
   kind) and memsets in the trace against the counts the program prints of itself; whether
   kernel spans reached the recorder while the program still ran (the live view's feed).
2. benchmarks/torch_step.py: the kernels, copies and memsets of its timed steps under
   torch.profiler (its Chrome trace), against those the recording puts inside the same steps'
   NVTX ranges, in a second run of the same seeded steps (two CUPTI clients cannot share one
   process, so the profiler's run is another run of the same program).
3. Slowdown: the CUDA program's loop time and the training loop's step time, plain against
   recorded, alternating, medians.

Results go to DIR/record_gpu.json and are printed; every stage runs even if one before failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.attach.build import build_shims  # noqa: E402
from workbench.attach.session import Session  # noqa: E402
from workbench.model import roles as rl  # noqa: E402
from workbench.model import tracks as tr  # noqa: E402

results: dict[str, Any] = {}


def said(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", text)}


def recorded(argv: list[str], shims: Any) -> tuple[Any, str, list[tuple[float, int]]]:
    """(trace, the program's stdout, (seconds, kernel spans in the recorder) while it ran)."""
    session = Session(argv, shims)
    seen: list[tuple[float, int]] = []
    with tempfile.TemporaryFile("w+") as out:
        began = time.monotonic()
        session.start(stdout=out)
        assert session.process is not None
        while session.process.poll() is None:
            kernels = sum(1 for row in list(session.recorder.spans) if tr.parse(row[0]).kind == tr.KERNELS)
            seen.append((round(time.monotonic() - began, 3), kernels))
            time.sleep(0.05)
        session.wait()
        trace = session.trace()
        session.close()
        out.seek(0)
        return trace, out.read(), seen


def counts(trace: Any, inside: str | None = None, last: int = 0) -> dict[str, Any]:
    """Device work in the trace (only that within the `last` NVTX ranges named `inside`)."""
    codes = rl.span_roles(trace)
    spans, text = trace.spans, trace.strings.values
    keep = None
    if inside is not None:
        ranges = sorted((int(spans.start_ns[i]), int(spans.end_ns[i])) for i in range(len(spans))
                        if text[spans.name[i]] == inside and tr.parse(text[spans.track[i]]).kind == tr.THREAD)
        keep = ranges[-last:] if last else ranges
    found: Counter[str] = Counter()
    for i in range(len(spans)):
        role = rl.ROLE_NAMES[codes[i]]
        if role not in ("kernel", "copy", "memset", "sync", "launch"):
            continue
        if keep is not None and not any(a <= spans.start_ns[i] and spans.end_ns[i] <= b for a, b in keep):
            continue
        found[role] += 1
        if role == "copy":
            attrs = spans.attrs[i] or {}
            found[f"copy {text[spans.name[i]]} {attrs.get('src_kind')}->{attrs.get('dst_kind')}"] += 1
    if keep is not None:
        found["ranges"] = len(keep)
    return dict(found)


def stage(name: str, run: Any) -> None:
    began = time.monotonic()
    try:
        results[name] = run()
    except Exception as err:
        results[name] = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-2000:]}
    results[name + "_seconds"] = round(time.monotonic() - began, 1)
    print(f"== {name}: {json.dumps(results[name], default=str)[:3000]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    shims = build_shims()
    results["shims"] = {"locks": str(shims.locks), "nvtx": shims.nvtx, "cupti": str(shims.cupti),
                        "notes": shims.notes}
    print(f"== shims: {results['shims']}", flush=True)
    exe = work / "cuda_work"

    def build() -> dict[str, Any]:
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        source = ROOT / "tests/programs/cuda_work.cu"
        done = subprocess.run([nvcc, "-O2", "-arch=sm_90", "-o", str(exe), str(source)],
                              capture_output=True, text=True, timeout=120)
        return {"rc": done.returncode, "stderr": done.stderr[-500:]}

    stage("build", build)

    def cuda_counts() -> dict[str, Any]:
        trace, out, seen = recorded([str(exe), "50"], shims)
        from workbench.analysis.verdict import diagnose
        from workbench.trace import store

        store.save(trace, args.out / "cuda_work.wbtrace")
        running = [n for _, n in seen]
        return {"program": said(out), "trace": counts(trace), "record": trace.meta["record"],
                "kernel_spans_while_running": running[-5:], "polls": len(seen),
                "verdict": diagnose(trace).headline}

    stage("cuda_counts", cuda_counts)
    step = ROOT / "benchmarks" / "torch_step.py"
    steps = 5

    def torch_counts() -> dict[str, Any]:
        chrome = work / "profile.json"
        subprocess.run([sys.executable, str(step), "profile", str(steps), str(chrome)], check=True,
                       timeout=180)
        events = json.loads(chrome.read_text())
        events = events.get("traceEvents", events) if isinstance(events, dict) else events
        cats = Counter(e.get("cat") for e in events if isinstance(e, dict) and e.get("ph") == "X")
        profiler = {k: cats.get(k, 0) for k in ("kernel", "gpu_memcpy", "gpu_memset")}
        trace, out, _ = recorded([sys.executable, str(step), "plain", str(steps)], shims)
        return {"profiler": profiler, "recorded_in_timed_steps": counts(trace, inside="step", last=steps),
                "recorded_all": counts(trace), "record": trace.meta["record"], "program": out.strip()}

    stage("torch_counts", torch_counts)

    def slowdown() -> dict[str, Any]:
        reps = 3 if args.quick else 5
        loop: dict[str, list[float]] = {"plain": [], "recorded": []}
        for _ in range(reps):
            plain = subprocess.run([str(exe), "400"], capture_output=True, text=True, timeout=120,
                                   check=True)
            loop["plain"].append(said(plain.stdout)["loop_ms"])
            _, out, _ = recorded([str(exe), "400"], shims)
            loop["recorded"].append(said(out)["loop_ms"])
        torch_ms: dict[str, list[float]] = {"plain": [], "recorded": []}
        torch_steps = "100" if args.quick else "300"
        for _ in range(2):
            plain = subprocess.run([sys.executable, str(step), "plain", torch_steps], capture_output=True,
                                   text=True, timeout=180, check=True)
            torch_ms["plain"].append(said(plain.stdout)["step_ms"])
            _, out, _ = recorded([sys.executable, str(step), "plain", torch_steps], shims)
            torch_ms["recorded"].append(said(out)["step_ms"])
        out_ = {}
        for name, runs in (("cuda_work_loop_ms", loop), ("torch_step_ms", torch_ms)):
            p, r = statistics.median(runs["plain"]), statistics.median(runs["recorded"])
            out_[name] = {**runs, "slowdown": round(r / p - 1, 4)}
        return out_

    stage("slowdown", slowdown)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "record_gpu.json").write_text(json.dumps(results, indent=1, default=str))
    os.sync()


if __name__ == "__main__":
    main()
