"""Cost of an intercepted lock operation under `workbench record`, in ns, uncontended.

    python benchmarks/record_lock_cost.py [--pairs 200000] [--repeats 7]

A small C program of ours takes and releases one pthread mutex `--pairs` times and times the
loop itself (CLOCK_MONOTONIC); it runs plain and then recorded (the lock shim preloaded,
the recorder draining the ring while it runs). The cost of an intercepted operation (a lock
or an unlock) is half the difference per pair. `--locks all` sends every hold to the ring;
`--locks contended` (record's default) keeps an uncontended mutex's holds on the thread's
own stack and only counts them. Target: at most 200 ns an operation; prints
the medians over repeats and the ratio against the target. Every recorded run's trace is
checked to hold (or count) one hold per pair.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench import compiled
from workbench.attach.build import Shims, build_shims
from workbench.attach.session import Session

TARGET_NS = 200
PROGRAM = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
int main(int argc, char **argv) {
    long pairs = atol(argv[1]);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    for (int i = 0; i < 1000; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
    double t0 = now();
    for (long i = 0; i < pairs; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
    printf("%.3f\n", (now() - t0) / pairs);
    return 0;
}
"""


def build_program(folder: Path) -> Path:
    source = folder / "lock_loop.c"
    source.write_text(PROGRAM)
    exe = folder / "lock_loop"
    cc = compiled.compiler()
    if cc is None:
        sys.exit("no C compiler")
    subprocess.run([cc, "-O2", "-o", str(exe), str(source), "-lpthread"], check=True)
    return exe


def plain(exe: Path, pairs: int) -> float:
    return float(subprocess.run([str(exe), str(pairs)], capture_output=True, text=True, check=True).stdout)


def recorded(exe: Path, pairs: int, shims: Shims, alongside: bool, locks: str) -> tuple[float, int, int]:
    """(ns a pair, holds recorded or counted unrecorded, events dropped). `alongside`: the
    recorder drains the ring while the program runs (as it does); else only once it has ended
    (the shim's own cost)."""
    period_s = 0.05 if alongside else 3600
    session = Session([str(exe), str(pairs)], shims, capacity=1 << 21, period_s=period_s, locks=locks)
    out = Path(tempfile.mkstemp()[1])
    try:
        with open(out, "w") as stdout:
            session.start(stdout=stdout)
            session.wait()
        trace = session.trace()
        holds = int(trace.span_mask(name="hold").sum()) + trace.meta["record"]["unrecorded_holds"]
        return float(out.read_text()), holds, trace.meta["record"]["dropped"]
    finally:
        session.close()
        out.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--locks", default="all", choices=("all", "contended"),
                        help="all: every hold sent to the ring; contended (record's default): this "
                             "uncontended mutex's holds are only counted")
    args = parser.parse_args()
    shims = build_shims(cuda=False)
    with tempfile.TemporaryDirectory() as folder:
        exe = build_program(Path(folder))
        base: list[float] = []
        runs: dict[bool, list[tuple[float, int, int]]] = {True: [], False: []}
        for _ in range(args.repeats):
            base.append(plain(exe, args.pairs))
            for alongside in (False, True):
                runs[alongside].append(recorded(exe, args.pairs, shims, alongside, args.locks))
    plain_ns = statistics.median(base)
    print(f"--locks {args.locks}; pairs per run: {args.pairs}, repeats: {args.repeats}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"plain:    {plain_ns:8.1f} ns a lock+unlock pair (median; min {min(base):.1f})")
    for alongside, label in ((False, "shim alone (ring drained after the run)"),
                             (True, "recorded (the recorder draining alongside)")):
        ns = [r[0] for r in runs[alongside]]
        holds = sorted({r[1] for r in runs[alongside]})
        per_op = (statistics.median(ns) - plain_ns) / 2
        best = (min(ns) - min(base)) / 2
        print(f"{label}: {statistics.median(ns):.1f} ns a pair (min {min(ns):.1f}); holds per run {holds} "
              f"(expected {args.pairs + 1000}); dropped {max(r[2] for r in runs[alongside])}")
        print(f"  cost of an intercepted operation: {per_op:.1f} ns median, {best:.1f} ns best "
              f"(target {TARGET_NS} ns: ratio {per_op / TARGET_NS:.2f} median, {best / TARGET_NS:.2f} best)")


if __name__ == "__main__":
    main()
