"""`workbench record` on the GPU machine: a CUDA program of ours and a PyTorch training loop.

    python benchmarks/record_gpu.py --out DIR [--quick] [--stages slowdown launch ...] [--reps N]
        [--steps N] [--variants plain contended none ...] [--no-cuda-loop] [--deadline-s S]
        [--launch-variants ...] [--launch-reps N] [--launch-steps N] [--launch-deadline-s S]
        [--kineto-rounds N] [--end-by-s S] [--pin-cpus LIST]

1. tests/programs/cuda_work.cu, built with nvcc and recorded: the kernels, copies (by memory
   kind) and memsets in the trace against the counts the program prints of itself; whether
   kernel spans reached the recorder while the program still ran (the live view's feed).
2. benchmarks/torch_step.py: the kernels, copies and memsets of its timed steps under
   torch.profiler (its Chrome trace), against those the recording puts inside the same steps'
   NVTX ranges, in a second run of the same seeded steps (two CUPTI clients cannot share one
   process, so the profiler's run is another run of the same program).
3. Slowdown: the CUDA program's loop time and the training loop's step time, plain against
   recorded, alternating, medians. The training loop runs under each variant named in
   `--variants` (benchmarks/record_variants.py: plain, the default recording, each part of the
   recording switched off alone, torch.profiler), in turn, each `--reps` times; for the
   recorded runs of `--details` variants, the lock holds, waits and condition waits inside its
   timed steps (per step) and the mutexes held most often there. `--deadline-s`: no new run
   starts after that many seconds of the stage, and results are written after every run.
4. Launch (`--stages launch`): benchmarks/launch_loop.cu, a launch-bound loop of ours that
   starts in well under a second, under each of `--launch-variants` in turn, `--launch-reps`
   times: what each part of the recording costs a launch, in microseconds. The count check
   (`launch.count_check`, printed): the first run of `contended` and of each variant that
   records kernels by their launches (`launches`, `sampled`, ...) is read, and its kernels by
   name (the default's kernel records, the others' host-timed launches) are compared with the
   count the program prints of itself and with the default recording's.

5. Kineto (`--stages kineto`): benchmarks/torch_step.py `alternate`: rounds of plain steps and
   the same steps under torch.profiler (CUDA; CPU and CUDA), in one process.

Results go to DIR/record_gpu.json and are printed; every stage runs even if one before failed.
`--end-by-s`: no run of the alternating stages starts unless the longest run so far would end
within that many seconds of the script's start. `--pin-cpus 2,3`: the launch loop and the
training loop (plain and recorded alike) run under `taskset -c 2,3`, and this script, the
recorder's threads with it, on the other CPUs: the program's threads (CUPTI's worker among
them) keep their cores, and the recorder's work does not land on them.
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

from benchmarks.record_variants import VARIANTS, session_options  # noqa: E402
from workbench.attach.build import build_shims  # noqa: E402
from workbench.attach.session import Session  # noqa: E402
from workbench.model import roles as rl  # noqa: E402
from workbench.model import tracks as tr  # noqa: E402

results: dict[str, Any] = {}
STARTED = time.monotonic()


def said(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", text)}


def recorded(argv: list[str], shims: Any, locks: str = "contended", poll: bool = True,
             variant: str | None = None, trace: bool = True) -> tuple[Any, str, list[tuple[float, int]]]:
    """(trace, the program's stdout, (seconds, kernel spans in the recorder) while it ran); the
    trace is None when not asked for (`trace=False`: a timing run only)."""
    if variant is not None:
        shims, options = session_options(VARIANTS[variant], shims)
        session = Session(argv, shims, **options)
    else:
        session = Session(argv, shims, locks=locks)
    seen: list[tuple[float, int]] = []
    with tempfile.TemporaryFile("w+") as out:
        began = time.monotonic()
        session.start(stdout=out)
        assert session.process is not None
        while poll and session.process.poll() is None:
            kernels = sum(1 for row in list(session.recorder.spans) if tr.parse(row[0]).kind == tr.KERNELS)
            seen.append((round(time.monotonic() - began, 3), kernels))
            time.sleep(0.05)
        session.wait()
        made = session.trace() if trace else None
        session.close()
        out.seek(0)
        return made, out.read(), seen


def run_variant(variant: str, argv: list[str], shims: Any, kineto_argv: list[str] | None = None,
                trace: bool = False) -> tuple[str, Any, float]:
    """(the program's stdout, its trace or None, wall seconds) of one run under `variant`."""
    chosen = VARIANTS[variant]
    began = time.monotonic()
    if chosen.kineto is not None:
        assert kineto_argv is not None
        done = subprocess.run([*kineto_argv, chosen.kineto], capture_output=True, text=True, timeout=300,
                              check=True)
        return done.stdout, None, time.monotonic() - began
    if not chosen.recorded:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
        return done.stdout, None, time.monotonic() - began
    made, out, _ = recorded(argv, shims, poll=False, variant=variant, trace=trace)
    return out, made, time.monotonic() - began


def blocks(text: str) -> list[float]:
    found = re.search(r"block_(?:ms|us)=([0-9.,]+)", text)
    return [float(v) for v in found.group(1).split(",")] if found else []


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


def kernel_tally(trace: Any) -> dict[str, Any]:
    """The kernels a recorded run's trace accounts for, by name: its kernel records (the default
    mode) or its host-timed launches (`--cuda-mode launches`, `sampled`), and what else says."""
    record = trace.meta["record"]
    counts, mode = record["counts"], record.get("cuda_mode", "activity")
    codes = rl.span_roles(trace)
    text = trace.strings.values
    records = Counter(text[n] for n in trace.spans.name[codes == rl.CODE["kernel"]].tolist())
    by_name = dict(record.get("launches_by_kernel") or {}) if mode != "activity" else dict(records)
    return {"mode": mode, "kernels": sum(by_name.values()), "kernel_records": sum(records.values()),
            "launches": counts.get("kernel launches", 0), "by_name": by_name,
            "windows": counts.get("sampling windows", 0),
            "sampled_ms": round(counts.get("sampled ns", 0) / 1e6, 3),
            "switch_us": round(counts.get("sampling switch ns", 0) / 1e3, 1), "dropped": record["dropped"],
            "notes": [n for n in record["notes"] if "--cuda-mode" in n]}


def count_check(tallies: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each counted run's kernels against the program's own count and, by name, against the
    default recording's first run (printed)."""
    reference = next((t["by_name"] for v, ts in tallies.items() for t in ts if t["mode"] == "activity"), None)
    rows: dict[str, list[dict[str, Any]]] = {}
    for variant, runs in tallies.items():
        for t in runs:
            row = {"mode": t["mode"], "kernels": t["kernels"], "program": t.get("program_kernels"),
                   "equal_program": t["kernels"] == t.get("program_kernels"),
                   "equal_default_by_name": None if reference is None else t["by_name"] == reference,
                   "kernel_records": t["kernel_records"], "windows": t["windows"]}
            rows.setdefault(variant, []).append(row)
            print(f"   count check {variant} ({t['mode']}): {t['kernels']} kernels, the program says "
                  f"{row['program']}; by name as the default recording: {row['equal_default_by_name']}; "
                  f"{t['kernel_records']} kernel records in {t['windows']} windows", flush=True)
    flat = [r for runs in rows.values() for r in runs]
    return {"runs": rows, "all_equal": bool(flat) and all(r["equal_program"] and r["equal_default_by_name"]
                                                          is not False for r in flat)}


def in_steps(trace: Any, steps: int) -> dict[str, Any]:
    """Lock spans inside the last `steps` NVTX ranges `step`, per step, and the mutexes held
    most often there."""
    import numpy as np

    spans, text = trace.spans, trace.strings.values
    names = np.array([text[n] for n in spans.name.tolist()], dtype=object)
    tracks = np.array([text[t] for t in spans.track.tolist()], dtype=object)
    is_step = (names == "step") & np.array([t.startswith("thread/") for t in tracks], dtype=bool)
    order = np.argsort(spans.start_ns[is_step], kind="stable")[-steps:]
    starts, ends = spans.start_ns[is_step][order], spans.end_ns[is_step][order]
    at = np.searchsorted(starts, spans.start_ns, side="right") - 1
    inside = (at >= 0) & (spans.start_ns <= ends[np.maximum(at, 0)]) if len(starts) else at > len(at)
    ranges = starts
    codes = rl.span_roles(trace)
    roles = np.array(rl.ROLE_NAMES, dtype=object)[codes]
    n = max(len(ranges), 1)
    found: dict[str, Any] = {f"{r}_per_step": round(float((inside & (roles == r)).sum()) / n, 1)
             for r in ("lock_hold", "lock_wait", "cond_wait", "kernel", "launch")}
    held = Counter(tracks[inside & (roles == "lock_hold")].tolist())
    found["most_held"] = [(k, round(v / n, 1)) for k, v in held.most_common(5)]
    found["steps"] = len(ranges)
    return found


def pinning(cpus: str | None) -> list[str]:
    """The prefix that pins a program to `cpus` (taskset's list syntax), this process moved to
    the other CPUs first (threads and children made later inherit that); [] when not asked for
    or not possible (results["pin"] says which)."""
    if not cpus:
        return []
    taskset = shutil.which("taskset")
    try:
        chosen: set[int] = set()
        for part in cpus.split(","):
            low, _, high = part.partition("-")
            chosen.update(range(int(low), int(high or low) + 1))
        rest = os.sched_getaffinity(0) - chosen
        if taskset is None or not rest:
            raise ValueError("no taskset" if taskset is None else "no CPU left for the recorder")
        os.sched_setaffinity(0, rest)
    except (ValueError, OSError) as err:
        results["pin"] = f"not pinned ({cpus}): {err}"
        return []
    results["pin"] = {"program": sorted(chosen), "recorder": sorted(rest)}
    return [taskset, "-c", cpus]


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
    parser.add_argument("--stages", nargs="*", default=["build", "cuda_counts", "torch_counts", "slowdown"])
    parser.add_argument("--reps", type=int, default=0,
                        help="training loop runs of each variant (default 2 --quick, 5)")
    parser.add_argument("--steps", type=int, default=0, help="timed steps a run (default 100 --quick, 300)")
    parser.add_argument("--variants", nargs="*", default=["plain", "contended"], choices=sorted(VARIANTS),
                        help="how to run the training loop (benchmarks/record_variants.py)")
    parser.add_argument("--details", nargs="*", default=["contended", "all", "none", "overhead"],
                        help="recorded variants whose runs' traces are read for the locks inside the steps")
    parser.add_argument("--launch-variants", nargs="*", choices=sorted(VARIANTS),
                        default=["plain", "contended", "no-cuda", "cuda-none", "only-kernel", "no-runtime",
                                 "flush-0", "drain-end", "bare", "overhead"],
                        help="how to run the launch loop (benchmarks/record_variants.py)")
    parser.add_argument("--launch-reps", type=int, default=3)
    parser.add_argument("--launch-details", nargs="*", default=["overhead"],
                        help="launch variants whose runs' traces are read (their counts)")
    parser.add_argument("--kineto-rounds", type=int, default=3,
                        help="kineto stage: rounds of plain, profiler CUDA, profiler CPU+CUDA in one process")
    parser.add_argument("--kineto-steps", type=int, default=300,
                        help="kineto stage: timed steps a block (the profiler's processing at each "
                             "stop grows with them)")
    parser.add_argument("--launch-steps", type=int, default=2000)
    parser.add_argument("--launch-args", nargs="*", default=["25", "10", "0"],
                        help="the launch loop's KERNELS GAP_US LOCKS")
    parser.add_argument("--launch-deadline-s", type=float, default=1e9)
    parser.add_argument("--no-cuda-loop", action="store_true", help="slowdown: the training loop only")
    parser.add_argument("--deadline-s", type=float, default=1e9)
    parser.add_argument("--end-by-s", type=float, default=1e9,
                        help="no run starts that would end later than this many seconds after the start")
    parser.add_argument("--pin-cpus", default=None,
                        help="run the programs on these CPUs (taskset -c LIST), this script on the others")
    parser.add_argument("--program", type=Path, default=ROOT / "benchmarks" / "torch_step.py",
                        help="the training loop (its `plain STEPS` prints step_ms=)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pin = pinning(args.pin_cpus)
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

    if "build" in args.stages or not args.no_cuda_loop:
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

    if "cuda_counts" in args.stages:
        stage("cuda_counts", cuda_counts)
    step = args.program
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

    if "torch_counts" in args.stages:
        stage("torch_counts", torch_counts)

    def save() -> None:
        (args.out / "record_gpu.json").write_text(json.dumps(results, indent=1, default=str))

    def slowdown() -> dict[str, Any]:
        began = time.monotonic()
        reps = 3 if args.quick else 5
        out_: dict[str, Any] = {}
        results["slowdown_partial"] = out_
        if not args.no_cuda_loop:
            loop: dict[str, list[float]] = {"plain": [], "recorded": []}
            for _ in range(reps):
                plain = subprocess.run([str(exe), "400"], capture_output=True, text=True, timeout=120,
                                       check=True)
                loop["plain"].append(said(plain.stdout)["loop_ms"])
                _, out, _ = recorded([str(exe), "400"], shims, poll=False)
                loop["recorded"].append(said(out)["loop_ms"])
            p, r = statistics.median(loop["plain"]), statistics.median(loop["recorded"])
            out_["cuda_work_loop_ms"] = {**loop, "slowdown": round(r / p - 1, 4)}
        torch_steps = args.steps or (100 if args.quick else 300)
        argv = [*pin, sys.executable, str(step), "plain", str(torch_steps)]
        kineto = [*pin, sys.executable, str(step), "kineto", str(torch_steps)]
        out_["torch_steps"] = torch_steps
        out_.update(alternate(args.variants, args.reps or (2 if args.quick else 5), argv, kineto, "step_ms",
                              began, args.deadline_s, details=torch_steps, read=args.details))
        return out_

    def alternate(variants: list[str], reps: int, argv: list[str], kineto: list[str] | None, key: str,
                  began: float, deadline_s: float, details: int = 0,
                  read: list[str] | None = None, tally: list[str] | None = None) -> dict[str, Any]:
        """Each variant in turn, `reps` rounds: each run's figure, its fifths, its wall time;
        medians and slowdowns against plain. Written out after every run. The first run of
        each `tally` variant is read for its kernels by name (`kernel_tally`)."""
        figures: dict[str, list[float]] = {v: [] for v in variants}
        found: dict[str, Any] = {key: figures, "block": {v: [] for v in variants},
                                 "wall_s": {v: [] for v in variants}, "in_steps": {}, "tallies": {},
                                 "stopped": None}
        results["running"] = found
        for _ in range(reps):
            for variant in variants:
                longest = max((w for ws in found["wall_s"].values() for w in ws), default=0.0)
                if time.monotonic() - began > deadline_s:  # the first variants of a round go first
                    found["stopped"] = f"deadline of {deadline_s} s"
                    break
                if time.monotonic() - STARTED + longest > args.end_by_s:
                    found["stopped"] = f"--end-by-s {args.end_by_s}: no time for another run"
                    break
                counted = variant in (tally or []) and variant not in found["tallies"]
                detailed = bool(details) and variant in (read or [])
                reads = VARIANTS[variant].recorded and (detailed or counted)
                try:
                    out, made, wall = run_variant(variant, argv, shims, kineto, trace=reads)
                except subprocess.CalledProcessError as err:
                    found.setdefault("errors", []).append(f"{variant}: {err}; {(err.stderr or '')[-300:]}")
                    continue
                if key not in said(out):
                    found.setdefault("errors", []).append(f"{variant}: no {key} in {out[-300:]!r}")
                    continue
                figures[variant].append(said(out)[key])
                found["block"][variant].append(blocks(out))
                found["wall_s"][variant].append(round(wall, 2))
                if made is not None and counted:
                    tallied = {**kernel_tally(made), "program_kernels": said(out).get("kernels")}
                    found["tallies"][variant] = [tallied]
                if made is not None and variant in (read or []):
                    record = made.meta["record"]
                    found["in_steps"].setdefault(variant, []).append(
                        {**in_steps(made, details), "counts": record["counts"],
                         "unrecorded_holds": record["unrecorded_holds"], "dropped": record["dropped"],
                         "notes": record["notes"][-3:]})
                print(f"   {variant}: {key} {figures[variant][-1]} ({wall:.1f} s)", flush=True)
                save()
            if found["stopped"]:
                break
        medians = {v: statistics.median(f) for v, f in figures.items() if f}
        found["median"] = {v: round(m, 4) for v, m in medians.items()}
        found["best"] = {v: round(min(f), 4) for v, f in figures.items() if f}  # the least disturbed run
        if "plain" in medians:
            p = medians["plain"]
            found["slowdown"] = {v: round(m / p - 1, 4) for v, m in medians.items() if v != "plain"}
            found["vs_target"] = {v: round(d / 0.03, 2) for v, d in found["slowdown"].items()}
            found["extra_per_step"] = {v: round(m - p, 4) for v, m in medians.items() if v != "plain"}
        results.pop("running", None)
        return found

    def launch() -> dict[str, Any]:
        began = time.monotonic()
        loop = work / "launch_loop"
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        source = ROOT / "benchmarks" / "launch_loop.cu"
        built = subprocess.run([nvcc, "-O2", "-arch=sm_90", "-o", str(loop), str(source)],
                               capture_output=True, text=True, timeout=120)
        if built.returncode:
            return {"build": built.stderr[-1000:]}
        argv = [*pin, str(loop), str(args.launch_steps), *args.launch_args]
        variants = [v for v in args.launch_variants if VARIANTS[v].kineto is None]
        counted = [v for v in variants if VARIANTS[v].recorded and VARIANTS[v].cuda
                   and "kernel" in VARIANTS[v].cuda_kinds
                   and (v == "contended" or VARIANTS[v].cuda_mode != "activity")]
        found = alternate(variants, args.launch_reps, argv, None, "step_us", began, args.launch_deadline_s,
                          details=args.launch_steps, read=args.launch_details, tally=counted)
        found["count_check"] = count_check(found["tallies"])
        launches = int(args.launch_args[0]) if args.launch_args else 25
        if "plain" in found["median"]:
            p = found["median"]["plain"]
            found["us_per_launch"] = {v: round((m - p) / launches, 3) for v, m in found["median"].items()
                                      if v != "plain"}
            b = found["best"]["plain"]
            found["us_per_launch_best"] = {v: round((m - b) / launches, 3) for v, m in found["best"].items()
                                           if v != "plain"}
        found["argv"] = argv[len(pin) + 1:]
        return found

    if "launch" in args.stages:
        stage("launch", launch)

    def kineto() -> dict[str, Any]:
        torch_steps = args.kineto_steps
        began = time.monotonic()
        argv = [sys.executable, str(step), "alternate", str(torch_steps), str(args.kineto_rounds)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=400, check=True)
        found: dict[str, Any] = {k: [float(x) for x in v.split(",")]
                                 for k, v in re.findall(r"(\w+_ms)=([0-9.,]+)", done.stdout)}
        medians = {k: statistics.median(v) for k, v in found.items()}
        found["median"] = {k: round(m, 4) for k, m in medians.items()}
        if "plain_ms" in medians:
            p = medians["plain_ms"]
            found["slowdown"] = {k: round(m / p - 1, 4) for k, m in medians.items() if k != "plain_ms"}
        found["steps"], found["wall_s"] = torch_steps, round(time.monotonic() - began, 1)
        return found

    if "kineto" in args.stages:
        stage("kineto", kineto)

    if "slowdown" in args.stages:
        stage("slowdown", slowdown)
    results.pop("slowdown_partial", None)
    save()
    os.sync()


if __name__ == "__main__":
    main()
