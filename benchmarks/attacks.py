"""Issue 15's hostile cases, run as a user would run them, each classified.

    python benchmarks/attacks.py [--quick] [--jobs 2] [--list] [--only WORD]

Builds the catalogue (attack_cases.py: crafted .wbtrace headers and columns, gzip bombs,
recursive SQLite views, the quadratic cuzk input, special files, output paths that are
devices, FIFOs, directories, read-only, too long, empty, full, or given twice, extreme
what-if and run options) under a temporary folder, runs every case x the commands it applies
to as a subprocess with a timeout (the worktree's code, `python -m workbench.cli`), and
classifies each result:

- clean: what the case expects, and a refusal is exit 2 with one line (argparse's usage
  line aside) and no traceback;
- traceback: a Python traceback or the CLI's "internal error" line (a defect either way);
- hang: killed at the timeout;
- wrong rc: any other exit code, or a refusal where acceptance was expected;
- data lost: a file that must not change (an input, an existing output, a device) changed,
  or a temporary file was left beside an output;
- garbage: accepted where a refusal was expected, or output with negative times, shares
  above 100%, NaN, or raw terminal control characters.

Prints a table of the counts and every case that is not clean. Exit 1 when any is not.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from attack_cases import (
    CUZK,
    NSYS,
    ROOT,
    RUN_TRACE,
    TINY_RUN,
    Case,
    chrome_inputs,
    cuzk_inputs,
    nsys_inputs,
    private_device,
    special_inputs,
    wbtrace_inputs,
)

VERDICTS = ("clean", "traceback", "hang", "wrong rc", "data lost", "garbage")
# Commands an input goes through; {in} the input, {out} an output file beside the others.
INPUT_COMMANDS = {
    "summary": ["summary", "{in}"],
    "diagnose": ["diagnose", "{in}"],
    "export chrome": ["export", "chrome", "{in}", "-o", "{out}.json"],
    "export cuzk": ["export", "cuzk", "{in}", "-o", "{out}.log"],
    "report": ["report", "{in}", "-o", "{out}.html"],
    "import": ["import", "{in}", "-o", "{out}.wbtrace"],
    "whatif": ["whatif", "{in}", "--gpu-workers", "3"],
    "diff": ["diff", "{in}", str(RUN_TRACE)],
}
QUICK_COMMANDS = ("summary", "diagnose", "export chrome")
# Crafted traces that a loader may read (the damage is not to the format): either outcome.
READABLE = {"partition values extreme", "counter values nan and inf", "escapes in names", "events empty",
            "kernel times swapped", "kernel columns of text", "kernel table dropped",
            "kernel times near 2^63", "names in a string of 10 MB", "named x#y", "named a%41",
            "named with ?mode=rwc", "one event of 20 MB", "negative durations", "two gzip members", "CRLF",
            "Latin-1 bytes", "lines reversed",
            "TIMELINE lines only", "escapes in job names", "NUL bytes", "a million blank lines, then the log",
            "dense 8 MB log (was quadratic)", "a name starting with -", "figures of 25 digits",
            "negative figures", "offsets near 2^63", "ts NaN", "nested in an event", "not UTF-8",
            "a page zeroed", "times near 2^63", "times of the wrong type", "every table emptied",
            "a table declaring 2^40 pages", "recursive view named like a CUPTI table",
            "/proc/self/status (size 0, not empty)", "numbers of 400 digits"}


def input_cases(work: Path, quick: bool) -> list[Case]:
    from cuzk_import import log_of

    groups = {"wbtrace": wbtrace_inputs, "chrome": chrome_inputs, "nsys": nsys_inputs,
              "cuzk": lambda w: cuzk_inputs(w, log_of(8, dense=True)), "special": special_inputs}
    cases = []
    for group, build in groups.items():
        folder = work / group
        folder.mkdir()
        inputs = build(folder)
        for name, path in inputs.items():
            commands = QUICK_COMMANDS if quick else tuple(INPUT_COMMANDS)
            for command in commands:
                out = folder / f"out{len(cases)}"  # a folder of its own: cases run at once
                out.mkdir()
                argv = [a.replace("{in}", str(path)).replace("{out}", str(out / command.replace(" ", "_")))
                        for a in INPUT_COMMANDS[command]]
                mine = path.is_file() and path.is_relative_to(work)  # not /proc/self/status
                expect = "either" if name in READABLE else "refuse"
                cases.append(Case(group, f"{name} | {command}", argv, expect, [path] if mine else [],
                                  [out], timeout=120 if "dense" in name else 60,
                                  check={"summary": "summary", "diagnose": "text"}.get(command, "")))
    # A pipe of a log (process substitution): read once, every span kept (same summary as the file).
    for command in ("summary", "import"):
        argv = [a.replace("{in}", "<(cat " + str(CUZK) + ")").replace("{out}", str(work / "piped"))
                for a in INPUT_COMMANDS[command]]
        cases.append(Case("special", f"process substitution | {command}", argv, "accept", shell=True))
    return cases


def output_cases(work: Path, quick: bool) -> list[Case]:
    folder = work / "outputs"
    folder.mkdir()
    precious = folder / "precious.txt"
    precious.write_text("an existing file that a refused output must leave whole\n")
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    link = folder / "link"
    link.symlink_to(precious)
    dangling = folder / "dangling"
    dangling.symlink_to(folder / "nowhere")
    readonly = folder / "readonly"
    readonly.mkdir(mode=0o500)
    bad = {"a FIFO": fifo, "a directory": folder, "/proc (read-only file system)": Path("/proc/wb-out"),
           "a missing folder": folder / "missing" / "x", "a name of 300 characters": folder / ("n" * 300),
           "empty": Path(""), "a symbolic link to a file": link, "a dangling symbolic link": dangling,
           "a folder's path ending in /": Path(str(folder) + "/")}
    device = private_device(folder)
    if device is not None:
        bad["a character device"] = device
    if os.geteuid() != 0:  # root writes there anyway
        bad["a read-only folder"] = readonly / "x"
    flags = {
        "run --trace": [*TINY_RUN, "--trace", "{p}"],
        "run --chrome": [*TINY_RUN, "--trace", str(folder / "ok.wbtrace"), "--chrome", "{p}"],
        "run --save-config": [*TINY_RUN, "--no-trace", "--save-config", "{p}"],
        "run --proofs": [*TINY_RUN, "--no-trace", "--proofs", "{p}"],
        "import -o": ["import", str(CUZK), "-o", "{p}"],
        "export chrome -o": ["export", "chrome", str(NSYS), "-o", "{p}"],
        "export cuzk -o": ["export", "cuzk", str(RUN_TRACE), "-o", "{p}"],
        "report -o": ["report", str(RUN_TRACE), "-o", "{p}"],
    }
    if quick:
        flags = {k: flags[k] for k in ("run --trace", "import -o", "export chrome -o")}
    keep = [precious, *([device] if device else [])]
    cases = []
    for what, path in bad.items():
        for flag, argv in flags.items():
            cases.append(Case("outputs", f"{flag} to {what}", [a.replace("{p}", str(path)) for a in argv],
                              "refuse", keep, [folder]))
    full = _full_disk(work, [_old_name(flag) for flag in flags])
    if full is not None:
        for flag, argv in flags.items():
            target = full / _old_name(flag)
            cases.append(Case("outputs", f"{flag} to a full disk, over an old file",
                              [a.replace("{p}", str(target)) for a in argv], "refuse", [target], [full]))
    twice = folder / "twice"
    twice.write_text("kept\n")
    same = {
        "run --trace X --chrome X": [*TINY_RUN, "--trace", str(twice), "--chrome", str(twice)],
        "run --trace X --save-config X": [*TINY_RUN, "--trace", str(twice), "--save-config", str(twice)],
        "run --chrome X --proofs X": [*TINY_RUN, "--trace", str(folder / "t.wbtrace"), "--chrome", str(twice),
                                      "--proofs", str(twice)],
        "run --trace ''": [*TINY_RUN, "--trace", ""],
        "export -o the input": ["export", "chrome", str(folder / "input.wbtrace"), "-o",
                                str(folder / "input.wbtrace")],
        "import -o the input": ["import", str(folder / "input.wbtrace"), "-o", str(folder / "input.wbtrace")],
        "report -o the input": ["report", str(folder / "input.wbtrace"), "-o", str(folder / "input.wbtrace")],
    }
    (folder / "input.wbtrace").write_bytes(RUN_TRACE.read_bytes())
    for name, argv in same.items():
        cases.append(Case("outputs", name, argv, "refuse", [twice, folder / "input.wbtrace"], [folder]))
    return cases


def _old_name(flag: str) -> str:
    return "old-" + "".join(c if c.isalnum() else "_" for c in flag)


def _full_disk(work: Path, olds: list[str]) -> Path | None:
    """A 256 KiB tmpfs holding the old files, full: where root may mount one. None elsewhere."""
    mount = work / "full"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        return None
    for name in olds:
        (mount / name).write_text("the old file, to be kept whole\n")
    free = os.statvfs(mount)
    (mount / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize))  # no block left
    return mount


def option_cases(work: Path, quick: bool) -> list[Case]:
    whatif = {
        "--synthesis-speedup 1e-300": ["--synthesis-speedup", "1e-300"],
        "--synthesis-speedup 1e300": ["--synthesis-speedup", "1e300"],
        "--synthesis-speedup 0": ["--synthesis-speedup", "0"], "--prep-speedup -1": ["--prep-speedup", "-1"],
        "--compute-speedup nan": ["--compute-speedup", "nan"],
        "--compute-speedup inf": ["--compute-speedup", "inf"],
        "--gpu-workers 0": ["--gpu-workers", "0"], "--gpu-workers 1000000": ["--gpu-workers", "1000000"],
        "--synth-threads -1": ["--synth-threads", "-1"], "--synth-threads 100000": ["--synth-threads",
                                                                                    "100000"],
        "--link-gbps 0": ["--zerocopy", "--link-gbps", "0"], "--link-gbps 1e-300": ["--zerocopy",
                                                                                    "--link-gbps",
                                                                                  "1e-300"],
        "--link-gbps nan": ["--link-gbps", "nan"], "--copy-bytes 1e300": ["--copy-bytes", "1e300"],
        "--host-cores 0": ["--host-cores", "0"], "--host-cores nan": ["--host-cores", "nan"],
        "--zerocopy without a link speed": ["--zerocopy"],
    }
    run = {
        "--inject-fault nophase:1": ["--inject-fault", "nophase:1"],
        "--inject-fault :1": ["--inject-fault", ":1"],
        "--inject-fault batch_add:-1": ["--inject-fault", "batch_add:-1"],
        "--host-load-threads 256": ["--host-load-threads", "256"],
        "--host-load-threads 100000": ["--host-load-threads", "100000"],
        "--host-load-threads -1": ["--host-load-threads", "-1"], "--partitions 0": ["--partitions", "0"],
        "--partitions -1": ["--partitions", "-1"], "--log2-constraints 60": ["--log2-constraints", "60"],
        "--log2-constraints -1": ["--log2-constraints", "-1"], "--gpus 0": ["--gpus", "0"],
        "--gpus 100000": ["--gpus", "100000"], "--gpu-workers 100000": ["--gpu-workers", "100000"],
        "--synth-threads 0": ["--synth-threads", "0"], "--sample-interval-ms 0": ["--sample-interval-ms",
                                                                                  "0"],
        "--synth-lookahead -1": ["--synth-lookahead", "-1"], "--bool-fraction nan": ["--bool-fraction",
                                                                                     "nan"],
        "--bool-fraction 2": ["--bool-fraction", "2"], "--seed -1": ["--seed", "-1"],
        "--config /dev/zero": ["--config", "/dev/zero"], "--config of bad JSON": ["--config",
                                                                                  str(_bad_config(work))],
        "--config nested deep": ["--config", str(_deep_config(work))],
        "--memory-mode other": ["--memory-mode", "other"],
    }
    analysis = {
        "diagnose --roles /dev/zero": ["diagnose", str(RUN_TRACE), "--roles", "/dev/zero"],
        "diagnose --roles of a bad regex": ["diagnose", str(RUN_TRACE), "--roles", str(_bad_roles(work))],
        "report --max-bars 10": ["report", str(RUN_TRACE), "-o", str(work / "r.html"), "--max-bars", "10"],
        "report --title of escapes": ["report", str(RUN_TRACE), "-o", str(work / "t.html"), "--title",
                                      "\x1b[2J"],
        "diff of a trace with itself": ["diff", str(RUN_TRACE), str(RUN_TRACE)],
        "lab --ip 0.0.0.0 --dry-run": ["lab", "--ip", "0.0.0.0", "--dry-run"],
    }
    accepted = {"--synthesis-speedup 1e-300": "refuse", "--seed -1": "either", "diff of a trace with itself":
                "accept", "lab --ip 0.0.0.0 --dry-run": "either", "--link-gbps nan": "refuse",
                "report --title of escapes": "accept", "--host-load-threads 256": "either"}
    cases = []
    for name, extra in whatif.items():
        cases.append(Case("options", f"whatif {name}", ["whatif", str(RUN_TRACE), *extra],
                          accepted.get(name, "either"), check="summary"))
    for name, extra in run.items():
        cases.append(Case("options", f"run {name}", [*TINY_RUN, "--no-trace", *extra], accepted.get(name,
                                                                                                    "refuse"),
                          timeout=90))
    for name, argv in analysis.items():
        cases.append(Case("options", name, argv, accepted.get(name, "refuse")))
    # A reader that goes away: `| head -1` must give no BrokenPipe traceback.
    for command in ("summary", "diagnose", "export chrome"):
        argv = " ".join(INPUT_COMMANDS[command]).replace("{in}", str(NSYS)).replace(" -o {out}.json", "")
        cases.append(Case("options", f"{command} | head -1", [argv + " | head -1"], "either", shell=True))
    return cases[: 12] if quick else cases


def _bad_config(work: Path) -> Path:
    path = work / "bad.json"
    path.write_text('{"partitions": 2,')
    return path


def _deep_config(work: Path) -> Path:
    path = work / "deep.json"
    path.write_text('{"partitions": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return path


def _bad_roles(work: Path) -> Path:
    path = work / "roles.toml"
    path.write_text('[[role]]\nrole = "kernel"\nname = "(unclosed"\n')
    return path


# -- running and judging -------------------------------------------------------------------------

def _fingerprint(path: Path) -> str:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if os.path.islink(path):
        return f"link {os.readlink(path)}"
    if not os.path.isfile(path):
        return f"mode {info.st_mode:o} rdev {info.st_rdev}"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _temporaries(folders: list[Path]) -> set[Path]:
    found = set()
    for folder in folders:
        if folder.is_dir():
            found |= {p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")}
    return found


GARBAGE = (
    (re.compile(r"(?<![\w.\-/])-\d+(?:\.\d+)?(?= |$| ms| s|%)", re.M), "a negative figure"),
    (re.compile(r"\b(?:[1-9]\d{3,}|[2-9]\d\d|1\d\d\.\d*[1-9]|10[1-9]|1[1-9]\d)(?:\.\d+)?%"),
     "a share above 100%"),
    (re.compile(r"\b(?:nan|NaN|inf)\b"), "NaN or inf"),
)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def _checks(case: Case) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The summary's figures are all times, counts and shares; a verdict's text holds
    correlations and gains, which may be negative or above 100%: only NaN is wrong there."""
    return GARBAGE if case.check == "summary" else GARBAGE[2:] if case.check == "text" else ()


def judge(case: Case, rc: int | None, out: str, err: str, before: dict[Path, str], temps: set[Path]) -> str:
    if rc is None:
        return "hang"
    if "Traceback (most recent call last)" in err or "internal error" in err:
        return "traceback"
    if any(_fingerprint(p) != fp for p, fp in before.items()) or _temporaries(case.folders) - temps:
        return "data lost"
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith(("usage:", "workbench run:", " "))]
    refused = rc == 2 and len(lines) == 1 and lines[0].startswith("workbench: error: ")
    if rc == 0 and case.expect == "refuse":
        return "garbage"
    if rc == 0 and any(p.search(out) for p, _ in _checks(case)):
        return "garbage"
    if rc == 0 and any(CONTROL.search(text) for text in (out, err)):
        return "garbage"
    if rc == 0 or (refused and case.expect != "accept"):
        return "clean"
    if case.shell and rc == 141 and not err.strip():  # `| head`: the reader went away
        return "clean"
    return "wrong rc"


def run_case(case: Case, env: dict[str, str]) -> tuple[Case, str, str, float]:
    before = {p: _fingerprint(p) for p in case.precious}
    temps = _temporaries(case.folders)
    started = time.monotonic()
    if case.shell:
        line = f"{sys.executable} -m workbench.cli " + " ".join(case.argv)
        command: list[str] = ["bash", "-c", f"set -o pipefail; {line}"]
    else:
        command = [sys.executable, "-m", "workbench.cli", *case.argv]
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=case.timeout,
                              env=env, cwd=env["WB_ATTACK_CWD"], start_new_session=True)
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as stopped:
        rc, out, err = None, str(stopped.stdout or ""), str(stopped.stderr or "")
    verdict = judge(case, rc, out, err, before, temps)
    detail = f"rc {rc}: " + (err.strip().splitlines() or ["(no stderr)"])[-1][:160]
    if verdict == "garbage" and rc == 0:
        found = [what for p, what in _checks(case) if p.search(out)]
        found += ["a raw control character"] if any(CONTROL.search(t) for t in (out, err)) else []
        detail = "accepted" + (f" ({', '.join(found)})" if found else " (a refusal was expected)")
    return case, verdict, detail, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few commands per input (about a minute)")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default: 2)")
    parser.add_argument("--only", default="", help="only cases whose group or name holds this text")
    parser.add_argument("--list", action="store_true", help="list the cases, run none")
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="the checkout whose workbench is attacked (default: this one), e.g. an "
                             "older commit unpacked with git archive")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wb-attacks-") as folder:
        work = Path(folder)
        try:
            return _attack(work, args)
        finally:
            if (work / "full").is_mount():
                subprocess.run(["umount", str(work / "full")], check=False)


def _attack(work: Path, args: argparse.Namespace) -> int:
    built = time.monotonic()
    cases = input_cases(work, args.quick) + output_cases(work, args.quick) + option_cases(work, args.quick)
    cases = [c for c in cases if args.only in c.group or args.only in c.name]
    print(f"{len(cases)} cases built in {time.monotonic() - built:.1f} s", flush=True)
    if args.list:
        for case in cases:
            print(f"{case.group:8} {case.expect:6} {case.name}")
        return 0
    env = {**os.environ, "PYTHONPATH": str(args.code.resolve()), "WB_ATTACK_CWD": str(work),
           "WORKBENCH_CACHE": str(work / "cache")}
    env.pop("WORKBENCH_DEBUG", None)
    started = time.monotonic()
    results = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for n, result in enumerate(pool.map(lambda c: run_case(c, env), cases), start=1):
            results.append(result)
            if n % 50 == 0:
                print(f"  {n}/{len(cases)} run, {time.monotonic() - started:.0f} s", flush=True)
    wall = time.monotonic() - started
    counts = Counter(verdict for _, verdict, _, _ in results)
    groups = sorted({c.group for c in cases})
    print(f"\n{'group':10} {'cases':>6} " + " ".join(f"{v:>10}" for v in VERDICTS))
    for group in [*groups, "all"]:
        mine = [v for c, v, _, _ in results if group in ("all", c.group)]
        tally = Counter(mine)
        print(f"{group:10} {len(mine):6d} " + " ".join(f"{tally[v]:10d}" for v in VERDICTS))
    slowest = max(results, key=lambda r: r[3])
    print(f"\n{len(results)} cases in {wall:.0f} s wall ({args.jobs} at once); slowest {slowest[3]:.1f} s: "
          f"{slowest[0].group} / {slowest[0].name}")
    bad = [(c, v, d) for c, v, d, _ in results if v != "clean"]
    for case, verdict, detail in bad:
        print(f"  {verdict:9} {case.group} / {case.name}: {detail}")
    return 1 if counts["clean"] != len(results) else 0


if __name__ == "__main__":
    sys.exit(main())
