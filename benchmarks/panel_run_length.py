"""How long the panel's default run lasts: the run a user watches when they press Run without
changing a knob (the first run of a size pays for its proving key where none is cached, as a
user's first Run does).

    python benchmarks/panel_run_length.py [--repeats 3] [--partitions N] [--json FILE]

The panel's run (viz/runner.py's BackgroundRun, as the panel starts it, no view) with the
panel's own defaults (viz/panel.py's WATCHED) on the CPU backend, timed from its start to its
end. The target: long enough to watch, about 10-20 s on the CPU backend of a 2-core machine.
The baseline: the issue's "the panel's default run is over in about a second". The
configuration's own defaults (a quick run) are timed beside it. `--partitions` changes the
panel's run's partitions (for a quick check of this script).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BASELINE_S = 1.0  # the issue: the panel's default run was over in about a second
TARGET_S = (10.0, 20.0)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2
        print(f"panel_run_length: {message}", file=sys.stderr)
        raise SystemExit(2)


def timed(config: Any) -> tuple[float, int]:
    """Seconds from the run's start to its end, and the partitions it completed."""
    from workbench.viz.runner import BackgroundRun

    run = BackgroundRun(config, fresh=True)
    began = time.perf_counter()
    run.start()
    if not run.join(600):
        run.stop("past the benchmark's time")
        run.join(60)
        raise SystemExit("panel_run_length: a run had not ended after 600 s")
    wall = time.perf_counter() - began
    record = run.record()
    if record.outcome != "completed":
        raise SystemExit(f"panel_run_length: the run did not complete: {record.error}")
    return wall, record.summary.partitions_done


def main(argv: list[str] | None = None) -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--partitions", type=int, help="the panel's run's partitions (default: the panel's)")
    parser.add_argument("--json", help="the figures, written at the end")
    args = parser.parse_args(argv)
    for name in ("repeats", "partitions"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name} is {value}: it must be above 0")
    from workbench.config import RunConfig
    from workbench.viz.panel import WATCHED

    panel = RunConfig().replace(**WATCHED, backend="cpu")
    if args.partitions:
        panel = panel.replace(partitions=args.partitions)
    quick = RunConfig().replace(backend="cpu")
    figures: dict[str, Any] = {"cores": os.cpu_count()}
    for label, config in (("panel", panel), ("configuration", quick)):
        runs = [timed(config) for _ in range(args.repeats)]
        walls = [w for w, _ in runs]
        if any(done != config.partitions for _, done in runs):
            raise SystemExit(f"panel_run_length: a run completed {[d for _, d in runs]} of "
                             f"{config.partitions} partitions")
        figures[label] = {"partitions": config.partitions, "log2": config.log2_constraints,
                          "walls_s": walls, "median_s": statistics.median(walls),
                          "completed": [p for _, p in runs]}
    p, q = figures["panel"], figures["configuration"]
    low, high = TARGET_S
    within = low <= p["median_s"] <= high
    print(f"the panel's default run: {p['partitions']} partitions of 2^{p['log2']}, CPU backend, "
          f"{p['median_s']:.2f} s (median of {args.repeats}: "
          f"{', '.join(f'{w:.2f}' for w in p['walls_s'])}) on {os.cpu_count()} cores = "
          f"{p['median_s'] / BASELINE_S:.1f}x the issue's {BASELINE_S:.0f} s "
          f"({'within' if within else 'outside'} the {low:.0f}-{high:.0f} s target)")
    print(f"the configuration's defaults: {q['partitions']} partitions of 2^{q['log2']}, "
          f"{q['median_s']:.2f} s (median of {args.repeats})")
    if args.json:
        figures.update(baseline_s=BASELINE_S, target_s=list(TARGET_S), within=within)
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
