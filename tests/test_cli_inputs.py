"""Every command reads every input through one entry, takes --roles, and never shows a traceback."""

import gzip
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from golden import case

from workbench.cli import EXIT_INTERRUPTED, EXIT_PIPE, main
from workbench.export.chrome import to_chrome_json
from workbench.trace import save

SEED_LOG = Path(__file__).parent / "data" / "cuzk_seed" / "daemon.log"
COMMANDS = {  # argv before and after the input
    "summary": (["summary"], []),
    "report": (["report"], ["--no-verdict"]),
    "export": (["export", "chrome"], []),
    "diagnose": (["diagnose"], ["--no-whatif"]),
    "whatif": (["whatif"], ["--gpu-workers", "2"]),
    "import": (["import"], ["--show-roles"]),
}


def _seed_count(pattern: str) -> int:
    return len(re.findall(pattern, SEED_LOG.read_text()))


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Each malformed input, with what the one line must say about it (a regular expression)."""
    chrome = gzip.compress(to_chrome_json(case("balanced")).encode())
    cut = tmp / "cut.json.gz"
    cut.write_bytes(chrome[: len(chrome) // 2])
    foreign_zip = tmp / "photos.zip"
    with zipfile.ZipFile(foreign_zip, "w") as archive:
        archive.writestr("holiday.txt", "not a trace")
    empty = tmp / "empty.log"
    empty.write_bytes(b"")
    utf16 = tmp / "utf16.json"
    utf16.write_bytes('{"traceEvents": []}'.encode("utf-16"))
    binary = tmp / "image.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    bad_json = tmp / "bad.json"
    bad_json.write_text('{"traceEvents": [\n{"ph": "X", "ts": 1,, "dur": 2}]}')
    folder = tmp / "folder"
    folder.mkdir()
    return {
        "truncated gzip": (cut, r"cut.json.gz: the gzip (data ends early|stream is cut off)"),
        "foreign zip": (foreign_zip, r"photos.zip is not a workbench trace \(no readable header: a zip "
                                     r"archive holding holiday.txt\)"),
        "empty": (empty, "empty.log: the file is empty"),
        "utf-16": (utf16, "utf16.json: UTF-16 text; the workbench reads UTF-8"),
        "binary": (binary, "image.bin: not a format the workbench reads"),
        "bad json": (bad_json, "bad.json: not valid JSON (.* at line 2, column 21)"),
        "directory": (folder, "folder is a directory"),
        "missing": (tmp / "absent.wbtrace", "no file at"),
    }


def _one_line_error(capsys, message: str) -> None:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("workbench: error: ") and re.search(message, err), err


def test_every_bad_input_is_one_line_and_exit_2_from_every_command(tmp_path, capsys):
    bad = _bad_inputs(tmp_path)
    for path, message in bad.values():  # each case through one command ...
        assert main(["diagnose", str(path)]) == 2, path
        _one_line_error(capsys, message)
    path, message = bad["foreign zip"]  # ... and one case through every command
    for before, after in COMMANDS.values():
        assert main([*before, str(path), *after]) == 2, before
        _one_line_error(capsys, message)
    assert main(["diff", str(path), str(SEED_LOG)]) == 2
    _one_line_error(capsys, message)
    nowhere = tmp_path / "no" / "such" / "folder" / "out.json"
    assert main(["export", "chrome", str(SEED_LOG), "-o", str(nowhere)]) == 2
    _one_line_error(capsys, rf"-o {re.escape(str(nowhere))}: folder {re.escape(str(nowhere.parent))} does "
                            "not exist")


def test_every_command_reads_a_foreign_input_and_takes_roles(tmp_path, capsys):
    roles = tmp_path / "roles.toml"
    roles.write_text('[[role]]\nrole = "unit"\nname = "synthesis"\n')
    for name, (before, after) in COMMANDS.items():
        extra = ["-o", str(tmp_path / "r.html")] if name == "report" else []
        assert main([*before, str(SEED_LOG), *after, *extra, "--roles", str(roles)]) == 0, name
        capsys.readouterr()
    assert main(["diff", str(SEED_LOG), str(SEED_LOG), "--no-whatif", "--roles", str(roles)]) == 0
    assert "appeared in B" not in capsys.readouterr().out
    exported = tmp_path / "seed.json"  # the mapping is applied before the command's work
    for argv in ([], ["--roles", str(roles)]):
        assert main(["export", "chrome", str(SEED_LOG), "-o", str(exported), *argv]) == 0
        cats = {e["cat"] for e in json.loads(exported.read_text())["traceEvents"] if e["name"] == "synthesis"}
        assert cats == ({"user_annotation"} if argv else {"cpu_op"})
    nsys = Path(__file__).parent / "data" / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"
    assert main(["summary", str(nsys)]) == 0 and capsys.readouterr().err == ""


def test_show_roles_counts_each_role_and_says_who_assigned_it(tmp_path, capsys):
    assert main(["import", str(SEED_LOG), "--show-roles"]) == 0
    out = capsys.readouterr().out
    holds = _seed_count(r"CUZK_TIMING: mutex_held_ms=")
    synthesised = _seed_count(r"TIMELINE,\d+,SYNTH_END,")
    assert re.search(rf"^  lock_hold +{holds} +holding a lock$", out, re.M), out
    assert re.search(rf"^  producer +{synthesised} ", out, re.M)
    assert re.search(rf"^ +{synthesised} +synth +synthesis +default$", out, re.M)
    roles = tmp_path / "roles.toml"
    roles.write_text('[[role]]\nrole = "unit"\nname = "synthesis"\n')
    written = tmp_path / "seed.wbtrace"
    assert main(["import", str(SEED_LOG), "--show-roles", "--roles", str(roles), "-o", str(written)]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^  unit +{synthesised} ", out, re.M) and "  producer" not in out
    assert re.search(rf"^ +{synthesised} +synth +synthesis +your rule 1$", out, re.M)
    assert re.search(r"^  your rule 1 +unit +name='synthesis'$", out, re.M)
    assert f"trace: {written}" in out and written.exists()


def test_show_roles_of_a_real_nsys_export_matches_its_tables(capsys):
    nsys = Path(__file__).parent / "data" / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"
    with sqlite3.connect(nsys) as db:
        def count(sql: str) -> int:
            return int(db.execute(sql).fetchone()[0])

        kernels = count("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
        h2d = count("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1")
        ioctl = count("SELECT COUNT(*) FROM OSRT_API JOIN StringIds ON StringIds.id = nameId "
                      "WHERE value = 'ioctl'")
        copies = count("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    assert main(["import", str(nsys), "--show-roles"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^  kernel +{kernels:,} +GPU kernel$", out, re.M), out
    assert re.search(rf"^  copy +{copies:,} ", out, re.M)
    assert re.search(rf"^ +{h2d:,} +copies +h2d +default$", out, re.M)
    assert re.search(rf"^ +{ioctl:,} +os_api +ioctl +default$", out, re.M)


def test_a_bad_role_mapping_names_the_file_and_the_rule(tmp_path, capsys):
    roles = tmp_path / "roles.toml"
    roles.write_text('[[role]]\nrole = "unit"\nname = "synthesis"\n[[role]]\nrole = "kernal"\nname = "x"\n')
    for before, after in COMMANDS.values():
        assert main([*before, str(SEED_LOG), *after, "--roles", str(roles)]) == 2
        _one_line_error(capsys, "roles.toml: rule 2: role 'kernal' is not one of kernel, copy, ")
    assert main(["import", str(SEED_LOG)]) == 2
    _one_line_error(capsys, r"import needs -o FILE \(the trace to write\), --show-roles, or both")


def test_help_lists_the_allowed_values(capsys):
    for argv, listed in ((["export", "-h"], "chrome: Chrome trace JSON"),
                         (["whatif", "-h"], "{coarse,compute}"),
                         (["import", "-h"], "Roles: kernel, copy, memset, sync"),
                         (["run", "-h"], "(one of auto, cpu, gpu; default: auto)")):
        with pytest.raises(SystemExit):
            main(argv)
        assert listed in " ".join(capsys.readouterr().out.split()), argv


def test_every_option_of_every_command_says_what_it_does():
    """`whatif`'s flags once had no help at all: its usage listed them and said nothing more."""
    import argparse

    from workbench.cli import build_parser

    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    silent = [f"{name} {' '.join(action.option_strings) or action.dest}"
              for name, parser in commands.choices.items() for action in parser._actions
              if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()]
    assert len(commands.choices) >= 10 and not silent, silent


def _program(*argv: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "workbench.cli", *argv], stderr=subprocess.PIPE,
                            text=True, env=env, **kwargs)


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    path = save(case("balanced"), tmp_path / "t.wbtrace")
    proc = _program("diagnose", str(path), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # like `| head -1` once it has its line: every write now fails
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (EXIT_PIPE, "")


def test_ctrl_c_during_an_import_exits_130_with_one_line(tmp_path):
    fifo = tmp_path / "slow.json"
    os.mkfifo(fifo)
    proc = _program("import", str(fifo), "--show-roles", stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:  # opening the writing end succeeds once the import is reading the file
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "the import never read its input"
            time.sleep(0.02)
    try:
        os.write(writer, b'{"traceEvents": [')
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        os.close(writer)
    assert (proc.returncode, err) == (EXIT_INTERRUPTED, "workbench: interrupted\n")


def test_a_defect_is_one_line_too_and_the_traceback_comes_on_request(monkeypatch, capsys):
    import workbench.analysis.verdict as verdict

    def broken(*args, **kwargs):
        raise RuntimeError("a defect")

    monkeypatch.setattr(verdict, "diagnose", broken)
    assert main(["diagnose", str(SEED_LOG)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("workbench: internal error: RuntimeError: a defect (at test_cli_inputs.py:")
    assert err.count("\n") == 1
    monkeypatch.setenv("WORKBENCH_DEBUG", "1")
    with pytest.raises(RuntimeError, match="a defect"):
        main(["diagnose", str(SEED_LOG)])
