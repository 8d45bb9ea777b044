"""Time of `workbench fleet` on 50 hosts' cuzk daemon logs, against the 10 s target (issue 19).

    python benchmarks/fleet_speed.py [--hosts 50] [--repeats 3] [--parallel process serial]

The logs are the fleet test's (tests/fleet_hosts.py: each written from the daemon's format
strings with a bottleneck planted, 14 partitions a host, journald prefixes and noise), plus
three files that are no log. Each repeat reads the folder as the command does (expand, read
in parallel, diagnose with what-if predictions, rank) and checks every host's bound against
the planting, so a fast wrong answer does not count. Prints the median time, its ratio to the
target, the load average while it ran and the seconds spent per host inside the workers;
then the whole command (`workbench fleet FOLDER`, interpreter start and imports included).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's package, and the test's writer

from fleet_hosts import COPY_BYTES, LINK_GBPS, MIX, plant, plant_garbage  # noqa: E402

from workbench.analysis.fleet import rank  # noqa: E402
from workbench.analysis.verdict import DiagnoseOptions  # noqa: E402
from workbench.fleet import expand, read_fleet  # noqa: E402

TARGET_S = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=len(MIX))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parallel", nargs="+", default=["process"], choices=["process", "serial", "ray"])
    parser.add_argument("--no-whatif", action="store_true")
    args = parser.parse_args()
    mix = tuple(MIX[i % len(MIX)] for i in range(args.hosts))
    options = DiagnoseOptions(LINK_GBPS, COPY_BYTES, whatif=not args.no_whatif)
    with tempfile.TemporaryDirectory(prefix="fleet-speed-") as folder:
        truth = plant(Path(folder), mix)
        plant_garbage(Path(folder))
        print(f"{len(truth)} hosts' logs + 3 unreadable files, {os.cpu_count()} cores, "
              f"what-if {'off' if args.no_whatif else 'on'}")
        for parallel in args.parallel:
            times, loads, per_host = [], [], []
            for _ in range(args.repeats):
                started = time.perf_counter()
                read = read_fleet(expand([folder]), options, parallel)
                view = rank(read.records)
                times.append(time.perf_counter() - started)
                loads.append(os.getloadavg()[0])
                wrong = [r.host for r in view.records if r.host in truth and r.group != truth[r.host].bound]
                if wrong:
                    raise SystemExit(f"bound named wrong on {wrong}")
                per_host.append(statistics.median(r.read_s for r in view.records if r.readable))
            best = statistics.median(times)
            print(f"{read.parallel}: median {best:.2f} s of {args.repeats} "
                  f"({', '.join(f'{t:.2f}' for t in times)}), {best / TARGET_S:.2f} of the {TARGET_S:.0f} s "
                  f"target; {statistics.median(per_host) * 1e3:.0f} ms a host in a worker (median); "
                  f"load average {min(loads):.1f}-{max(loads):.1f}")
        command = [sys.executable, "-c", "import sys; from workbench.cli import main; sys.exit(main())",
                   "fleet", folder, "--link-gbps", str(LINK_GBPS), "--copy-bytes", str(COPY_BYTES),
                   "--no-progress"]
        walls = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            walls.append(time.perf_counter() - started)
            if done.returncode != 0:
                raise SystemExit(f"workbench fleet exited {done.returncode}: {done.stderr.strip()}")
        wall = statistics.median(walls)
        print(f"workbench fleet FOLDER (process pool): median {wall:.2f} s of {args.repeats}, "
              f"{wall / TARGET_S:.2f} of the target; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
