"""Peak memory and time of importing a PyTorch profiler (Kineto) trace, against its JSON size.

    python benchmarks/import_memory.py [--trace FILE.json.gz] [--mb 80] [--repeat 3] [--baseline DIR]

Inputs: the largest Kineto trace in /work/shared/realdata/kineto (or --trace), and a larger
one made from it by repeating its events, each copy shifted past the one before (times,
correlation and External ids), written as plain and as gzipped JSON to a temporary folder.
Each import runs in a fresh interpreter: three times for the time (median of wall and of
CPU time, the latter less disturbed by a shared machine) and the peak
resident set, once under tracemalloc for the peak of Python allocations. The resident peak
is VmHWM (ru_maxrss of the process's own memory map: ru_maxrss itself carries the parent's
peak over exec) after the import minus VmHWM after importing the workbench and numpy. Both
peaks are given as a multiple of the uncompressed JSON size, against the 3x target and the
7.5x of the importer that held the whole list of decoded events. `--baseline DIR` measures
the importer of another checkout (DIR, e.g. the main one) the same way, on a copy of the
repeated trace with times from its first event (the old importer refused epoch times).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REALDATA = Path("/work/shared/realdata/kineto")
TARGET, OLD = 3.0, 7.5
CHILD = r"""
import json, resource, sys, time, tracemalloc
from workbench.importers import load_any

def high_water():
    # VmHWM belongs to this process's own memory map; ru_maxrss carries the parent's peak over exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

path, traced = sys.argv[1], sys.argv[2] == "1"
base = high_water()
if traced:
    tracemalloc.start()
t0, c0 = time.perf_counter(), time.process_time()
trace = load_any(path)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = tracemalloc.get_traced_memory()[1] if traced else 0
rss = high_water() - base
print(json.dumps({"seconds": seconds, "cpu": cpu, "rss": rss, "traced": peak, "spans": len(trace.spans),
                  "instants": len(trace.instants)}))
"""


def largest_kineto() -> Path:
    files = sorted(REALDATA.glob("*.json.gz"), key=lambda p: len(gzip.decompress(p.read_bytes())))
    if not files:
        sys.exit(f"no Kineto traces in {REALDATA}; give one with --trace")
    return files[-1]


def repeated(source: Path, megabytes: float, folder: Path, relative: bool = False) -> tuple[Path, Path]:
    """The trace's events again and again, each copy after the last, until the JSON is that big."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    events = data["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), int | float)]
    start = min(e["ts"] for e in timed)
    period = max(e["ts"] + e.get("dur", 0) for e in timed) - start
    size = len(json.dumps(data))
    copies = max(1, round(megabytes * 1e6 / size))
    out: list[Any] = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    for k in range(copies):
        for e in body:
            e2 = dict(e)
            if isinstance(e2.get("ts"), int | float):
                e2["ts"] = e2["ts"] + k * period - (start if relative else 0)
            if e2.get("ph") in ("s", "f") and isinstance(e2.get("id"), int):
                e2["id"] = e2["id"] + k * 10**8
            if isinstance(e2.get("args"), dict):
                args = dict(e2["args"])
                for key in ("correlation", "External id"):
                    if isinstance(args.get(key), int):
                        args[key] += k * 10**8
                e2["args"] = args
            out.append(e2)
    plain = folder / f"repeated_{copies}x{'_relative' if relative else ''}.json"
    plain.write_text(json.dumps({**data, "traceEvents": out}))
    zipped = folder / f"{plain.name}.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=6))
    return plain, zipped


def measure(path: Path, repeat: int, checkout: Path | None = None) -> dict[str, Any]:
    runs = []
    env = {**os.environ, "PYTHONPATH": str(checkout)} if checkout else None
    for traced in ["0"] * repeat + ["1"]:
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), traced], capture_output=True,
                              text=True, check=True, cwd=checkout, env=env)
        runs.append(json.loads(done.stdout))
    plain = runs[:-1]
    return {"seconds": statistics.median(r["seconds"] for r in plain),
            "cpu": statistics.median(r["cpu"] for r in plain), "rss": max(r["rss"] for r in plain),
            "traced": runs[-1]["traced"], "spans": plain[0]["spans"], "instants": plain[0]["instants"]}


def json_size(path: Path) -> int:
    raw = path.read_bytes()
    return len(gzip.decompress(raw)) if raw[:2] == b"\x1f\x8b" else len(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--mb", type=float, default=80.0, help="size of the repeated trace's JSON")
    parser.add_argument("--repeat", type=int, default=3, help="untraced runs per file (median time)")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout's importer to compare")
    args = parser.parse_args()
    source = args.trace or largest_kineto()
    with tempfile.TemporaryDirectory(prefix="wb-import-") as tmp:
        files = (source, *repeated(source, args.mb, Path(tmp)))
        runs: list[tuple[Path, Path | None]] = [(p, None) for p in files]
        if args.baseline:
            relative = repeated(source, args.mb, Path(tmp), relative=True)[0]
            runs += [(relative, None), (relative, args.baseline.resolve())]
        print(f"{'file':46} {'JSON MB':>8} {'spans':>8} {'wall s':>7} {'cpu s':>6} {'RSS MB':>7} "
              f"{'xJSON':>6} {'traced MB':>9} {'xJSON':>6} {'/3x':>5} {'/7.5x':>5}")
        for path, checkout in runs:
            size = json_size(path)
            m = measure(path, args.repeat, checkout)
            rss_x, traced_x = m["rss"] / size, m["traced"] / size
            label = f"{path.name} ({checkout})" if checkout else path.name
            print(f"{label[:46]:46} {size / 1e6:8.1f} {m['spans']:8d} {m['seconds']:7.2f} {m['cpu']:6.2f} "
                  f"{m['rss'] / 1e6:7.1f} {rss_x:6.2f} {m['traced'] / 1e6:9.1f} {traced_x:6.2f} "
                  f"{max(rss_x, traced_x) / TARGET:5.2f} {max(rss_x, traced_x) / OLD:5.2f}")


if __name__ == "__main__":
    main()
