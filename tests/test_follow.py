"""`workbench follow`: a cuzk log read while a writer appends to it (in chunks that split lines),
rotated, truncated, restarted, or piped in, gives the trace the batch import makes of the same
bytes; a stop by signal keeps what was read; hostile input stays bounded and is said in a line.

The logs are the seed daemon log (tests/data/cuzk_seed, see its expected.json) and logs that
tests/cuzk_writer.py writes from the daemon's own format strings.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from cuzk_writer import CallSpec, production_log

from workbench.cli import main
from workbench.follow import FollowSession
from workbench.importers import load_cuzk_log
from workbench.importers.cuzk_follow import MAX_LINE, OVERLONG, CuzkFollower
from workbench.importers.log_tail import FileTail
from workbench.model import tracks as tr
from workbench.render.follow_text import gantt_rows
from workbench.trace import journal_read, store

SEED = Path(__file__).parent / "data" / "cuzk_seed" / "daemon.log"
ROOT = Path(__file__).parent.parent
HELD = re.compile(rb"CUZK_TIMING: mutex_held_ms=(\d+)")


def _production(seed: int, n: int = 12, pid: int = 2231, timeline: bool = True) -> bytes:
    rng = random.Random(seed)
    calls = [CallSpec(ntt_msm_h=2500 + rng.randrange(5000), prep_msm=1400 + rng.randrange(2500))
             for _ in range(n)]
    text = production_log(calls, seed=seed, timeline_lines=timeline).text
    return text.replace("cuzk[2231]:", f"cuzk[{pid}]:").encode()


def _chunks(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, at = [], 0
    while at < len(data):
        step = rng.randint(1, 4000)
        out.append(data[at:at + step])
        at += step
    return out


def _session(path: Path) -> FollowSession:
    tail = FileTail(path, sleep=lambda s: time.sleep(0.002))
    return FollowSession(tail, str(path), judge=lambda t: "judged")


def _follow(path: Path, write) -> FollowSession:
    """Follow `path` while `write()` runs on a thread; then read what is left."""
    path.touch()
    session = _session(path)
    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive():
        session.step(0.002)
    writer.join()
    for _ in range(5):  # whatever came last, and one more look at the path
        session.step(0.002)
    return session


def _append(path: Path, chunks: list[bytes], pause: float = 0.0005) -> None:
    with open(path, "ab") as f:
        for chunk in chunks:
            f.write(chunk)
            f.flush()
            time.sleep(pause)


def _same(followed, batch) -> None:
    assert list(followed.iter_spans()) == list(batch.iter_spans())
    assert list(followed.iter_instants()) == list(batch.iter_instants())
    assert {**followed.meta["import"], "source": ""} == {**batch.meta["import"], "source": ""}
    assert followed.config == batch.config


def _row(s) -> tuple:
    return (s.track, s.name, s.start_ns, s.end_ns, s.partition, s.worker, s.attrs)


def _holds(trace) -> list[int]:
    return sorted(s.end_ns - s.start_ns for s in trace.iter_spans()
                  if s.name == "hold" and s.track.startswith("mutex"))


@pytest.mark.parametrize("source", ["seed", "chained"])
def test_a_log_appended_in_chunks_that_split_lines_gives_the_batch_import(tmp_path, source):
    data = SEED.read_bytes() if source == "seed" else _production(1, timeline=False)
    path = tmp_path / "daemon.log"
    session = _follow(path, lambda: _append(path, _chunks(data, 7)))
    followed = session.finish()
    whole = tmp_path / "whole.log"
    whole.write_bytes(data)
    _same(followed, load_cuzk_log(whole))
    # Counted from the bytes themselves: one hold per mutex_held_ms line, of that length.
    assert _holds(followed) == sorted(int(ms) * 1_000_000 for ms in HELD.findall(data))
    # The live recorder showed every span once; the settled one holds complete calls only, each
    # span as the final trace has it.
    assert len({r[:6] for r in session.live.spans}) == len(session.live.spans) >= len(followed.spans)
    assert 0 < len(session.settled.spans) < len(followed.spans)
    final = {repr(_row(s)) for s in followed.iter_spans()}
    assert all(repr(row) in final for row in session.settled.spans)


def test_a_rotation_and_a_truncation_mid_way_read_the_new_file_from_its_start(tmp_path):
    data = _production(2, n=18)
    lines = data.splitlines(keepends=True)
    a, b, c = (b"".join(lines[i:j]) for i, j in ((0, 200), (200, 420), (420, len(lines))))
    path = tmp_path / "daemon.log"
    path.touch()
    session = _session(path)

    def reads(upto: int) -> None:
        while session.tail.position < upto:
            session.step(0.002)

    _append(path, _chunks(a, 1), 0)
    reads(len(a))
    path.rename(tmp_path / "daemon.log.1")  # rotated away; the daemon goes on in a new file
    _append(path, _chunks(b, 2)[:1], 0)
    for _ in range(3):
        session.step(0.002)
    _append(path, _chunks(b, 2)[1:], 0)
    reads(len(b))
    with open(path, "r+b") as f:  # copy and truncate
        f.truncate(0)
    _append(path, _chunks(c, 3)[:1], 0)  # the file is shorter than what was read: seen
    for _ in range(3):
        session.step(0.002)
    _append(path, _chunks(c, 3)[1:], 0)
    reads(len(c))
    followed = session.finish()
    whole = tmp_path / "whole.log"
    whole.write_bytes(a + b + c)
    _same(followed, load_cuzk_log(whole))
    assert followed.meta["follow"]["files"] == 3
    notes = followed.meta["follow"]["notes"]
    assert "rotated" in notes[0] and "truncated" in notes[1]


@pytest.mark.parametrize("pid", [4242, 2231], ids=["new process", "clock back"])
def test_a_daemon_restart_is_a_new_segment_after_the_first(tmp_path, pid):
    first, second = _production(3, n=8), _production(4, n=6, pid=pid)
    first = first[:first.rindex(b"CUZK_TIMING: mutex_held_ms")]  # killed inside a call
    first = first[:first.rindex(b"\n") + 1]
    path = tmp_path / "daemon.log"
    followed = _follow(path, lambda: _append(path, _chunks(first + second, 5))).finish()
    whole = tmp_path / "whole.log"
    whole.write_bytes(first + second)
    _same(followed, load_cuzk_log(whole))
    segments = followed.meta["import"]["segments"]
    assert len(segments) == 2
    said = "cuzk[4242] began after cuzk[2231]" if pid != 2231 else "the TIMELINE clock went back"
    assert said in segments[1]["restart"]
    restart = [i for i in followed.iter_instants() if i.name == "restart"]
    lines_before = first.count(b"\n")
    first_kept = next(n for n, line in enumerate(second.splitlines(), 1)
                      if b"CUZK_" in line or b"TIMELINE," in line or b"_TIMING " in line)
    assert [i.attrs["line"] for i in restart] == [lines_before + first_kept]
    # The second process's partitions come after the first's, in time and in number.
    own = load_cuzk_log(_write(tmp_path / "second.log", second))
    n_first = len({s.partition for s in load_cuzk_log(_write(tmp_path / "first.log", first)).iter_spans()})
    later = [s for s in followed.iter_spans() if s.partition >= n_first]
    earlier = [s for s in followed.iter_spans() if s.partition < n_first]
    assert min(s.start_ns for s in later) >= max(s.end_ns for s in earlier) == restart[0].ts_ns
    assert sorted((s.name, s.end_ns - s.start_ns) for s in later) == sorted(
        (s.name, s.end_ns - s.start_ns) for s in own.iter_spans())
    holds = sorted((s.start_ns, s.end_ns) for s in followed.iter_spans() if s.track == tr.mutex_track(0)
                   and s.name == "hold")
    assert all(e <= s2 for (_, e), (s2, _) in itertools.pairwise(holds))
    assert len(holds) == len(HELD.findall(first + second)) + 1  # the cut call's hold, from tail_msm


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_from_the_end_reads_only_what_comes_after(tmp_path):
    data = SEED.read_bytes()
    cut = data.index(b"\n", len(data) // 3) + 20  # a line half written when following begins
    path = _write(tmp_path / "daemon.log", data[:cut])
    session = FollowSession(FileTail(path, from_start=False), str(path), judge=lambda t: "")
    _append(path, _chunks(data[cut:], 4), 0)
    while session.tail.position < len(data) - cut:
        session.step(0.002)
    followed = session.finish()
    after = data[data.index(b"\n", cut) + 1:]  # from the first whole line written after
    _same(followed, load_cuzk_log(_write(tmp_path / "after.log", after)))
    assert "reading began inside a line: its end was left out" in followed.meta["follow"]["notes"]


def test_binary_garbage_and_a_50_mb_line_stay_bounded_and_are_said(tmp_path):
    follower = CuzkFollower("hostile.log")
    garbage = random.Random(0).randbytes(200_000)
    block = b"\x00\xffA" * (1 << 18)  # 768 KiB, no newline
    tracemalloc.start()
    follower.feed(garbage)
    for _ in range(65):  # 50 MB without a newline
        follower.feed(block)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    follower.feed(b"\n" + SEED.read_bytes())
    follower.stop()
    assert peak < 3 * MAX_LINE, peak
    report = follower.trace().meta["import"]
    assert report["skipped"][OVERLONG] >= 1
    assert any(OVERLONG in note for note in follower.notes)
    assert _holds(follower.trace()) == _holds(load_cuzk_log(SEED))


def _cli(*args: str, **options):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "workbench.cli", "follow", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)


def test_stdin_is_followed_to_its_end(tmp_path, monkeypatch, capsys):
    data = SEED.read_bytes()
    read_end, write_end = os.pipe()
    stdin = os.fdopen(read_end, "rb")
    monkeypatch.setattr(sys, "stdin", stdin)

    def write() -> None:
        with os.fdopen(write_end, "wb") as pipe:
            for chunk in _chunks(data, 9):
                pipe.write(chunk)
                pipe.flush()

    writer = threading.Thread(target=write)
    writer.start()
    with stdin:
        code = main(["follow", "-", "--trace", str(tmp_path / "t.wbtrace")])
    writer.join()
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines()[-1] == f"trace: {tmp_path / 't.wbtrace'}"
    _same(store.load(tmp_path / "t.wbtrace"), load_cuzk_log(SEED))


def _growing(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    data = SEED.read_bytes()
    path = tmp_path / "daemon.log"
    half = data[:data.index(b"\n", len(data) // 2) + 1]
    path.write_bytes(half)
    return path, data, half


def _saved_is_what_was_read(tmp_path: Path, data: bytes, half: bytes) -> None:
    saved = store.load(tmp_path / "t.wbtrace")
    read = saved.meta["import"]["read"]
    upto = b"".join(data.splitlines(keepends=True)[:read])
    assert len(upto) >= len(half) and saved.meta["outcome"] == "interrupted"
    _same(saved, load_cuzk_log(_write(tmp_path / "read.log", upto)))
    assert not list(tmp_path.glob("*.wbjournal"))


def test_sigterm_saves_what_was_read(tmp_path):
    path, data, half = _growing(tmp_path)
    proc = _cli(str(path), "--trace", str(tmp_path / "t.wbtrace"), cwd=tmp_path)
    assert proc.stdout is not None
    assert b"lines read" in proc.stdout.readline()  # the view's first line: the file was read
    with open(path, "ab") as f:
        f.write(data[len(half):len(half) + 999])  # a cut line, still being written
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and b"interrupted by SIGTERM; saving the trace of what was read" in err
    _saved_is_what_was_read(tmp_path, data, half)


def test_ctrl_c_saves_what_was_read(tmp_path, capsys):
    path, data, half = _growing(tmp_path)

    def press() -> None:
        while not (tmp_path / "t.wbtrace.wbjournal").exists():
            time.sleep(0.01)
        _append(path, [data[len(half):len(half) + 999]])
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press)
    presser.start()
    code = main(["follow", str(path), "--trace", str(tmp_path / "t.wbtrace")])
    presser.join()
    err = capsys.readouterr().err
    assert code == 130 and "interrupted; saving the trace of what was read" in err
    _saved_is_what_was_read(tmp_path, data, half)


def test_sigkill_leaves_a_journal_of_settled_calls(tmp_path):
    path = _write(tmp_path / "daemon.log", SEED.read_bytes())
    proc = _cli(str(path), "--trace", str(tmp_path / "t.wbtrace"), cwd=tmp_path)
    journal = tmp_path / "t.wbtrace.wbjournal"
    deadline = time.monotonic() + 30
    while not (journal.exists() and journal.stat().st_size > 4096) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.communicate(timeout=30)
    recovered, recovery = journal_read.read(journal)
    batch = {repr(_row(s)) for s in load_cuzk_log(SEED).iter_spans()}
    assert recovery.spans > 0 and not recovery.damaged
    assert all(repr(_row(s)) in batch for s in recovered.iter_spans())  # settled calls, as imported


def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    garbage = _write(tmp_path / "garbage.log", random.Random(1).randbytes(30_000))
    lines = len(re.findall(rb"\r\n|\r|\n", garbage.read_bytes()))  # ended lines: the last one is not
    assert main(["follow", str(garbage), "--until-idle", "0.2", "--trace", "g.wbtrace"]) == 2
    err = capsys.readouterr().err
    said = f"workbench: error: {garbage}: no CUZK_TIMING, CUZK_NTT_H or TIMELINE lines found in {lines} lines"
    assert err.startswith(said) and len(err.splitlines()) == 1
    assert not (tmp_path / "g.wbtrace").exists() and not list(tmp_path.rglob("*.wbjournal"))
    for args, said in ((["missing.log"], "missing.log: cannot follow it (No such file or directory)"),
                       ([".", "--trace", "x.wbtrace"], ".: cannot follow it (Is a directory)"),
                       ([str(garbage), "--trace", "."], "--trace .: is a directory"),
                       ([str(garbage), "--until-idle", "-1"], "--until-idle=-1.0 is not allowed")):
        assert main(["follow", *args]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and said in err, err


def test_the_text_gantt_marks_holds_waits_and_barrier_waits():
    trace = load_cuzk_log(SEED)
    rows = gantt_rows(trace, columns=40, window_s=1e9)
    mutex = next(r for r in rows if r.startswith(tr.mutex_track(0)))
    marks = mutex.split("|")[1]
    # The mutex is held 98% of the seed run (its expected verdict): nearly every column holds it.
    assert marks.count("#") >= 36
    waits = next(r for r in rows if r.startswith(f"{tr.mutex_track(0)} waits")).split("|")[1]
    # Each of the two workers waits for it 44% of its time: someone waits most of the run.
    assert waits.count("-") >= 20 and set(waits) <= {"-", "."}
    barriers = [r for r in rows if r.startswith("barrier")]
    assert barriers and all(set(r.split("|")[1]) <= {"=", "."} for r in barriers)
