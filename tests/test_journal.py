"""The journal: a real run's records streamed while it runs read back exactly; a torn or damaged
record drops it and everything after it, never anything before; what is not a journal is
refused in one line. Expected counts come from reading the framing by hand (journal_frames.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from journal_frames import counts, frames

from workbench.cli import main
from workbench.commands._signals import signals_as_interrupt
from workbench.commands.recover import say_left_behind
from workbench.config import RunConfig
from workbench.pipeline.backends import select_backend
from workbench.pipeline.run import Pipeline
from workbench.trace import Recorder, Trace, TraceFormatError, journal_read, store
from workbench.trace.journal import Journal


def as_rows(trace: Trace) -> tuple[list, list, list]:
    return list(trace.iter_spans()), list(trace.iter_instants()), list(trace.iter_counters())


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trace]:
    """A real CPU run journaled every 20 ms (many records), kept as a killed run would leave it
    (with its last flush), and the trace the run itself made."""
    folder = tmp_path_factory.mktemp("journal")
    config = RunConfig(backend="cpu", partitions=4, log2_constraints=10)
    with pytest.MonkeyPatch.context() as patch:  # the session's key cache, as conftest sets it
        patch.setenv("WORKBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "srs-cache"))
        pipeline = Pipeline(config, select_backend(config))
        journal = Journal.create(folder / "run.wbtrace", pipeline.recorder, config=config.to_dict(),
                                 interval_s=0.02).start()
        result = pipeline.run()
        journal.close(result.trace.meta)
    return journal.path, result.trace


def copy(real: tuple[Path, Trace], tmp_path: Path) -> Path:
    target = tmp_path / real[0].name
    shutil.copyfile(real[0], target)
    return target


def test_a_real_runs_journal_loads_as_the_run_s_own_trace(real):
    path, truth = real
    found = frames(path)
    assert len(found) > 5 and found[0].kind == b"H" and found[0].part["pid"] == os.getpid()
    loaded = store.load(path)
    assert counts(found) == (len(loaded.spans), len(loaded.instants), len(loaded.counters))
    assert as_rows(loaded) == as_rows(truth)
    assert loaded.config == truth.config and loaded.thread_names == truth.thread_names
    assert loaded.meta["outcome"] == "completed" and loaded.meta["journal"]["torn"] is False
    again = store.load(store.save(loaded, path.with_name("again.wbtrace")))  # a journal becomes a trace
    assert as_rows(again) == as_rows(truth)


def test_a_torn_last_record_is_dropped_and_everything_before_it_kept(real, tmp_path, capsys):
    path = copy(real, tmp_path)
    found = frames(path)
    last = found[-1]
    with open(path, "r+b") as handle:
        handle.truncate(last.offset + (last.end - last.offset) // 2)
    kept = counts(found[:-1])
    assert main(["recover", str(path)]) == 0
    line = capsys.readouterr().out.strip()
    assert f"recovered {tmp_path / 'run.wbtrace'}: {kept[0]} spans, {kept[1]} instants" in line
    assert "a torn last record" in line and "journal removed" in line and "\n" not in line
    assert not path.exists()
    recovered = store.load(tmp_path / "run.wbtrace")
    truth = as_rows(real[1])
    assert as_rows(recovered) == tuple(rows[:n] for rows, n in zip(truth, kept, strict=True))
    assert recovered.meta["outcome"] == "unfinished"  # the final facts were in the torn record


def test_a_record_failing_its_checksum_ends_the_reading_there(real, tmp_path, capsys):
    path = copy(real, tmp_path)
    found = frames(path)
    middle = len(found) // 2
    data = bytearray(path.read_bytes())
    data[(found[middle].offset + found[middle].end) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    assert main(["recover", str(path), "-o", str(tmp_path / "out.wbtrace")]) == 0
    line = capsys.readouterr().out.strip()
    assert f"record {middle} at byte {found[middle].offset} fails its checksum" in line
    assert f"{len(data) - found[middle].offset} bytes from there were dropped" in line
    assert path.exists() and f"journal {path} kept" in line  # damage is kept for a look
    recovered = store.load(tmp_path / "out.wbtrace")
    assert len(recovered.spans) == counts(found[:middle])[0]


@pytest.mark.parametrize("content,said", [
    (b"hello, not a journal\n", "is not a workbench journal"),
    (b"", "is not a workbench journal"),
    (b"\x89WBJRNL\n", "it holds no record"),
    (b"\x89WBJRNL\n\x10\x00\x00\x00abcd", "its first record is cut off"),
    (b"\x89WBJRNL\n\x04\x00\x00\x00\x00\x00\x00\x00Hxyz", "its first record fails its checksum"),
])
def test_what_is_not_a_journal_is_refused_in_one_line(tmp_path, capsys, content, said):
    path = tmp_path / "x.wbjournal"
    path.write_bytes(content)
    assert main(["recover", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and str(path) in err, err
    assert not (tmp_path / "x").exists()


def test_recover_refuses_a_trace_and_a_folder(real, tmp_path, capsys):
    trace = store.save(real[1], tmp_path / "t.wbtrace")
    assert main(["recover", str(trace)]) == 2
    assert "a workbench trace already, not a journal" in capsys.readouterr().err
    assert main(["recover", str(tmp_path)]) == 2
    assert "not a regular file" in capsys.readouterr().err


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0, 1), flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 7)), max_size=3))
def test_damage_never_raises_but_the_format_error_nor_returns_rows_after_it(real, tmp_path, cut, flips):
    original = real[0].read_bytes()
    data = bytearray(original[:int(len(original) * cut)])
    flips = flips if data else []
    positions = [min(int(len(data) * where), len(data) - 1) for where, _ in flips]
    for position, (_, bit) in zip(positions, flips, strict=True):
        data[position] ^= 1 << bit
    before = np.frombuffer(original[:len(data)], np.uint8)
    differs = np.flatnonzero(np.frombuffer(bytes(data), np.uint8) != before)
    damage = int(differs[0]) if len(differs) else len(data)  # the first byte that differs or is missing
    path = tmp_path / "damaged.wbjournal"
    path.write_bytes(bytes(data))
    intact = [f for f in frames(real[0]) if f.end <= damage]
    try:
        trace, recovery = journal_read.read(path)
    except TraceFormatError:
        assert not intact  # only when the header itself is damaged
        return
    truth = as_rows(real[1])
    want = counts(intact)
    assert as_rows(trace) == tuple(rows[:n] for rows, n in zip(truth, want, strict=True))
    assert recovery.records == len(intact) - 1


def test_spans_recorded_from_threads_while_the_flusher_runs_all_arrive_in_order(tmp_path):
    recorder = Recorder(nvtx=False)
    journal = Journal.create(tmp_path / "t.wbtrace", recorder, interval_s=0.001).start()

    def work(t: int) -> None:
        for i in range(3000):
            with recorder.span(f"synth/{t}", "synthesis", i, -1, {"t": t} if i % 2 else None):
                pass
            if i % 500 == 0:
                recorder.name_track(f"synth/{t}", f"synth-{t}-{i}")
                recorder.counter(f"gauge/{t}", "n", i)
                seen = journal.records
                wait_until(lambda seen=seen: journal.records > seen)  # a flush while the others record
    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    journal.close()
    assert journal.records > 3 and journal.error is None
    loaded = store.load(journal.path)
    assert as_rows(loaded) == as_rows(Trace.from_recorder(recorder))
    assert loaded.thread_names == recorder.thread_names


def test_attribute_values_numpy_and_odd_ones_survive_as_plain_values(tmp_path):
    recorder = Recorder(nvtx=False)
    journal = Journal.create(tmp_path / "t.wbtrace", recorder)
    attrs = {"i": np.int64(7), "f": np.float32(0.5), "b": True, "s": "✓", "n": None, "l": [1, "x"],
             "d": {"k": 2.5}, "a": np.arange(3), "o": object}
    recorder.add_span("worker/0", "batch_add", 5, 9, 1, 0, attrs)
    recorder.instant("run", "notice", attrs={"message": "m"}, ts_ns=7)
    journal.close({"outcome": "completed"})
    (span,) = store.load(journal.path).iter_spans()
    assert span.attrs == {"i": 7, "f": 0.5, "b": True, "s": "✓", "n": None, "l": [1, "x"], "d": {"k": 2.5},
                          "a": [0, 1, 2], "o": repr(object)}


def test_a_new_journal_never_replaces_what_is_there(tmp_path):
    (tmp_path / "t.wbtrace.wbjournal").symlink_to("/dev/null")
    recorder = Recorder(nvtx=False)
    journal = Journal.create(tmp_path / "t.wbtrace", recorder)
    assert journal.path == tmp_path / "t-2.wbtrace.wbjournal"
    journal.close()
    assert not journal.path.exists()  # nothing recorded: nothing left behind
    assert (tmp_path / "t.wbtrace.wbjournal").is_symlink()


def test_signals_during_a_save_are_held_back_and_said_once(capsys):
    before = signal.getsignal(signal.SIGINT)
    with signals_as_interrupt() as stops, stops.hold() as held:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
    assert held == ["SIGINT", "SIGTERM"]
    assert capsys.readouterr().err.count("saving the trace: it is written whole first") == 1
    assert signal.getsignal(signal.SIGINT) is before


def test_journals_of_runs_that_are_gone_are_named_and_running_ones_not(tmp_path):
    mine = Journal.create(tmp_path / "mine.wbtrace", Recorder(nvtx=False))
    mine.close()
    assert say_left_behind(tmp_path) == []
    subprocess.run(
        [sys.executable, "-c", "from workbench.trace import Recorder; from workbench.trace.journal import "
         f"Journal; Journal.create({str(tmp_path / 'gone.wbtrace')!r}, Recorder(nvtx=False))"],
        cwd=Path(__file__).parent.parent, timeout=60, check=True)
    (line,) = say_left_behind(tmp_path)
    assert f"{tmp_path / 'gone.wbtrace.wbjournal'} was left by a run that did not finish" in line


def test_the_journal_of_a_run_still_going_is_not_recovered_under_its_feet(tmp_path, capsys):
    code = ("import time; from workbench.trace import Recorder; from workbench.trace.journal import Journal; "
            f"Journal.create({str(tmp_path / 'live.wbtrace')!r}, Recorder(nvtx=False)); "
            "print('ready', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).parent.parent,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        journal = tmp_path / "live.wbtrace.wbjournal"
        assert main(["recover", str(journal)]) == 2
        assert f"the journal of a run still going (process {proc.pid})" in capsys.readouterr().err
        assert journal.exists() and say_left_behind(tmp_path) == []
    finally:
        proc.kill()
        proc.communicate(timeout=30)
