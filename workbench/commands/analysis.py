"""`workbench diagnose`, `import`, `diff` and `whatif`: verdicts on traces, logs and exports."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.commands._inputs import add_input, add_roles, load_inputs, read_rules
from workbench.config import LOCK_SCOPES


def register(commands: Any) -> None:
    diagnose = commands.add_parser(
        "diagnose", help="print the verdict on a trace, cuzk log, nsys SQLite export or Chrome trace")
    add_input(diagnose)
    _analysis_options(diagnose)
    diagnose.add_argument("--brief", action="store_true",
                          help="the headline and the findings (with the notes that qualify them), no tables")
    diagnose.set_defaults(func=_diagnose)

    importing = commands.add_parser(
        "import", help="convert a cuzk log, nsys export or Chrome trace to a trace; show the roles found")
    add_input(importing)
    importing.add_argument("-o", "--output", type=str,
                           help="trace file to write (.wbtrace); needed unless --show-roles")
    importing.add_argument("--show-roles", action="store_true",
                           help="print each role's span count and the (track kind, span name) pairs "
                                "behind it, with the rule or default that assigned them")
    add_roles(importing)
    importing.set_defaults(func=_import)

    diff = commands.add_parser("diff", help="compare two runs: phases, utilisation, findings")
    add_input(diff, "a", "run A")
    add_input(diff, "b", "run B, compared against A")
    _analysis_options(diff)
    diff.set_defaults(func=_diff)

    whatif = commands.add_parser(
        "whatif", help="predict a run's throughput with a change, by replay",
        description="Replay a run with the changes given (any combination) and print the predicted "
                    "throughput against the measured one.")
    add_input(whatif)
    whatif.add_argument("--gpu-workers", type=int, metavar="N", help="GPU workers per GPU (1 to 64)")
    whatif.add_argument("--synth-threads", type=int, metavar="N", help="synthesis threads (1 to 64)")
    whatif.add_argument("--lock-scope", choices=LOCK_SCOPES,
                        help="what the mutex covers: coarse (copy and compute) or compute (kernels only)")
    whatif.add_argument("--zerocopy", action="store_true",
                        help="copies at the link's speed with no staging, as zerocopy memory would "
                             "(the trace's link speed, or --link-gbps)")
    whatif.add_argument("--synthesis-speedup", type=float, default=1.0, metavar="K",
                        help="synthesis K times faster (default: 1)")
    whatif.add_argument("--prep-speedup", type=float, default=1.0, metavar="K",
                        help="prep_msm K times faster (default: 1)")
    whatif.add_argument("--compute-speedup", type=float, default=1.0, metavar="K",
                        help="GPU compute phases K times faster (default: 1)")
    _analysis_options(whatif, predictions=False)
    whatif.set_defaults(func=_whatif)


def _analysis_options(parser: argparse.ArgumentParser, predictions: bool = True) -> None:
    parser.add_argument("--link-gbps", type=float, metavar="GBPS",
                        help="host-to-device link speed in GB/s (default: what the trace measured or "
                             "recorded; needed for --zerocopy where it has none)")
    parser.add_argument("--copy-bytes", type=float, metavar="BYTES",
                        help="bytes of a, b, c per partition, for logs that record times only")
    parser.add_argument("--host-cores", type=float, metavar="N",
                        help="cores the host phases share in the replay (default: from the backend)")
    if predictions:  # whatif is the prediction itself: nothing to skip there
        parser.add_argument("--no-whatif", action="store_true", help="skip the what-if predictions")
    add_roles(parser)


def _options(args: argparse.Namespace) -> Any:
    from workbench.analysis.verdict import DiagnoseOptions
    from workbench.config import LINK_GBPS_RANGE

    # Beyond these a replayed copy or phase lasts past any clock (1e-300 GB/s overflowed it).
    ranges = {"link_gbps": (LINK_GBPS_RANGE, "GB/s"), "copy_bytes": ((1, 2**50), "bytes"),
              "host_cores": ((0.01, 65536), "cores")}
    for name, ((low, high), unit) in ranges.items():
        value = getattr(args, name, None)
        if value is not None and not low <= value <= high:
            raise ValueError(f"--{name.replace('_', '-')}={value} is not allowed: {low:g} to {high:g} {unit}")
    return DiagnoseOptions(args.link_gbps, args.copy_bytes, args.host_cores,
                           not getattr(args, "no_whatif", False))


def _diagnose(args: argparse.Namespace) -> int:
    from workbench.analysis.verdict import diagnose
    from workbench.render.verdict_text import render_verdict

    options = _options(args)
    (trace,) = load_inputs(args, "path")
    print(render_verdict(diagnose(trace, options), trace, details=not args.brief))
    return 0


def _import(args: argparse.Namespace) -> int:
    from workbench.commands._inputs import load_input
    from workbench.trace import store

    if args.output is None and not args.show_roles:
        raise ValueError("import needs -o FILE (the trace to write), --show-roles, or both")
    from workbench.trace import output

    (target,) = output.check_all([("-o", args.output)], [args.path])
    rules = read_rules(args)
    trace = load_input(args.path, rules)
    if args.show_roles:
        from workbench.render.roles_text import render_roles

        print(render_roles(trace, len(rules)))
    if target is None:
        return 0
    path = store.save(trace, target)
    report = trace.meta.get("import", {})
    skipped = report.get("skipped", {}) if isinstance(report, dict) else {}
    print(f"{len(trace.spans)} spans, {len(trace.instants)} instants, {len(trace.counters)} counter samples "
          f"from {report.get('format', 'a workbench trace') if isinstance(report, dict) else args.path}")
    for reason, count in sorted(skipped.items()):
        print(f"skipped {count}: {reason} (first at {report['first_at'].get(reason, '?')})")
    for missing in report.get("missing", []) if isinstance(report, dict) else []:
        print(f"missing: {missing}")
    print(f"trace: {path}")
    return 0


def _diff(args: argparse.Namespace) -> int:
    from workbench.analysis.diff import diff
    from workbench.render.verdict_text import render_diff

    options = _options(args)
    a, b = load_inputs(args, "a", "b")
    emulated = (bool(a.meta.get("memory_emulated")), bool(b.meta.get("memory_emulated")))
    print(render_diff(diff(a, b, options), str(args.a), str(args.b), emulated))
    return 0


def _whatif(args: argparse.Namespace) -> int:
    from workbench.analysis.transfers import transfer_report
    from workbench.analysis.whatif import SPEEDUP_RANGE, Change, WhatIf, WhatIfOptions

    options = _options(args)
    for name in ("synthesis_speedup", "prep_speedup", "compute_speedup"):
        value = getattr(args, name)
        if not SPEEDUP_RANGE[0] <= value <= SPEEDUP_RANGE[1]:
            raise ValueError(f"--{name.replace('_', '-')}={value} is not allowed: a factor from "
                             f"{SPEEDUP_RANGE[0]:g} to {SPEEDUP_RANGE[1]:g}")
    for name in ("gpu_workers", "synth_threads"):
        if getattr(args, name) is not None and not 1 <= getattr(args, name) <= 64:
            raise ValueError(f"--{name.replace('_', '-')}={getattr(args, name)} is not allowed: 1 to 64")
    (trace,) = load_inputs(args, "path")
    link = options.link_gbps
    if link is None and (report := transfer_report(trace)) is not None and report.link is not None:
        link = report.link.gbps
    if args.zerocopy and link is None:
        raise ValueError(f"{args.path}: --zerocopy needs the link's speed and the trace has none: "
                         "give --link-gbps GBPS")
    change = Change(
        gpu_workers=args.gpu_workers, synth_threads=args.synth_threads, lock_scope=args.lock_scope,
        copies_at_link=args.zerocopy, synthesis_speedup=args.synthesis_speedup,
        prep_speedup=args.prep_speedup, compute_speedup=args.compute_speedup,
    )
    try:
        p = WhatIf(trace, WhatIfOptions(link, options.copy_bytes, options.host_cores)).predict(change)
    except ValueError as err:  # the trace cannot be replayed: say which one
        raise ValueError(f"{args.path}: {err}") from None
    print(f"{p.change}: {p.gain:+.1%} throughput, {p.measured_per_min:.1f} -> {p.predicted_per_min:.1f} "
          f"partitions/min (mutex held {p.mutex_held:.0%} in the replay; the unchanged replay is "
          f"{p.replay_error:+.1%} from the measurement)")
    return 0
