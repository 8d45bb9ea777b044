"""`workbench record` on a C++ program of ours (tests/programs/locks.cpp): two threads on a
std::mutex, a condition-variable barrier and NVTX ranges. Every expected value comes from
what the program prints of itself, never from the recorder's own counts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workbench import cli
from workbench.attach.build import nvtx_include
from workbench.model import roles as rl
from workbench.trace import journal_read, store

PROGRAM = Path(__file__).parent / "programs" / "locks.cpp"
RECURSIVE = Path(__file__).parent / "programs" / "recursive.c"
ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler (g++)")
    exe = tmp_path_factory.mktemp("programs") / "locks"
    include = nvtx_include()
    nvtx = ["-DWB_NVTX", f"-I{include}"] if include else []
    subprocess.run([compiler, "-O1", "-std=c++17", "-pthread", *nvtx, "-o", str(exe), str(PROGRAM), "-ldl"],
                   check=True, timeout=120)
    return exe


@pytest.fixture(scope="module")
def recursive_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler (gcc)")
    exe = tmp_path_factory.mktemp("programs") / "recursive"
    subprocess.run([compiler, "-O1", "-pthread", "-o", str(exe), str(RECURSIVE)], check=True, timeout=120)
    return exe


def record(capfd: pytest.CaptureFixture[str], trace: Path, *argv: str,
           locks: str | None = "all") -> tuple[int, dict[str, str]]:
    """Records with `--locks locks` (None: record's default)."""
    chosen = ["--locks", locks] if locks else []
    code = cli.main(["record", "-o", str(trace), "--no-cuda", *chosen, "--", *argv])
    out = capfd.readouterr().out
    said: dict[str, str] = {}
    for line in out.splitlines():
        for word in line.split():
            if "=" in word:
                key, value = word.split("=", 1)
                said[key] = value
    return code, said


def spans_on(trace, track: str, name: str) -> list[tuple[int, int, dict]]:
    mask = trace.span_mask(track=track, name=name)
    found = [(int(trace.spans.start_ns[i]), int(trace.spans.end_ns[i]), trace.spans.attrs[i] or {})
             for i in np.flatnonzero(mask)]
    return sorted(found, key=lambda s: s[0])


def test_two_threads_a_mutex_a_barrier_and_ranges(program: Path, tmp_path: Path,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    rounds = 15
    code, said = record(capfd, tmp_path / "t.wbtrace", str(program), str(rounds))
    assert code == 0
    trace = store.load(tmp_path / "t.wbtrace")
    gpu, barrier = f"lock/{said['gpu_mutex']}", f"lock/{said['barrier_mutex']}"
    tid = {int(said["tid0"]): "0", int(said["tid1"]): "1"}

    holds = spans_on(trace, gpu, "hold")
    waits = spans_on(trace, gpu, "wait")
    assert len(holds) == len(said["order"]) == int(said["gpu_locks0"]) + int(said["gpu_locks1"]) == 2 * rounds
    assert all(a[1] <= b[0] for a, b in pairwise(holds)), "holds of one lock overlap"
    owners = [tid[h[2]["thread"]] for h in holds]
    assert "".join(owners) == said["order"]
    for before, hold in pairwise(holds):
        expected = before[2]["thread"] if before[2]["thread"] != hold[2]["thread"] else None
        assert hold[2].get("from") == expected
    # a wait only where the lock was not had at once, ending as its hold begins
    starts = {(h[0], h[2]["thread"]) for h in holds}
    assert len(waits) <= len(holds)
    assert all((w[1], w[2]["thread"]) in starts and w[1] > w[0] for w in waits)

    calls, cond_waits = int(said["barrier_calls"]), int(said["cond_waits"])
    barrier_holds = spans_on(trace, barrier, "hold")
    assert len(spans_on(trace, barrier, "wait")) <= calls
    assert len(barrier_holds) == calls + cond_waits  # a condition wait ends one hold and starts another
    assert all(a[1] <= b[0] for a, b in pairwise(barrier_holds))
    conds = [trace.span(int(i)) for i in np.flatnonzero(trace.span_mask(name="pthread_cond_wait"))]
    assert len(conds) == cond_waits and all(c.attrs["mutex"] == barrier for c in conds)

    codes = rl.span_roles(trace)
    counts = rl.role_counts(trace, codes)
    assert counts["lock_hold"] == 2 * rounds + calls + cond_waits and counts["cond_wait"] == cond_waits
    if said.get("nvtx") == "1":
        for t in tid:
            rounds_of = spans_on(trace, f"thread/{t}", "round")
            work = spans_on(trace, f"thread/{t}", "work")
            assert len(rounds_of) == len(work) == rounds
            mine = [h for h in holds if h[2]["thread"] == t]
            for w, r, h in zip(work, rounds_of, mine, strict=True):  # nested: round > hold > work
                assert r[0] <= h[0] <= w[0] <= w[1] <= h[1] <= r[1]
                assert w[2]["depth"] == r[2]["depth"] + 1
        rules = rl.trace_rules(trace)
        assert rl.lock_identity(gpu, "hold", rules) == "gpu0 mutex"
        assert trace.meta["record"]["features"] == ["locks", "nvtx"]

    from workbench.analysis.lock_waits import lock_waits
    from workbench.analysis.verdict import diagnose

    waited = lock_waits(trace)
    assert waited is not None and {g.key for g in waited.locks} >= {"pthread_cond_wait"}
    verdict = diagnose(trace)
    assert "imported from workbench record" in verdict.notes


def test_contended_locks_by_default_complete_and_uncontended_ones_left_out(
        program: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    rounds = 8
    code, said = record(capfd, tmp_path / "t.wbtrace", str(program), str(rounds), "handoff", locks=None)
    assert code == 0
    trace = store.load(tmp_path / "t.wbtrace")
    gpu, quiet = f"lock/{said['gpu_mutex']}", f"lock/{said['quiet_mutex']}"
    tid0, tid1 = int(said["tid0"]), int(said["tid1"])
    holds, waits = spans_on(trace, gpu, "hold"), spans_on(trace, gpu, "wait")
    # Every round thread 1 slept in its lock call while thread 0 held the mutex: each of those
    # waits is there, and so is every hold, the first one (taken before anybody waited) too.
    assert int(said["contended"]) == rounds
    assert len(waits) == rounds and all(w[2]["thread"] == tid1 and w[1] > w[0] for w in waits)
    assert len(holds) == int(said["gpu_locks0"]) + int(said["gpu_locks1"]) == 2 * rounds
    assert [h[2]["thread"] for h in holds] == [tid0, tid1] * rounds
    assert [h[2].get("from") for h in holds] == [None] + [tid0, tid1] * (rounds - 1) + [tid0]
    assert all(a[1] <= b[0] for a, b in pairwise(holds))
    for wait, hold in zip(waits, holds[1::2], strict=True):  # each wait ends as thread 1's hold begins
        assert wait[1] == hold[0]
    for before, wait in zip(holds[0::2], waits, strict=True):  # and began while thread 0 held it
        assert before[0] < wait[0] < before[1]
    # Each wait of thread 1's on its semaphore is there; the semaphore had at once is not.
    sems = [s[2]["semaphore"] for s in spans_on(trace, f"os/thread/{tid1}", "sem_wait")]
    assert sems.count(said["go_sem"]) == int(said["sem_blocked"]) == rounds
    assert not spans_on(trace, f"os/thread/{tid0}", "sem_wait")
    # The mutex nobody else wanted is not in the trace, and the notes say what was left out.
    assert not trace.span_mask(track=quiet).any()
    record_meta = trace.meta["record"]
    assert record_meta["locks"] == "contended" and record_meta["unrecorded_holds"] >= int(said["quiet_locks"])
    assert any("--locks contended" in n and f"{record_meta['unrecorded_holds']} holds" in n
               for n in record_meta["notes"])


def test_all_locks_and_no_locks(program: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    code, said = record(capfd, tmp_path / "all.wbtrace", str(program), "4", "handoff", locks="all")
    assert code == 0
    trace = store.load(tmp_path / "all.wbtrace")
    quiet, gpu = f"lock/{said['quiet_mutex']}", f"lock/{said['gpu_mutex']}"
    assert len(spans_on(trace, quiet, "hold")) == int(said["quiet_locks"]) == 12
    assert not spans_on(trace, quiet, "wait")  # always had at once
    assert len(spans_on(trace, gpu, "wait")) == int(said["contended"]) == 4
    spare = [s for s in spans_on(trace, f"os/thread/{said['tid0']}", "sem_wait")
             if s[2]["semaphore"] == said["spare_sem"]]
    assert len(spare) == 12  # had at once, but recorded: every call
    assert trace.meta["record"]["unrecorded_holds"] == 0
    assert not any("--locks" in n for n in trace.meta["record"]["notes"])

    code, said = record(capfd, tmp_path / "none.wbtrace", str(program), "4", "handoff", locks="none")
    assert code == 0
    trace = store.load(tmp_path / "none.wbtrace")
    assert not rl.role_mask(trace, "lock_hold", "lock_wait", "cond_wait").any()
    assert any("--locks none" in n for n in trace.meta["record"]["notes"])


@pytest.mark.parametrize("locks", ["contended", "all"])
def test_a_recursive_mutex_held_from_its_outer_lock_to_its_outer_unlock(
        recursive_program: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], locks: str) -> None:
    """Two threads take a recursive mutex nested, each waiting for the other's hold: one hold
    per outer lock, spanning the time the program keeps it after the inner unlock, and no
    release without its acquire (the inner unlock of a contended one used to end the hold)."""
    rounds = 12
    code, said = record(capfd, tmp_path / "t.wbtrace", str(recursive_program), str(rounds), locks=locks)
    assert code == 0
    trace = store.load(tmp_path / "t.wbtrace")
    track = f"lock/{said['mutex']}"
    tid0, tid1 = int(said["tid0"]), int(said["tid1"])
    holds, waits = spans_on(trace, track, "hold"), spans_on(trace, track, "wait")
    assert int(said["contended"]) == rounds
    assert len(holds) == int(said["holds0"]) + int(said["holds1"]) == 2 * rounds
    assert [h[2]["thread"] for h in holds] == [tid0, tid1] * rounds
    assert all(a[1] <= b[0] for a, b in pairwise(holds)), "holds of one lock overlap"
    kept = (int(said["after_inner_us"]) - 1) * 1000  # the program's clock reads whole microseconds
    assert all(h[1] - h[0] >= kept for h in holds), "a hold ended at the inner unlock"
    assert not any(h[2].get("unfinished") for h in holds)
    assert [w[2]["thread"] for w in waits] == [tid1] * rounds  # thread 1 waited every round
    counts = trace.meta["record"]["counts"]
    assert "releases without a recorded acquire" not in counts
    assert counts["lock acquires"] == counts["lock holds"] == 2 * rounds


def test_exit_code_passes_through(program: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    code, said = record(capfd, tmp_path / "t.wbtrace", str(program), "2", "exit:7")
    assert code == 7
    trace = store.load(tmp_path / "t.wbtrace")
    assert trace.meta["record"]["exit_code"] == 7 and trace.meta["outcome"] == "exited with 7"
    assert len(spans_on(trace, f"lock/{said['gpu_mutex']}", "hold")) == 4


def test_a_crash_keeps_what_was_recorded(program: Path, tmp_path: Path,
                                         capfd: pytest.CaptureFixture[str]) -> None:
    code, said = record(capfd, tmp_path / "t.wbtrace", str(program), "10", "abort")
    assert code == 128 + signal.SIGABRT
    trace = store.load(tmp_path / "t.wbtrace")
    assert trace.meta["outcome"] == "killed by SIGABRT"
    holds = [trace.span(int(i)) for i in np.flatnonzero(rl.role_mask(trace, "lock_hold"))]
    # The program's gpu mutex (the one its workers took crash_after times) died held.
    by_lock: dict[str, list] = {}
    for h in holds:
        by_lock.setdefault(h.track, []).append(h)
    gpu = [spans for spans in by_lock.values() if len(spans) == int(said["crash_after"])]
    assert gpu, f"no lock held {said['crash_after']} times: {[len(s) for s in by_lock.values()]}"
    assert [h.attrs.get("unfinished", False) for h in sorted(gpu[0], key=lambda h: h.start_ns)][-1] is True


def test_a_program_that_never_locks(program: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    code, _ = record(capfd, tmp_path / "t.wbtrace", str(program), "1", "nolock")
    assert code == 0
    trace = store.load(tmp_path / "t.wbtrace")
    assert not rl.role_mask(trace, "lock_hold", "lock_wait", "cond_wait").any()
    assert any("took no pthread mutex" in n for n in trace.meta["record"]["notes"])
    from workbench.analysis.verdict import diagnose

    assert diagnose(trace).headline


def test_no_program_and_a_missing_program(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["record", "-o", str(tmp_path / "t.wbtrace"), "--no-cuda"]) == 2
    assert cli.main(["record", "-o", str(tmp_path / "u.wbtrace"), "--no-cuda", "--",
                     str(tmp_path / "nothing-here")]) == 2
    err = capfd.readouterr().err
    assert "no program given" in err and "cannot run" in err and "nothing-here" in err


def _recorder(program: Path, trace: Path, *argv: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Files, not pipes: a program left running by a killed recorder must not hold our reads open.
    out = open(trace.with_suffix(".out"), "wb")  # noqa: SIM115 (closed with the process)
    with out:
        return subprocess.Popen([sys.executable, "-m", "workbench.cli", "record", "-o", str(trace),
                                 "--no-cuda", "--", str(program), *argv], env=env, stdout=out, stderr=out)


def _wait_for(path: Path, size: int = 0, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or path.stat().st_size <= size:
        assert time.monotonic() < deadline, f"{path} never appeared (or grew past {size} bytes)"
        time.sleep(0.02)


def test_sigterm_is_passed_on_and_the_trace_saved(program: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.wbtrace"
    recorder = _recorder(program, trace, "1000000")
    _wait_for(trace.with_name("t.wbtrace.wbjournal"), size=4096)  # records with spans in it
    recorder.send_signal(signal.SIGTERM)
    recorder.wait(timeout=30)
    assert recorder.returncode == 128 + signal.SIGTERM, trace.with_suffix(".out").read_text()
    saved = store.load(trace)
    assert saved.meta["record"]["stopped_by"] == "SIGTERM"
    assert saved.meta["outcome"] == "killed by SIGTERM"
    assert rl.role_mask(saved, "lock_hold").sum() > 10


def test_a_killed_recorder_leaves_a_journal(program: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.wbtrace"
    journal = trace.with_name("t.wbtrace.wbjournal")
    recorder = _recorder(program, trace, "2000")
    _wait_for(journal, size=4096)  # a flush with spans in it
    recorder.kill()
    recorder.wait(timeout=30)
    recovered, recovery = journal_read.read(journal)
    assert recovery.spans > 0
    assert rl.role_mask(recovered, "lock_hold").any()


def test_recorded_from_a_notebook_with_its_live_view(program: Path) -> None:
    pytest.importorskip("bokeh")
    from workbench.viz.recording import LiveRecording

    recording = LiveRecording([str(program), "3"], cuda=False, locks="all").start()
    trace = recording.wait(timeout=60)
    assert trace is not None and recording.exit_code == 0
    holds = int(rl.role_mask(trace, "lock_hold").sum())
    assert holds >= 6 and recording.live.stats.spans == len(trace.spans)  # every span reached the view


def _said(text: str) -> dict[str, str]:
    return dict(word.split("=", 1) for line in text.splitlines() for word in line.split() if "=" in word)


def test_each_part_of_the_recording_switched_off_alone(program: Path, tmp_path: Path) -> None:
    """The cost knobs (benchmarks/record_gpu.py times them): the lock shim not preloaded, the
    NVTX injection left off, the ring drained only at the end; what is left is whole."""
    from workbench.attach.build import build_shims
    from workbench.attach.session import Session

    shims = build_shims(cuda=False)
    rounds = 4

    def run(**options: Any) -> tuple[dict[str, str], Any]:
        session = Session([str(program), str(rounds), "handoff"], shims, locks="all", **options)
        out = tmp_path / "out.txt"
        with out.open("w") as sink:
            session.start(stdout=sink)
            session.wait()
        trace = session.trace()
        session.close()
        return _said(out.read_text()), trace

    said, trace = run(period_s=None)  # nothing drained while it ran: all of it at the end
    gpu = f"lock/{said['gpu_mutex']}"
    holds = len(spans_on(trace, gpu, "hold"))
    assert holds == int(said["gpu_locks0"]) + int(said["gpu_locks1"]) == 2 * rounds
    assert len(spans_on(trace, f"lock/{said['quiet_mutex']}", "hold")) == int(said["quiet_locks"])

    said, trace = run(preload=False)
    record = trace.meta["record"]
    assert not rl.role_mask(trace, "lock_hold", "lock_wait", "cond_wait").any()
    assert "locks" not in record["features"] and any("not preloaded" in n for n in record["notes"])
    if said.get("nvtx") == "1":  # NVTX still recorded: the same library, loaded as the injection only
        assert len(spans_on(trace, f"thread/{said['tid0']}", "round")) == rounds

    said, trace = run(nvtx=False)
    record = trace.meta["record"]
    assert record["features"] == ["locks"] and not trace.span_mask(track=f"thread/{said['tid0']}").any()
    assert len(spans_on(trace, f"lock/{said['gpu_mutex']}", "hold")) == 2 * rounds
    if shims.nvtx:
        assert any("NVTX injection was left off" in n for n in record["notes"])


def test_cuda_kinds_are_checked_and_named_to_the_shim(tmp_path: Path,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    from workbench.attach.build import Shims
    from workbench.attach.session import CUDA_KINDS, Session, cuda_kinds

    assert cuda_kinds("all") == CUDA_KINDS and cuda_kinds("none") == ()
    assert cuda_kinds("runtime,kernel") == ("kernel", "runtime")  # in the shim's order
    assert cuda_kinds("all,overhead") == (*CUDA_KINDS, "overhead")
    shims = Shims(tmp_path / "shim.so", False, tmp_path / "cupti.so")
    session = Session(["true"], shims, cuda_kinds=("memcpy", "kernel"),
                      env={"WORKBENCH_RECORD_FLUSH_MS": "0"})
    env = session.environment()
    assert env["WORKBENCH_RECORD_CUDA_KINDS"] == "kernel,memcpy" and env["WORKBENCH_RECORD_FLUSH_MS"] == "0"
    assert Session(["true"], shims, cuda_kinds=()).environment()["WORKBENCH_RECORD_CUDA_KINDS"] == "none"
    with pytest.raises(ValueError, match="not 'kernels'"):
        cuda_kinds("kernels")
    code = cli.main(["record", "--cuda-kinds", "kernel,copies", "-o", str(tmp_path / "t.wbtrace"), "--",
                     "true"])
    err = capfd.readouterr().err
    assert code == 2 and "kernel,copies" in err and len(err.strip().splitlines()) == 1


def test_cuda_modes_are_checked_named_to_the_shim_and_noted(tmp_path: Path,
                                                            capfd: pytest.CaptureFixture[str]) -> None:
    from workbench.attach import ring as rg
    from workbench.attach.build import Shims
    from workbench.attach.convert import as_array
    from workbench.attach.session import Session, sample_ms

    shims = Shims(tmp_path / "shim.so", False, tmp_path / "cupti.so")
    env = Session(["true"], shims, cuda_mode="sampled", sample=(0.5, 20)).environment()
    assert env["WORKBENCH_RECORD_CUDA_MODE"] == "sampled" and env["WORKBENCH_RECORD_SAMPLE_MS"] == "0.5/20"
    assert Session(["true"], shims).environment()["WORKBENCH_RECORD_CUDA_MODE"] == "activity"
    assert sample_ms("1/10") == (1.0, 10.0)
    for bad in ("10/1", "1", "0/5", "a/b", "1/70000"):
        with pytest.raises(ValueError, match="WINDOW/PERIOD"):
            sample_ms(bad)
    with pytest.raises(ValueError, match="not 'often'"):
        Session(["true"], shims, cuda_mode="often")
    with pytest.raises(ValueError, match="needs kernel"):
        Session(["true"], shims, cuda_mode="launches", cuda_kinds=("memcpy",))
    for argv in (["--cuda-mode", "launches", "--cuda-kinds", "memcpy"],
                 ["--cuda-mode", "sampled", "--sample-ms", "10/1"]):
        code = cli.main(["record", *argv, "-o", str(tmp_path / "t.wbtrace"), "--", "true"])
        err = capfd.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, err
    code = cli.main(["record", "--cuda-mode", "sometimes", "-o", str(tmp_path / "t.wbtrace"), "--", "true"])
    err = capfd.readouterr().err
    assert code == 2 and "activity, launches, sampled, not 'sometimes'" in err
    assert len(err.strip().splitlines()) == 1

    # What each mode's trace says it left out, with the numbers of what it holds.
    for mode in ("launches", "sampled"):
        session = Session(["true"], shims, cuda_mode=mode)
        try:
            words = np.frombuffer(session.ring._map, "<u4", 1, rg.FEATURES)
            words[0] |= 4  # CUPTI attached, as the shim says once CUDA starts
            events: list[tuple[int, ...]] = [
                (rg.LAUNCH, 0, 11, 7, 1, (2 << 32) | k, 1000 + k * 100, 1050 + k * 100) for k in range(5)]
            if mode == "sampled":
                events += [(rg.WINDOW, 0, 0, 7, 0, 40, 1000, 1200)]
            texts = [rg.Text(rg.T_STRING, 7, 0, 1, 0, "tiny"),
                     rg.Text(rg.T_STRING, 7, 0, 2, 0, "cudaLaunchKernel")]
            session.converter.feed(rg.Drained(as_array(events), texts))
            record = session.trace().meta["record"]
        finally:
            session.close()
        assert record["cuda_mode"] == mode and record["launches_by_kernel"] == {"tiny": 5}
        (said,) = [n for n in record["notes"] if "--cuda-mode" in n]
        assert "5 kernel launches (1 kernels) timed on the host" in said and "not the kernel's time" in said
        if mode == "launches":
            assert "GPU's busy and idle time are not in the trace" in said and record["sample_ms"] is None
        else:
            assert "0 kernels recorded on the GPU in 1 windows (0.0 ms)" in said
            assert record["sample_ms"] == [1, 10]
