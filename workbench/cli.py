"""The `workbench` command. Only this module (and notebook helpers) touch stdout and files.

Exit codes: 0 done, 1 a phase failed (trace saved) or an internal error, 2 bad input,
130 interrupted (a run saves its trace), 141 the reader of stdout went away (`... | head`).
Whatever happens, stderr gets one line, never a traceback (WORKBENCH_DEBUG=1 shows one).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, NoReturn

from workbench.config import BACKENDS, LOCK_SCOPES, MEMORY_MODES, SYNTHESIS_MODES, ConfigError, RunConfig

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 130, 141

EXPORTS = ("chrome", "cuzk")
_CHOICES = {"backend": BACKENDS, "memory_mode": MEMORY_MODES, "lock_scope": LOCK_SCOPES,
            "synthesis": SYNTHESIS_MODES}
_HELP = {
    "backend": "where the GPU phases run: auto picks the GPU when its kernels can run here",
    "gpus": "GPUs to spread partitions over (emulated on the CPU backend)",
    "gpu_workers": "GPU workers per GPU, taking turns on that GPU's mutex",
    "synth_threads": "synthesis threads",
    "synthesis": "threads: synthesis computes in its threads; processes: each thread drives a process",
    "synth_lookahead": "partitions that may be synthesised ahead of the GPU workers",
    "memory_mode": "where synthesis writes a, b, c and how they reach the device",
    "lock_scope": "coarse: the mutex covers copy and compute; compute: kernels only",
    "partitions": "partitions to prove",
    "log2_constraints": "log2 of constraints (and NTT domain size) per partition",
    "bool_fraction": "share of witness scalars that are 0 or 1",
    "seed": "seed of the synthetic circuit and witnesses",
    "synth_terms": "synthesis cost knob: witness terms combined per constraint",
    "host_load_threads": "threads streaming through host memory beside the run (other work on the host)",
    "trace": "record events (false: run uninstrumented)",
    "gpu_trace": "also record device activity and sample GPU counters (needs the gpu extra)",
    "sample_interval_ms": "period of the GPU counter sampler",
    "verify": "verify every proof (a span of its own after finish); a proof that fails fails the run",
}


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"workbench: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="workbench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run the instrumented proving pipeline")
    defaults = RunConfig()
    for f in fields(RunConfig):
        option = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        if f.name == "trace":
            continue
        if isinstance(default, bool):
            run.add_argument(option, dest=f.name, action="store_const", const=True, default=None,
                             help=_HELP[f.name])
            continue
        kind = type(default)
        choices = _CHOICES.get(f.name)
        allowed = f"one of {', '.join(choices)}; " if choices else ""
        run.add_argument(
            option, dest=f.name, default=None, type=kind, metavar=f.name.upper(),
            choices=choices, help=f"{_HELP[f.name]} ({allowed}default: {default})",
        )
    run.add_argument("--config", type=Path, help="read settings from a JSON file (flags override)")
    run.add_argument("--save-config", type=str, help="write the effective settings as JSON")
    run.add_argument("--trace", dest="trace_path", type=str,
                     help="trace file to write (default: runs/run-<time>-<pid>.wbtrace, a new name)")
    run.add_argument("--no-trace", action="store_true", help="run without recording events")
    run.add_argument("--chrome", type=str, help="also write Chrome trace JSON (opens in Perfetto)")
    run.add_argument("--cuzk-log", action="store_true",
                     help="print cuzk-compatible CUZK_TIMING / TIMELINE lines to stderr")
    run.add_argument("--proofs", type=str, metavar="FILE",
                     help="write the proofs, public inputs and verifying key as JSON (compressed points)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--inject-fault", metavar="PHASE:PARTITION",
                     help="make PHASE raise on PARTITION (to see how failures are handled)")

    from workbench.commands._inputs import add_input, add_roles

    summary = commands.add_parser("summary", help="print the summary of a trace, log or export")
    add_input(summary, "trace_file")
    add_roles(summary)

    export = commands.add_parser("export", help="convert a trace, log or export to another format")
    export.add_argument("format", choices=EXPORTS, metavar="FORMAT",
                        help="chrome: Chrome trace JSON (Perfetto, chrome://tracing, Holistic Trace "
                             "Analysis); cuzk: cuzk daemon CUZK_TIMING / TIMELINE lines")
    add_input(export, "trace_file")
    export.add_argument("-o", "--output", type=str,
                        help="output file (default: stdout); chrome output ending in .gz is gzipped")
    add_roles(export)

    run.set_defaults(func=_run)
    summary.set_defaults(func=_summary)
    export.set_defaults(func=_export)
    for module in command_modules():
        module.register(commands)
    return parser


def command_modules() -> list[Any]:
    """Further subcommands live in workbench/commands/<name>.py, each with `register(commands)`
    adding its parsers and setting `func` to a handler `(args) -> exit code`."""
    import importlib
    import pkgutil

    import workbench.commands as package

    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name)
        if not info.name.startswith("_")  # helpers shared by the commands
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Every way out of a command is an exit code and at most one line on stderr."""
    from workbench.commands._signals import Stops, signals_as_interrupt

    stops = Stops()
    try:
        with signals_as_interrupt() as stops:  # Ctrl-C, SIGTERM, SIGHUP: each ends any command
            code = _dispatch(argv, stops)
            sys.stdout.flush()  # a reader that went away shows here, not at interpreter exit
            return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE
    except KeyboardInterrupt:
        print(f"workbench: interrupted{stops.said()}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # a defect, not bad input: one line still, the traceback on request
        if os.environ.get("WORKBENCH_DEBUG"):
            raise
        where = traceback.extract_tb(err.__traceback__)[-1]
        said = (str(err).strip().splitlines() or [""])[0]
        print(f"workbench: internal error: {type(err).__name__}: {said} (at {Path(where.filename).name}:"
              f"{where.lineno}; WORKBENCH_DEBUG=1 shows the traceback)", file=sys.stderr)
        return EXIT_FAILED


def _dispatch(argv: Sequence[str] | None, stops: Any) -> int:
    args = build_parser().parse_args(argv)
    args.stops = stops  # a run holds the signals while it saves its trace
    try:
        return int(args.func(args))
    except (ConfigError, UsageError) as err:
        return _refuse(str(err))
    except OSError as err:  # missing file, a directory, no permission, disk full, ...
        if isinstance(err, BrokenPipeError):
            raise
        if err.filename is not None and err.strerror:
            return _refuse(f"{err.filename}: {err.strerror}")
        return _refuse(str(err))
    except ValueError as err:  # a malformed trace, log, export, role mapping or config file
        return _refuse(str(err))


def _refuse(message: str) -> int:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    print(f"workbench: error: {first}", file=sys.stderr)
    return EXIT_USAGE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not complain again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (captured in a test)
        pass


def config_from_args(args: argparse.Namespace) -> RunConfig:
    config = RunConfig()
    if args.config is not None:
        from workbench.config import read_small

        text = read_small(args.config, "config")
        config = RunConfig.from_json(text)
    changes = {f.name: getattr(args, f.name) for f in fields(RunConfig)
               if f.name != "trace" and getattr(args, f.name) is not None}
    if args.no_trace:
        changes["trace"] = False
    return config.replace(**changes)


def _fault_hook(spec: str | None) -> Any:
    from workbench.pipeline.faults import FaultSpecError, fault_hook

    try:
        return fault_hook(spec)
    except FaultSpecError as err:
        raise UsageError(str(err)) from None


def _run(args: argparse.Namespace) -> int:
    from workbench.commands._signals import Stops
    from workbench.pipeline.backends import BackendUnavailable, select_backend
    from workbench.pipeline.run import Pipeline
    from workbench.trace import output

    config = config_from_args(args)
    fault = _fault_hook(args.inject_fault)
    # Every output checked before any work, so no run is lost to a path found bad at its end.
    fresh = config.trace and args.trace_path is None
    trace_path: Path | None = output.fresh_run_path() if fresh else None
    if trace_path is not None:  # a new name in runs/ (created if need be): only the folder to check
        output.check_folder(trace_path.parent, f"default trace {trace_path}", created=True)
    explicit, chrome, save_config, proofs = output.check_all([
        ("--trace", args.trace_path if config.trace and not fresh else None),
        ("--chrome", args.chrome if config.trace else None),
        ("--save-config", args.save_config), ("--proofs", args.proofs)])
    trace_path = trace_path or explicit
    if save_config is not None:
        output.write_text(save_config, config.to_json() + "\n")
    try:
        backend = select_backend(config)
    except BackendUnavailable as err:
        print(f"workbench: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    pipeline = Pipeline(config, backend, fault=fault)
    started = time.perf_counter()
    bar = _ProgressBar(enabled=not args.no_progress)

    journal = _journal(trace_path, pipeline)
    noted: list[bool] = []

    def tick() -> None:
        if journal is not None and not noted and pipeline.progress.started_ns:  # setup is done
            journal.note(pipeline.facts())
            noted.append(True)
        bar.draw(pipeline.progress.done, config.partitions, time.perf_counter() - started)

    _announce(config, backend.name)
    stops: Stops = args.stops
    # A stop signal ends the run within the phase in flight. Once its threads have ended, the
    # trace is made and saved whole whatever arrives (a second Ctrl-C would lose it), and a
    # signal then stops the command as soon as it is on disk.
    with stops.hold(lambda: pipeline.ended):
        result = pipeline.run(tick)
        interrupted = pipeline.interrupted
        if interrupted:
            print(f"workbench: interrupted{stops.said()}; saving the trace of what ran", file=sys.stderr)
        if journal is not None:
            if journal.error is not None:
                print(f"workbench: the journal stopped early ({journal.error}); the trace is saved from "
                      f"memory", file=sys.stderr)
            trace_path = _save(journal, result.trace, fresh)
    late = list(stops.held)
    try:
        if late:
            raise KeyboardInterrupt
        return _run_outputs(args, pipeline, result, bar, trace_path, chrome, proofs)
    except KeyboardInterrupt:
        if not interrupted:
            print(f"workbench: interrupted{stops.said(late or stops.received[-1:])}", file=sys.stderr)
        if trace_path is not None:
            print(f"trace: {trace_path}")
        return EXIT_INTERRUPTED


def _run_outputs(args: argparse.Namespace, pipeline: Any, result: Any, bar: _ProgressBar,
                 trace_path: Path | None, chrome: Path | None, proofs: Path | None) -> int:
    """What a run prints and writes once its trace is saved."""
    from workbench.render.text import render_summary, render_untraced
    from workbench.trace import output

    config = pipeline.config
    summary, done, wall_s = _run_figures(pipeline, result)
    bar.draw(done, config.partitions, wall_s, final=True)  # the summary's own figures
    for notice in pipeline.notices:
        print(f"workbench: {notice}", file=sys.stderr)
    if summary is not None:
        print(render_summary(summary, config.to_dict()))
    else:
        print(render_untraced(result.outcome, done, wall_s, config.to_dict()))
    if trace_path is not None:
        print(f"trace: {trace_path}")
    if chrome is not None:
        from workbench.export.chrome import to_chrome_json

        output.write_text(chrome, to_chrome_json(result.trace))
        print(f"chrome trace: {chrome}")
    if args.cuzk_log and config.trace:
        from workbench.export.cuzk_log import cuzk_lines

        sys.stderr.write("".join(line + "\n" for line in cuzk_lines(result.trace)))
    if proofs is not None and not _write_proofs(proofs, pipeline, result.proofs):
        return EXIT_USAGE
    if pipeline.interrupted:
        return EXIT_INTERRUPTED
    if result.outcome == "failed":
        print(f"workbench: run failed: {result.error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _journal(trace_path: Path | None, pipeline: Any) -> Any:
    """The journal the run streams its records to beside its trace (None untraced), after
    saying what journals killed runs left there."""
    if trace_path is None:
        return None
    from workbench.commands.recover import say_left_behind
    from workbench.trace.journal import Journal

    for line in say_left_behind(trace_path.parent):
        print(f"workbench: {line}", file=sys.stderr)
    return Journal.create(trace_path, pipeline.recorder, config=pipeline.config.to_dict()).start()


def _save(journal: Any, trace: Any, fresh: bool) -> Path:
    from workbench.trace.output import OutputError

    kept = f"; what was recorded is kept in {journal.path} (`workbench recover` makes it a trace)"
    try:
        return Path(journal.finish(trace, fresh=fresh))
    except OutputError as err:  # the journal stays: say where the run's records are
        raise OutputError(f"{err}{kept}") from None
    except OSError as err:
        raise OSError(err.errno, f"{err.strerror or err}{kept}", err.filename) from None


def _run_figures(pipeline: Any, result: Any) -> tuple[Any, int, float]:
    """The run's summary (None untraced), partitions done and wall seconds: the figures the
    progress bar ends on and the summary prints, so the two agree. Untraced, they come from
    the pipeline's own count and clock, from the end of setup as a trace's run window does."""
    from workbench.analysis.summary import summarize

    if pipeline.config.trace:
        summary = summarize(result.trace)
        return summary, summary.partitions_done, summary.wall_s
    started = pipeline.progress.started_ns
    wall_ns = pipeline.recorder.now_ns() - started if started else 0
    return None, pipeline.progress.done, wall_ns / 1e9


def _write_proofs(path: Path, pipeline: Any, proofs: dict[int, Any]) -> bool:
    from workbench.pipeline.proofs import proofs_json
    from workbench.trace import output

    try:
        text, count = proofs_json(pipeline, proofs)
    except ValueError as err:
        print(f"workbench: error: --proofs {path}: {err}", file=sys.stderr)
        return False
    output.write_text(path, text)
    print(f"proofs: {path} ({count} proofs)")
    return True


def _announce(config: RunConfig, backend: str) -> None:
    print(
        f"workbench run: {backend} backend, {config.partitions} partitions of 2^"
        f"{config.log2_constraints} constraints, "
        f"{f'{config.gpus} GPUs x ' if config.gpus > 1 else ''}{config.gpu_workers} GPU workers, "
        f"{config.synth_threads} synthesis threads, memory {config.memory_mode}, "
        f"lock scope {config.lock_scope}", file=sys.stderr, flush=True,
    )


def _summary(args: argparse.Namespace) -> int:
    from workbench.analysis.role_summary import is_pipeline, role_summary
    from workbench.analysis.summary import summarize
    from workbench.commands._inputs import load_inputs
    from workbench.render.text import render_role_summary, render_summary

    (trace,) = load_inputs(args, "trace_file")
    if not is_pipeline(trace):
        print(render_role_summary(role_summary(trace)))
        return EXIT_OK
    print(render_summary(summarize(trace), trace.config))
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from workbench.commands._inputs import load_inputs
    from workbench.trace import output

    (target,) = output.check_all([("-o", args.output)], [args.trace_file])
    (trace,) = load_inputs(args, "trace_file")
    if args.format == "chrome":
        from workbench.export.chrome import to_chrome_json

        text = to_chrome_json(trace)
    else:
        from workbench.export.cuzk_log import cuzk_lines

        text = "".join(line + "\n" for line in cuzk_lines(trace))
        if not text:
            raise ValueError(f"{args.trace_file}: nothing to write as cuzk lines (no GPU worker phases of a "
                             "proving pipeline in it)")
    if target is None:
        sys.stdout.write(text)
    elif target.suffix == ".gz":
        import gzip

        output.write_bytes(target, gzip.compress(text.encode()))
    else:
        output.write_text(target, text)
    return EXIT_OK


class _ProgressBar:
    WIDTH = 30

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._last = ""

    def draw(self, done: int, total: int, elapsed: float, final: bool = False) -> None:
        if not self.enabled:
            return
        filled = int(self.WIDTH * done / max(total, 1))
        rate = done / elapsed * 60 if elapsed > 0 else 0.0
        line = (f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total} partitions "
                f"{elapsed:6.1f}s {rate:6.1f}/min")
        if line != self._last or final:
            sys.stderr.write(line + ("\n" if final else ""))
            sys.stderr.flush()
            self._last = line


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
