"""`workbench follow FILE|-`: a growing cuzk daemon log read as it grows, its lock and barrier
shown live with the running verdict; Ctrl-C (or SIGTERM, SIGHUP) saves the trace.

The log is read incrementally (partial lines held until they end, a rotated or truncated
file read again from its start, a daemon restart a new segment of the same trace), and the
trace saved is the one `workbench import` makes of the same lines. While it reads, the trace
is journaled beside its target, so a follow that is killed leaves `workbench recover` its
settled calls. On a terminal the view is redrawn in place a few times a second; otherwise a
plain line is printed when what it says changes.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130
REFRESH_S = 0.25  # a terminal's view is redrawn at most this often
PLAIN_S = 2.0  # and a plain line printed at most this often


def register(commands: Any) -> None:
    follow = commands.add_parser(
        "follow", help="follow a growing cuzk daemon log (or stdin): live Gantt of the lock and barrier, "
                       "running verdict; Ctrl-C saves the trace",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    follow.add_argument("source", metavar="FILE|-", help="the daemon's log file, or - for stdin "
                                                         "(journalctl -f -u cuzk | workbench follow -)")
    follow.add_argument("--trace", dest="trace_path", type=str,
                        help="trace file to write (default: runs/follow-<time>-<pid>.wbtrace, a new name)")
    where = follow.add_mutually_exclusive_group()
    where.add_argument("--from-start", dest="from_start", action="store_true", default=True,
                       help="read the file from its start, then as it grows (default)")
    where.add_argument("--from-end", dest="from_start", action="store_false",
                       help="read only what is written from now on")
    follow.add_argument("--until-idle", type=float, metavar="SECONDS",
                        help="stop (and save) once the log has not grown for this long")
    follow.add_argument("--live", action="store_true",
                        help="also serve the live Bokeh view (Gantt and verdict) on localhost (the notebook "
                             "extra); the address is printed")
    follow.add_argument("--port", type=int, default=0, help="port of the --live view (default: a free one)")
    follow.set_defaults(func=_follow)


def _follow(args: argparse.Namespace) -> int:
    from workbench.follow import FollowSession, open_source
    from workbench.trace import output
    from workbench.trace.journal import Journal

    if args.until_idle is not None and not 0 < args.until_idle <= 7 * 86400:
        raise ValueError(f"--until-idle={args.until_idle} is not allowed: seconds above 0, a week at most")
    inputs = [] if args.source == "-" else [args.source]
    fresh = args.trace_path is None
    if fresh:
        trace_path = output.fresh_run_path(prefix="follow")
        output.check_folder(trace_path.parent, f"default trace {trace_path}", created=True)
    else:
        (checked,) = output.check_all([("--trace", args.trace_path)], inputs)
        assert checked is not None
        trace_path = checked
    from workbench.commands.recover import say_left_behind

    for line in say_left_behind(trace_path.parent):
        print(f"workbench: {line}", file=sys.stderr)
    tail = open_source(args.source, args.from_start)
    source = "<stdin>" if args.source == "-" else args.source
    session = FollowSession(tail, source, args.until_idle)
    try:
        journal = Journal.create(trace_path, session.settled, meta={"outcome": "running", "follow": source})
        server = _live_server(args) if args.live else None
    except BaseException:
        tail.close()
        raise
    journal.start()
    if server is not None:
        server.attach(session)
        print(f"workbench: live view at {server.url} (Stop there ends the following)", file=sys.stderr)
    screen = _Screen(sys.stdout)
    stops = args.stops
    interrupted = False
    try:
        with stops.hold(lambda: session.busy):
            while not session.ended and not stops.held and not (server is not None and server.stop_requested):
                session.step()
                screen.draw(session)
            interrupted = bool(stops.held)
    except KeyboardInterrupt:
        interrupted = True
    with stops.hold():  # the trace is made and saved whole, whatever arrives meanwhile
        if interrupted:
            print(f"workbench: interrupted{stops.said()}; saving the trace of what was read", file=sys.stderr)
        try:
            trace = session.finish()
        except ValueError:
            journal.close()
            journal.remove()
            if server is not None:
                server.stop()
            if interrupted:
                print("workbench: no cuzk timing line was read; no trace written", file=sys.stderr)
                return EXIT_INTERRUPTED
            raise
        stopped = server is not None and server.stop_requested
        trace.meta["outcome"] = "interrupted" if interrupted else "stopped" if stopped else "completed"
        written = Path(journal.finish(trace, fresh=fresh))
        screen.draw(session, final=True)
        for note in session.progress.notes:
            print(f"workbench: {note}", file=sys.stderr)
        print(f"trace: {written}")
    if server is not None:
        server.stop()
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


class _Screen:
    """The view on stdout: redrawn in place on a terminal, plain lines otherwise."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.drawn = 0
        self.next = 0.0
        self.last = ""

    def draw(self, session: Any, final: bool = False) -> None:
        from workbench.render.follow_text import render_follow, status_line

        now = time.monotonic()
        if not final and (now < self.next or not (session.changed or self.tty)):
            return
        session.changed = False
        if self.tty:
            self.next = now + REFRESH_S
            width = shutil.get_terminal_size((100, 24)).columns
            lines = render_follow(session.trace, session.progress, session.idle_s,
                                  columns=max(20, min(80, width - 30)))
            up = f"\x1b[{self.drawn}F\x1b[J" if self.drawn else ""
            self.stream.write(up + "".join(line[:width - 1] + "\n" for line in lines))
            self.drawn = len(lines)
        else:
            line = f"{status_line(session.progress, 0)} · verdict: {session.progress.headline}"
            if line == self.last:
                return
            self.next = now + PLAIN_S
            self.last = line
            self.stream.write(line + "\n")
        self.stream.flush()


def _live_server(args: argparse.Namespace) -> Any:
    from workbench.viz.follow_view import LiveServer

    return LiveServer(args.port).start()
