"""`workbench report TRACE -o report.html` and `workbench lab` (JupyterLab on the notebooks)."""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from workbench.commands._inputs import add_input, add_roles, load_inputs

EXIT_OK, EXIT_USAGE = 0, 2
EXTRA_HINT = "pip install 'workbench[notebook]'"


def register(commands: Any) -> None:
    report = commands.add_parser(
        "report", help="write a self-contained HTML report (Gantt, tables, verdict) of a trace")
    add_input(report, "trace_file")
    report.add_argument("-o", "--output", type=str,
                        help="HTML file to write (default: the trace's name with .html)")
    report.add_argument("--title", help="heading of the report")
    report.add_argument("--max-bars", type=int, default=None, metavar="N",
                        help="draw at most about N bars; larger traces get an aggregated overview "
                             "plus a detail window (default: 20000)")
    report.add_argument("--no-verdict", action="store_true",
                        help="leave the diagnosis out (quicker for traces of millions of spans)")
    add_roles(report)
    report.set_defaults(func=_report)

    lab = commands.add_parser("lab", help="start JupyterLab on the notebooks folder")
    lab.add_argument("--notebooks", type=Path, default=None,
                     help="folder to open (default: ./notebooks, else the one beside the package)")
    lab.add_argument("--port", type=int, default=None,
                     help="port to listen on (default: JupyterLab's own choice, 8888 or the next free one)")
    lab.add_argument("--ip", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    lab.set_defaults(func=_lab)


def _report(args: argparse.Namespace) -> int:
    if args.max_bars is not None and args.max_bars < 100:
        raise ValueError(f"--max-bars {args.max_bars} is not allowed: at least 100")
    from workbench.trace import output as outputs

    output = outputs.check_beside(
        args.output if args.output is not None else args.trace_file.with_suffix(".html"), "-o",
        [args.trace_file])
    (trace,) = load_inputs(args, "trace_file")
    if not trace.meta.get("label"):  # the report names the run by its file, as the notebook's load does
        trace.meta["label"] = args.trace_file.name
    try:
        from workbench.viz.gantt import DEFAULT_MAX_BARS
        from workbench.viz.report import render_report
    except ImportError as err:
        print(f"workbench: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    html = render_report(trace, title=args.title, max_bars=args.max_bars or DEFAULT_MAX_BARS,
                         verdict=not args.no_verdict)
    outputs.write_text(output, html)
    print(f"report: {output} ({len(html.encode()) / 1e6:.1f} MB, {len(trace.spans):,} spans; "
          "opens without network)")
    return EXIT_OK


def notebooks_folder(given: Path | None) -> Path:
    if given is not None:
        if not given.is_dir():
            raise FileNotFoundError(f"no notebooks folder at {given}")
        return given
    for candidate in (Path.cwd() / "notebooks", Path(__file__).resolve().parents[2] / "notebooks"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("no notebooks folder here or beside the package: pass --notebooks DIR")


def lab_command(folder: Path, port: int | None, ip: str, no_browser: bool) -> list[str]:
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}", f"--ip={ip}"]
    if port is not None:
        command.append(f"--port={port}")
    if no_browser:
        command.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers run as root; the server refuses it otherwise
    return command


def exposure_warning(ip: str) -> str | None:
    """The warning for a server that listens beyond this machine (None on a loopback address):
    JupyterLab's terminals and kernels run any command as this user, so whoever on that
    network has the token (it is in the URL the server prints, in logs and browser history)
    has a shell here."""
    host = ip.strip().strip("[]").lower()
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:  # a host name: it may resolve to any interface
        pass
    reach = ("every network interface of this machine" if host in ("", "0.0.0.0", "::", "*")
             else f"{ip}, beyond this machine")
    who = "root" if hasattr(os, "geteuid") and os.geteuid() == 0 else "your user"
    return (f"warning: --ip {ip} listens on {reach}: anyone who can reach it with the server's token "
            f"gets a shell as {who} (JupyterLab's terminals and kernels); prefer --ip 127.0.0.1 and "
            "an SSH tunnel")


def _lab(args: argparse.Namespace) -> int:
    folder = notebooks_folder(args.notebooks)
    command = lab_command(folder, args.port, args.ip, args.no_browser)
    warning = exposure_warning(args.ip)
    if warning is not None:
        print(f"workbench: {warning}", file=sys.stderr)
    if args.dry_run:
        print(shlex.join(command))
        return EXIT_OK
    if importlib.util.find_spec("jupyterlab") is None:
        print(f"workbench: error: JupyterLab is not installed: {EXTRA_HINT}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
