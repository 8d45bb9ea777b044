"""What `workbench record --cuda-mode launches` / `sampled` costs a launching thread in the shim's
own code, in ns a launch, without a GPU.

    python benchmarks/launch_callback_cost.py [--launches 100000] [--rounds 7] [--json PATH]

tests/programs/fake_cupti.c (a stand-in for CUPTI that includes the shim and plays a program's
launches through the callbacks the shim enabled, every other one with the driver's launch
nested inside the runtime's) is built once and run in turn with no CUDA kind enabled (no
callback: the fake's own loop, the baseline), `launches` and `sampled` (1/10), one launching
thread; each run prints the launch loop's process CPU time. The figure: the median extra CPU ns
a launch against the baseline, which is what the shim's callback does (two clock readings, the
kernel's name found by its pointer and confirmed, one ring write) plus the fake's dispatch of
it. CUPTI's own dispatch of a callback on a real driver is not in it (benchmarks/record_gpu.py
--stages launch measures the whole on the GPU machine). Needs the CUPTI headers and gcc.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.attach.build import HERE, _record_layouts, cupti_paths  # noqa: E402

MODES = {"baseline": {"WORKBENCH_RECORD_CUDA_KINDS": "none"},
         "launches": {"WORKBENCH_RECORD_CUDA_MODE": "launches"},
         "sampled": {"WORKBENCH_RECORD_CUDA_MODE": "sampled", "WORKBENCH_RECORD_SAMPLE_MS": "1/10"}}


def build(work: Path) -> Path:
    found = cupti_paths()
    if found is None:
        raise SystemExit("no CUPTI headers found (build.py): nothing to time")
    includes, _ = found
    layouts = _record_layouts(includes[0] / "cupti_activity.h")
    if isinstance(layouts, str):
        raise SystemExit(layouts)
    exe = work / "fake_cupti"
    subprocess.run(["gcc", "-O2", "-std=gnu11", f'-DSHIM="{HERE / "cupti_injection.c"}"', f"-I{HERE}",
                    *(f"-I{i}" for i in includes), *layouts, str(ROOT / "tests/programs/fake_cupti.c"), "-o",
                    str(exe), "-rdynamic", "-lpthread", "-ldl"], check=True, timeout=120)
    return exe


def run(exe: Path, mode: str, launches: int) -> float:
    env = {"PATH": "/usr/bin:/bin", "FAKE_QUIET": "1", "WORKBENCH_RECORD_CUDA_KINDS": "kernel",
           **MODES[mode]}
    out = subprocess.run([str(exe), "1", str(launches), "24", "0"], env=env, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("W "))
    return int(line.split()[2]) / launches  # "W wall_ns cpu_ns": the CPU time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if not 1 <= args.launches <= 120_000:  # the fake's ring holds 131,072 events, none drained
        raise SystemExit("--launches is 1 to 120000")
    with tempfile.TemporaryDirectory() as work:
        exe = build(Path(work))
        found: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                found[mode].append(run(exe, mode, args.launches))
    medians = {m: statistics.median(vs) for m, vs in found.items()}
    base = medians["baseline"]
    recorded = {m: v for m, v in medians.items() if m != "baseline"}
    result = {"ns_a_launch": {m: [round(v, 1) for v in vs] for m, vs in found.items()},
              "median": {m: round(v, 1) for m, v in medians.items()},
              "extra_ns": {m: round(v - base, 1) for m, v in recorded.items()},
              "ratio": {m: round(v / base, 2) for m, v in recorded.items()},
              "launches": args.launches, "rounds": args.rounds, "load": os.getloadavg()}
    for mode, extra in result["extra_ns"].items():
        print(f"{mode}: {result['median'][mode]} CPU ns a launch against the baseline's {round(base, 1)}: "
              f"+{extra} ns, x{result['ratio'][mode]}")
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
