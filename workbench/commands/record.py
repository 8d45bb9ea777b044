"""`workbench record [--live] -- CMD ARGS...`: record an unmodified program.

The program runs with the recording shims (workbench/attach/): its pthread locks, condition
variables and semaphores, its NVTX ranges and, where CUPTI is found, its CUDA activity become
a trace (`--cuda-mode launches` or `sampled`: kernels by their launches, timed on the host,
for programs whose launches are too short to pay for a record each), streamed to a journal
while it runs (a kill of the recorder loses at most the last flush: `workbench recover`).
The command exits with the program's exit code, 128 + n when a signal ended it; Ctrl-C or
SIGTERM are passed on to the program, and the trace is saved once it has ended. `--live`
serves the live Gantt on a local port while the program runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    record = commands.add_parser(
        "record", help="record an unmodified program: its locks, NVTX ranges and CUDA activity",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    record.add_argument("-o", "--trace", dest="trace_path", type=str,
                        help="trace file to write (default: runs/record-<time>-<pid>.wbtrace, a new name)")
    record.add_argument("--live", action="store_true",
                        help="serve the live Gantt at http://127.0.0.1:PORT/ while the program runs")
    record.add_argument("--port", type=int, default=5006, help="port of the live view (default: 5006)")
    record.add_argument("--no-cuda", action="store_true", help="do not record CUDA activity")
    record.add_argument("--locks", choices=("contended", "all", "none"), default="contended",
                        help="which mutexes to record: contended (default: each mutex from the first time "
                             "a thread waits for it, with the hold it waited for; condition waits always), "
                             "all (every hold: slower, ~2 ring events a lock), none")
    record.add_argument("--cuda-kinds", default="all", metavar="KINDS",
                        help="CUDA activity recorded: a comma list of kernel, memcpy, memset, sync, runtime "
                             "(the launching, copying, waiting and allocating runtime calls), all (default) "
                             "or none; add overhead for CUPTI's records of its own time (counted)")
    record.add_argument("--cuda-mode", default="activity", metavar="MODE",
                        help="how kernels are recorded: activity (default: a CUPTI activity record of each, "
                             "its GPU start and end; costs a launch-bound program ~2 us a launch), launches "
                             "(each launch counted and timed on the host, by kernel name and thread, through "
                             "CUPTI's launch callbacks: no GPU time), sampled (launches, and kernel records "
                             "in the first WINDOW ms of every PERIOD ms, --sample-ms; the GPU's idle time "
                             "is judged inside those windows)")
    record.add_argument("--sample-ms", default="1/10", metavar="WINDOW/PERIOD",
                        help="--cuda-mode sampled: kernel records in the first WINDOW ms of every PERIOD ms "
                             "(default 1/10)")
    record.add_argument("--roles", type=Path, metavar="FILE",
                        help="role mapping file, stored with the trace (names locks by address, ...)")
    record.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                        help="the program to record and its arguments")
    record.set_defaults(func=_record)


def _record(args: argparse.Namespace) -> int:
    from workbench import compiled
    from workbench.attach.build import build_shims
    from workbench.attach.session import Session, check_cuda_mode, cuda_kinds, sample_ms
    from workbench.commands._inputs import read_rules
    from workbench.model.roles import with_rules
    from workbench.trace import output

    kinds = cuda_kinds(args.cuda_kinds)
    check_cuda_mode(args.cuda_mode, kinds)  # before the shims are built: a bad knob costs no compile
    sample = sample_ms(args.sample_ms)
    argv = list(args.command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise ValueError("record: no program given (workbench record -- CMD ARGS...)")
    rules = read_rules(args)
    fresh = args.trace_path is None
    if fresh:
        trace_path = output.fresh_run_path(prefix="record")
        output.check_folder(trace_path.parent, f"default trace {trace_path}", created=True)
    else:
        (checked,) = output.check_all([("--trace", args.trace_path)])
        assert checked is not None
        trace_path = checked
    try:
        shims = build_shims(cuda=not args.no_cuda)
    except compiled.BuildError as err:
        raise ValueError(f"record: the recording shim cannot be built here: {err}") from None
    for note in shims.notes:
        print(f"workbench: {note}", file=sys.stderr)
    session = Session(argv, shims, locks=args.locks, cuda_kinds=kinds, cuda_mode=args.cuda_mode,
                      sample=sample)
    try:
        return _run(args, session, trace_path, fresh, rules, with_rules)
    finally:
        session.close()


def _run(args: argparse.Namespace, session: Any, trace_path: Path, fresh: bool, rules: Any,
         with_rules: Any) -> int:
    from workbench.commands.recover import say_left_behind
    from workbench.trace.journal import Journal

    for line in say_left_behind(trace_path.parent):
        print(f"workbench: {line}", file=sys.stderr)
    journal = Journal.create(trace_path, session.recorder, config={"command": session.argv},
                             meta={"import": {"format": "workbench record"}}).start()
    server = None
    try:
        if args.live:
            from workbench.viz.view_process import ViewProcess

            # In a process of its own: this one keeps to draining the program's records.
            title = " ".join(session.argv)[:80]
            server = ViewProcess(session.recorder, title=f"live: {title}", port=args.port,
                                 page_title=f"workbench record: {title}",
                                 say=lambda line: print(f"workbench: {line}", file=sys.stderr, flush=True))
            server.start()
            print(f"workbench: live view at {server.url}", file=sys.stderr, flush=True)
        try:
            session.start()
        except OSError as err:
            raise ValueError(f"record: cannot run {session.argv[0]}: {err.strerror or err}") from None
        stops = args.stops
        # The program's end is waited for through stop signals (passed on to it); once it has
        # ended, the trace is made and saved whole whatever arrives.
        with stops.hold(lambda: session.returncode is not None):
            code = session.wait(stops)
            trace = session.trace()
            if rules:
                with_rules(trace, rules)
            written = journal.finish(trace, fresh=fresh)
    except BaseException:
        journal.close()
        raise
    finally:
        if server is not None:
            server.close()
    _say(session, trace, Path(written))
    return code


def _say(session: Any, trace: Any, written: Path) -> None:
    record = trace.meta["record"]
    counts = record["counts"]
    parts = [f"{counts.get(k, 0)} {k}" for k in ("lock holds", "lock waits", "condition waits",
                                                    "semaphore waits", "NVTX ranges", "kernels",
                                                    "kernel launches", "copies")
             if counts.get(k)]
    for note in record["notes"]:
        if note not in session.shims.notes:
            print(f"workbench: {note}", file=sys.stderr)
    stopped = f", stopped by {record['stopped_by']}" if record["stopped_by"] else ""
    print(f"workbench record: {' '.join(session.argv)} {trace.meta['outcome']}{stopped}; "
          f"{', '.join(parts) or 'nothing recorded'}", file=sys.stderr)
    print(f"trace: {written}")
