"""`workbench sweep GRID`: every cell of a grid file run (on Ray when it is installed, else one
after another here), the traces kept in one folder with an index, then the grid's table,
its what-if checks and, on request, one report; `workbench sweep --summarize DIR` reads a
folder again without running anything.

Exit codes: 0 every run completed, 1 a run failed (the others went on), 2 a bad grid file or
folder, 130 interrupted (finished runs kept, the index says which were cut short).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from workbench.sweep.index import SweepIndex
from workbench.sweep.run import Listener

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def register(commands: Any) -> None:
    sweep = commands.add_parser(
        "sweep", help="run a grid of configurations (on Ray when installed) and compare them",
        description=__doc__)
    sweep.add_argument("grid", nargs="?", type=Path,
                       help="grid file: TOML ([base], [axes], [cells.NAME], repeats, order, seed), "
                            "JSON when it ends in .json")
    sweep.add_argument("--out", type=Path, help="folder for the traces and index.json "
                                                "(default: sweeps/<grid>-<time>, a new one)")
    sweep.add_argument("--summarize", type=Path, metavar="DIR",
                       help="run nothing: read the sweep folder DIR again and print its table")
    sweep.add_argument("--local", action="store_true",
                       help="run the cells one after another in this process even where Ray is installed")
    sweep.add_argument("--address", help="join the Ray cluster at this address (default: start a local "
                                         "one for the sweep and shut it down after)")
    sweep.add_argument("--exclusive-host", action="store_true",
                       help="each run alone on its host (host memory contention is what is measured)")
    sweep.add_argument("--report", type=Path, metavar="FILE", help="also write the sweep's HTML report")
    sweep.add_argument("--json", type=Path, metavar="FILE", help="also write the table's figures as JSON")
    sweep.add_argument("--no-progress", action="store_true", help="no progress bar")
    sweep.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    from workbench.trace import output

    if (args.grid is None) == (args.summarize is None):
        raise ValueError("give a grid file to run, or --summarize DIR to read a sweep again (one of them)")
    if args.summarize is not None and (args.out or args.local or args.address or args.exclusive_host):
        raise ValueError("--summarize runs nothing: --out, --local, --address and --exclusive-host "
                         "do not apply")
    report, json_out = output.check_all([("--report", args.report), ("--json", args.json)])
    if args.summarize is not None:
        return _summarize(args.summarize, report, json_out)
    return _run(args, report, json_out)


def _run(args: argparse.Namespace, report: Path | None, json_out: Path | None) -> int:
    from workbench.sweep import load_grid, make_executor, prepare_folder
    from workbench.sweep.ray_executor import ExecutorUnavailable
    from workbench.sweep.run import Driver

    grid = load_grid(args.grid)
    executor = make_executor(args.local, args.address, args.exclusive_host)
    prepare_folder(args.out, args.grid.name, create=False)  # a bad folder is refused before Ray starts
    interrupted = False
    # Ctrl-C, SIGTERM and SIGHUP arrive here as KeyboardInterrupt (cli.main's handlers).
    try:
        executor.open()
    except ExecutorUnavailable as err:
        print(f"workbench: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        folder = prepare_folder(args.out, args.grid.name)
    except BaseException:
        executor.close()
        raise
    driver = Driver(grid, folder, executor.name, ProgressLine(enabled=not args.no_progress))
    try:
        index = driver.run(executor)
    except KeyboardInterrupt:
        interrupted, index = True, driver.index
    print(f"sweep: {folder} ({index.status}; {_counts(index)})")
    if interrupted:
        print(f"workbench: interrupted{args.stops.said()}; the finished runs are kept, "
              f"{folder / 'index.json'} says which were cut short", file=sys.stderr)
    if any(e.status == "completed" for e in index.entries):
        _summarize(folder, report, json_out)
    if interrupted:
        return EXIT_INTERRUPTED
    failed = index.by_status("failed")
    if failed:
        print(f"workbench: {len(failed)} of {len(index.entries)} runs failed; first: {failed[0].label}: "
              f"{failed[0].error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _summarize(folder: Path, report: Path | None, json_out: Path | None) -> int:
    from workbench.sweep import read_study, summary_of
    from workbench.sweep.text import table_lines
    from workbench.trace import output

    study = read_study(folder)
    summary = summary_of(study)
    print("\n".join(table_lines(summary)))
    if json_out is not None:
        output.write_text(json_out, json.dumps(summary, indent=2, default=str) + "\n")
        print(f"figures: {json_out}")
    if report is not None:
        from workbench.viz.sweep_report import render_sweep

        html = render_sweep(study, folder.name)
        output.write_text(report, html)
        print(f"report: {report} ({len(html.encode()) / 1e6:.1f} MB; opens without network)")
    return EXIT_OK


def _counts(index: SweepIndex) -> str:
    from workbench.sweep.study import index_summary

    return ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in index_summary(index).items())


class ProgressLine(Listener):
    """A line per run that ends, and (on a terminal) a bar of runs and partitions below them."""

    WIDTH = 24

    def __init__(self, enabled: bool = True, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.bar = enabled and self.stream.isatty()
        self.index: SweepIndex | None = None
        self.began_at = 0.0
        self._drawn = 0.0

    def began(self, index: SweepIndex) -> None:
        self.index, self.began_at = index, time.perf_counter()
        cells = len({e.cell for e in index.entries})
        grid = index.grid
        self._say(f"workbench sweep: {len(index.entries)} runs of {cells} cells "
                  f"({grid.get('repeats', 1)} each, order {grid.get('order')}), executor {index.executor}")
        for note in index.notes:
            self._say(f"workbench sweep: {note}")

    def started(self, entry: Any) -> None:
        self._draw(force=True)

    def progress(self, entry: Any) -> None:
        self._draw()

    def finished(self, entry: Any) -> None:
        assert self.index is not None
        done = sum(e.status not in ("pending", "running") for e in self.index.entries)
        where = f" on {entry.host}" + (f" (GPU {','.join(map(str, entry.gpus))})" if entry.gpus else "")
        wall = f" in {entry.wall_s:.1f} s" if entry.wall_s is not None else ""
        said = f": {entry.error}" if entry.error else ""
        self._say(f"[{done}/{len(self.index.entries)}] {entry.label}: {entry.status.replace('_', ' ')}{wall}"
                  f"{where}, {entry.partitions_done}/{entry.partitions} partitions{said}")
        self._draw(force=True)

    def ended(self, index: SweepIndex) -> None:
        if self.bar:
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _say(self, line: str) -> None:
        if self.bar:
            self.stream.write("\r\033[K")
        self.stream.write(line + "\n")
        self.stream.flush()

    def _draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not self.bar or self.index is None or (not force and now - self._drawn < 0.2):
            return
        self._drawn = now
        entries = self.index.entries
        done = sum(e.status not in ("pending", "running") for e in entries)
        running = [e for e in entries if e.status == "running"]
        parts = sum(e.partitions_done for e in entries)
        total = sum(e.partitions for e in entries) or 1
        filled = int(self.WIDTH * done / max(len(entries), 1))
        bar = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}]"
        self.stream.write(f"\r\033[K{bar} {done}/{len(entries)} runs, "
                          f"{parts}/{total} partitions, {len(running)} running, "
                          f"{now - self.began_at:.0f} s")
        self.stream.flush()
