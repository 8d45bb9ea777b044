"""`workbench fleet PATHS...`: many hosts' logs, exports or traces, ranked by what bounds each."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from workbench.commands._inputs import INPUTS

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130


def register(commands: Any) -> None:
    fleet = commands.add_parser(
        "fleet", help="read many hosts' logs, exports or traces at once; rank the hosts by what bounds each",
        description="Each file is one host: " + INPUTS + ". A directory stands for its readable files. "
                    "Every host's verdict is reduced to its bound (the first finding), its cost and the "
                    "spans or log lines that show it; the hosts are ranked by bound, then by cost.")
    fleet.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or directories")
    fleet.add_argument("--parallel", choices=("process", "ray", "serial"), default="process",
                       help="process: a pool of processes on this machine (default); ray: tasks on Ray "
                            "(the cluster extra), at --address or on a local cluster; serial: one by one")
    fleet.add_argument("--workers", type=int, metavar="N",
                       help="processes of the pool (default: one a core); with --parallel ray, tasks at once")
    fleet.add_argument("--address", metavar="ADDR", help="Ray cluster to run on (with --parallel ray)")
    fleet.add_argument("--report", metavar="FILE", help="also write a self-contained HTML report")
    fleet.add_argument("--json", metavar="FILE", help="also write every host's record as JSON")
    fleet.add_argument("--title", help="heading of the report")
    fleet.add_argument("--details", action="store_true",
                       help="under the table, each host's headline and its evidence")
    fleet.add_argument("--no-progress", action="store_true", help="no progress line")
    fleet.add_argument("--link-gbps", type=float, metavar="GBPS",
                       help="host-to-device link speed of every host, where its trace cannot measure it")
    fleet.add_argument("--copy-bytes", type=float, metavar="BYTES",
                       help="bytes of a, b, c per partition, for logs that record times only")
    fleet.add_argument("--no-whatif", action="store_true", help="skip the what-if predictions (quicker)")
    fleet.set_defaults(func=_fleet)


def _options(args: argparse.Namespace) -> Any:
    from workbench.analysis.verdict import DiagnoseOptions

    for name in ("link_gbps", "copy_bytes"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise ValueError(f"--{name.replace('_', '-')}={value} is not allowed: a positive number")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers={args.workers} is not allowed: at least 1")
    if args.address is not None and args.parallel != "ray":
        raise ValueError("--address is the Ray cluster's: give it with --parallel ray")
    return DiagnoseOptions(args.link_gbps, args.copy_bytes, whatif=not args.no_whatif)


class _Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()

    def update(self, record: Any, done: int, total: int) -> None:
        if self.enabled:
            sys.stderr.write(f"\rread {done}/{total} hosts" + ("\n" if done == total else ""))
            sys.stderr.flush()


def _fleet(args: argparse.Namespace) -> int:
    from workbench.analysis.fleet import as_dict, rank
    from workbench.fleet import expand, read_fleet
    from workbench.render.fleet_text import render_fleet
    from workbench.trace import output

    options = _options(args)
    files = expand(args.paths)
    if not files:
        raise ValueError(f"no files to read in {', '.join(str(p) for p in args.paths)}")
    report, json_path = output.check_all([("--report", args.report), ("--json", args.json)], files)
    if report is not None:
        from workbench.viz.deps import require

        require("bokeh")
    progress = _Progress(not args.no_progress)
    read = read_fleet(files, options, args.parallel, args.workers, args.address, progress.update)
    view = rank(read.records)
    print(render_fleet(view, read.interrupted, read.files, details=args.details))
    if json_path is not None:
        document = {"format": "workbench fleet", "files": read.files, "interrupted": read.interrupted,
                    "parallel": read.parallel, "seconds": read.seconds, **as_dict(view)}
        output.write_text(json_path, json.dumps(document, indent=1) + "\n")
        print(f"json: {json_path}")
    if report is not None:
        from workbench.viz.fleet_report import render_fleet_report

        output.write_text(report, render_fleet_report(view, args.title, read.interrupted, read.files,
                                                      read.parallel))
        print(f"report: {report}")
    if read.interrupted:
        print(f"workbench: interrupted; {len(read.records)} of {read.files} hosts read", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not view.read:
        print(f"workbench: error: none of the {read.files} files could be read as a host's log, export "
              "or trace", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
