"""Output files (trace/output.py and every command that writes): never over what is not an
ordinary file, checked before any work, written whole or not at all, fresh names unique."""

import os
import re
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_store import sample_trace

from workbench.cli import main
from workbench.trace import load, output, store
from workbench.trace.output import OutputError

ROOT = Path(__file__).parent.parent
SEED_LOG = Path(__file__).parent / "data" / "cuzk_seed" / "daemon.log"
SMALL = ["run", "--backend", "cpu", "--log2-constraints", "5", "--partitions", "2", "--no-progress"]


def _one_line_error(capsys, pattern):
    captured = capsys.readouterr()
    err = captured.err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("workbench: error: ") and re.search(pattern, err), err
    assert "workbench run:" not in err + captured.out  # refused before the run began
    return err


@pytest.fixture
def specials(tmp_path):
    """Existing targets that are not ordinary files, each with the reason it is refused."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    kept = tmp_path / "kept.txt"
    kept.write_text("precious")
    link = tmp_path / "link"
    link.symlink_to(kept)
    folder = tmp_path / "folder"
    folder.mkdir()
    found = {fifo: "is a FIFO", sock: "is a socket", link: f"symbolic link to {re.escape(str(kept))}",
             folder: "is a directory"}
    device = tmp_path / "null"
    try:  # a private copy of /dev/null: a defect here must not cost the machine its own
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        found[device] = "is a character device"
    except PermissionError:
        pass
    yield found
    server.close()


def test_no_writer_replaces_a_non_regular_file(specials, tmp_path):
    trace = sample_trace()
    for path, reason in specials.items():
        kind = stat.S_IFMT(os.lstat(path).st_mode)
        for write in (lambda p: store.save(trace, p), lambda p: output.write_text(p, "x"),
                      lambda p: output.write_bytes(p, b"x")):
            with pytest.raises(OutputError, match=rf"{re.escape(str(path))}: .*{reason}"):
                write(path)
            assert stat.S_IFMT(os.lstat(path).st_mode) == kind, path
    assert (tmp_path / "kept.txt").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    with pytest.raises(OutputError, match="/dev/null: is a character device"):
        output.check("/dev/null")


def test_every_command_refuses_a_special_target_before_work(specials, tmp_path, capsys):
    trace_file = store.save(sample_trace(), tmp_path / "t.wbtrace")
    for path, reason in specials.items():
        for argv, flag in (([*SMALL, "--trace", str(path)], "--trace"),
                           ([*SMALL, "--no-trace", "--proofs", str(path)], "--proofs"),
                           ([*SMALL, "--trace", str(tmp_path / "r.wbtrace"), "--chrome", str(path)],
                            "--chrome"),
                           ([*SMALL, "--save-config", str(path)], "--save-config"),
                           (["import", str(SEED_LOG), "-o", str(path)], "-o"),
                           (["export", "chrome", str(trace_file), "-o", str(path)], "-o"),
                           (["report", str(trace_file), "-o", str(path)], "-o")):
            assert main(argv) == 2, argv
            _one_line_error(capsys, rf"{flag} {re.escape(str(path))}: .*{reason}")
    assert not (tmp_path / "r.wbtrace").exists()


def test_run_checks_every_output_before_any_work(tmp_path, capsys):
    a, b = str(tmp_path / "a.wbtrace"), str(tmp_path / "b.json")
    file = tmp_path / "file"
    file.write_text("")
    long_name = str(tmp_path / ("n" * 300 + ".wbtrace"))
    cases = [
        (["--trace", ""], r"--trace is empty"),
        (["--trace", str(tmp_path) + "/"], r"ends with /"),
        (["--trace", str(tmp_path)], r"is a directory"),
        (["--trace", str(tmp_path / "missing" / "a.wbtrace")], r"folder .*missing does not exist"),
        (["--trace", str(file / "a.wbtrace")], r"file is not a directory"),
        (["--trace", long_name], r"file name is 308 bytes, longer than the 255"),
        (["--trace", a, "--chrome", a], rf"--chrome {re.escape(a)}: the same file as --trace"),
        (["--trace", a, "--save-config", a], r"--save-config .*: the same file as --trace"),
        (["--chrome", b, "--proofs", str(tmp_path / "." / "b.json")],
         r"--proofs .*: the same file as --chrome"),
        (["--trace", a, "--save-config", b, "--proofs", b], r"--proofs .*: the same file as --save-config"),
    ]
    for extra, pattern in cases:
        assert main([*SMALL, *extra]) == 2, extra
        _one_line_error(capsys, pattern)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # not even --save-config written


def test_commands_refuse_writing_over_their_input_or_into_nothing(tmp_path, capsys):
    trace_file = store.save(sample_trace(), tmp_path / "t.wbtrace")
    before = trace_file.read_bytes()
    for argv in (["import", str(trace_file), "-o", str(trace_file)],
                 ["export", "chrome", str(trace_file), "-o",
                  str(tmp_path / ".." / tmp_path.name / "t.wbtrace")],
                 ["report", str(trace_file), "-o", str(trace_file)]):
        assert main(argv) == 2, argv
        _one_line_error(capsys, r"-o .*t\.wbtrace: the same file as the input")
    assert trace_file.read_bytes() == before
    for argv in (["import", str(SEED_LOG), "-o", ""], ["export", "cuzk", str(trace_file), "-o", ""],
                 ["report", str(trace_file), "-o", ""]):
        assert main(argv) == 2, argv
        _one_line_error(capsys, r"-o is empty")


def test_a_failed_or_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def fail_halfway(error):
        def fill(handle):
            handle.write(b"half of the new")
            raise error
        return fill

    for error in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(error)):
            output.write(target, fail_halfway(error))
        assert target.read_text() == "old" and sorted(tmp_path.iterdir()) == [target]
    # A second Ctrl-C while the temporary file is being removed: removed all the same.
    real_unlink = Path.unlink
    calls = []

    def unlink_interrupted_once(self, missing_ok=False):
        calls.append(self)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink_interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        output.write(target, fail_halfway(KeyboardInterrupt()))
    monkeypatch.undo()
    assert len(calls) == 2 and target.read_text() == "old" and sorted(tmp_path.iterdir()) == [target]


def test_a_full_disk_leaves_the_old_file_whole(tmp_path):
    """The file size limit makes writes fail past 64 KiB as a full disk does."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    script = (
        "import resource, signal, sys\n"
        "from workbench.trace import output\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    output.write_bytes(sys.argv[1], b'x' * 1_000_000)\n"
        "except OSError as err:\n"
        "    print(err)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "cannot write (File too large); nothing written" in done.stdout and str(target) in done.stdout
    assert target.read_bytes() == b"old" and sorted(tmp_path.iterdir()) == [target]


def test_fresh_names_never_overwrite_one_another(tmp_path):
    trace = sample_trace()
    first = tmp_path / "run.wbtrace"
    written = []
    barrier = threading.Barrier(8)

    def save():
        barrier.wait()
        written.append(store.save(trace, first, fresh=True))

    threads = [threading.Thread(target=save) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {first, *(tmp_path / f"run-{n}.wbtrace" for n in range(2, 9))}
    assert set(written) == expected and set(tmp_path.iterdir()) == expected
    assert all(len(load(path).spans) == len(trace.spans) for path in expected)
    assert len({output.fresh_run_path() for _ in range(100)}) == 100


def test_runs_started_at_once_each_keep_their_trace(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "workbench.cli", *SMALL], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    said = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        said += [line.removeprefix("trace: ") for line in out.splitlines() if line.startswith("trace: ")]
    files = sorted((tmp_path / "runs").iterdir())
    assert len(files) == 4 and sorted(tmp_path / name for name in said) == files
    assert all(load(path).meta["outcome"] == "completed" for path in files)


def test_fresh_names_without_hard_links_still_never_overwrite(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    first = tmp_path / "run.wbtrace"
    first.write_text("an earlier run")
    assert output.write_text(first, "x") == first  # an explicit name is replaced, as asked
    first.write_text("an earlier run")
    assert output.write(first, lambda h: h.write(b"new"), fresh=True) == tmp_path / "run-2.wbtrace"
    assert first.read_text() == "an earlier run" and (tmp_path / "run-2.wbtrace").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-2.wbtrace", "run.wbtrace"]


def test_a_killed_writers_temporary_is_removed_by_the_next_write_and_a_live_ones_kept(tmp_path):
    target = tmp_path / "run.wbtrace"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a process id that names no process now
    stale = tmp_path / f".run.wbtrace.{dead.pid}-abc123.tmp"
    live = tmp_path / f".run.wbtrace.{os.getppid()}-def456.tmp"
    other = tmp_path / f".other.wbtrace.{dead.pid}-abc123.tmp"
    for path in (stale, live, other):
        path.write_bytes(b"half a trace")
    output.write_bytes(target, b"whole")
    assert target.read_bytes() == b"whole"
    assert not stale.exists() and live.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, live.name, other.name])
