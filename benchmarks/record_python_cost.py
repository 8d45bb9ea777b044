"""Slowdown of a lock-heavy Python program under `workbench record`, and what it is made of.

    python benchmarks/record_python_cost.py [--repeats 5] [--locks all|contended|none]
        [--scale X] [--only KIND...] [--wall] [--json FILE]

Three workloads of ours, each run by this Python plain and recorded (the lock shim preloaded,
the recorder draining the ring alongside), alternating, each timing itself:

- `loop`: a single-threaded pure Python loop: the interpreter takes no pthread lock, so any
  slowdown is the shim's fixed cost (its start, the clock, lookups), not per lock;
- `calls`: a single-threaded loop of short C calls that release the interpreter lock
  (`os.lseek`, a system call of a fraction of a microsecond): every call drops and takes back
  the GIL, a pthread mutex and condition variable, uncontended;
- `handoff`: two threads passing a token back and forth through `queue.Queue`s: every pass
  hands the GIL to the other thread and blocks on a lock (a semaphore) and a condition wait.

Times are the program's CPU time (all its threads) by default: on a shared machine the wall
time mostly measures the other jobs; `--wall` on a quiet one. For each: the slowdown of the
median, the intercepted lock calls per run (a lock and an unlock for each hold, recorded or
counted unrecorded by the shim, plus condition and semaphore waits), the cost per call that
would explain the slowdown, and the ratio of the slowdown to the 3 % target; also the
slowdown between the fastest run of each (the least disturbed by other jobs). Calls made before
the program's timed part (the interpreter's start) are counted too, so `loop`'s are not in
its time.
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

from workbench.attach.build import Shims, build_shims  # noqa: E402
from workbench.attach.session import Session  # noqa: E402

TARGET = 0.03
PROGRAM = r"""
import sys, threading, time, queue
kind, n = sys.argv[1], int(sys.argv[2])
def loop(n):
    total = 0
    for i in range(n):
        total += i * i
    return total
def calls(n):
    import os
    seek, fd = os.lseek, os.open("/dev/zero", os.O_RDONLY)
    for _ in range(n):
        seek(fd, 0, 1)
def handoff(n):
    there, back = queue.Queue(), queue.Queue()
    def echo():
        for _ in range(n):
            back.put(there.get())
    t = threading.Thread(target=echo)
    t.start()
    for i in range(n):
        there.put(i)
        back.get()
    t.join()
work = {"loop": loop, "calls": calls, "handoff": handoff}[kind]
work(max(n // 20, 1))  # warm-up
began, cpu = time.perf_counter(), time.process_time()
work(n)
print(f"seconds={time.perf_counter() - began:.6f} cpu={time.process_time() - cpu:.6f}")
"""
SIZES = {"loop": 2_000_000, "calls": 300_000, "handoff": 10_000}
EVENTS = ("lock acquires", "lock holds", "condition waits", "semaphore waits")


CLOCK = ["cpu"]  # or "seconds" (wall): --wall


def seconds(out: str) -> float:
    return float(out.split(f"{CLOCK[0]}=")[1].split()[0])


def plain(script: Path, kind: str, n: int) -> float:
    done = subprocess.run([sys.executable, str(script), kind, str(n)], capture_output=True, text=True,
                          check=True)
    return seconds(done.stdout)


def recorded(script: Path, kind: str, n: int, shims: Shims, locks: str) -> tuple[float, dict[str, int]]:
    session = Session([sys.executable, str(script), kind, str(n)], shims, capacity=1 << 21, locks=locks)
    with tempfile.TemporaryFile("w+") as out:
        try:
            session.start(stdout=out)
            session.wait()
            record = session.trace().meta["record"]
        finally:
            session.close()
        out.seek(0)
        took = seconds(out.read())
    counts = {k: int(record["counts"].get(k, 0)) for k in EVENTS}
    counts["unrecorded holds"] = int(record["unrecorded_holds"])
    counts["dropped"] = int(record["dropped"])
    return took, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--locks", default="contended", choices=("all", "contended", "none"))
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies each workload's size")
    parser.add_argument("--only", nargs="*", choices=sorted(SIZES), help="workloads to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--wall", action="store_true",
                        help="compare wall times, not the program's CPU time (on a quiet machine)")
    args = parser.parse_args()
    if args.wall:
        CLOCK[0] = "seconds"
    shims = build_shims(cuda=False)
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "python_locks.py"
        script.write_text(PROGRAM)
        for kind in args.only or SIZES:
            n = max(int(SIZES[kind] * args.scale), 1)
            base, rec, counts = [], [], []
            for _ in range(args.repeats):
                base.append(plain(script, kind, n))
                took, c = recorded(script, kind, n, shims, args.locks)
                rec.append(took)
                counts.append(c)
            p, r = statistics.median(base), statistics.median(rec)
            # intercepted calls: a lock and an unlock for each hold (recorded or not), each wait
            events = statistics.median(2 * (c["lock holds"] + c["unrecorded holds"]) + c["condition waits"]
                                       + c["semaphore waits"] for c in counts)
            slowdown = r / p - 1
            best = min(rec) / min(base) - 1  # the least disturbed runs, on a shared machine
            per_event = (r - p) * 1e9 / events if events else float("nan")
            results[kind] = {"n": n, "plain_s": base, "recorded_s": rec, "slowdown": round(slowdown, 4),
                             "slowdown_best": round(best, 4),
                             "lock_calls_per_run": events, "ns_per_call": round(per_event, 1),
                             "counts": counts[-1], "vs_target": round(slowdown / TARGET, 2)}
            print(f"{kind:8s} n={n:<9d} plain {p * 1e3:9.2f} ms  recorded {r * 1e3:9.2f} ms  "
                  f"slowdown {slowdown * 100:+7.2f} % (ratio to the 3 % target {slowdown / TARGET:6.2f}; "
                  f"best runs {best * 100:+6.2f} %)  "
                  f"{events:>9.0f} lock calls a run, {per_event:7.1f} ns a call  {counts[-1]}", flush=True)
    print(f"locks={args.locks} repeats={args.repeats} times={'wall' if args.wall else 'CPU'} "
          f"load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    if args.json:
        args.json.write_text(json.dumps({"locks": args.locks, "results": results}, indent=1))


if __name__ == "__main__":
    main()
