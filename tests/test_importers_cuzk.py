"""cuzk daemon logs: our own lines round-trip; production-style logs with noise, interleaved
partitions, truncation and unknown lines import with what they hold and say what they skipped."""

import itertools

import pytest
from cuzk_writer import NOISE, daemon_log
from golden import case

from workbench.analysis import summarize
from workbench.config import RunConfig
from workbench.export.cuzk_log import cuzk_lines
from workbench.importers import ImportFailed, parse_cuzk_log
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend

PHASES = ("prep_msm", "ntt_msm_h", "barrier_wait", "batch_add", "tail_msm", "b_g2_msm")


@pytest.fixture(scope="module")
def run_trace():
    config = RunConfig(backend="cpu", log2_constraints=6, partitions=6, gpu_workers=2)
    return Pipeline(config, CpuBackend()).run().trace


def _ms_by_partition(trace, name):
    return {s.partition: s.duration_ns // 1_000_000 for s in trace.select(name=name, track_prefix="worker/")}


def test_our_lines_round_trip_with_timeline(run_trace):
    imported = parse_cuzk_log("\n".join(cuzk_lines(run_trace)))
    assert imported.meta["import"]["skipped"] == {}
    assert imported.meta["import"]["timeline_brackets"] == "the mutex hold"
    for phase in PHASES:
        assert _ms_by_partition(imported, phase) == {
            p: pytest.approx(ms, abs=1) for p, ms in _ms_by_partition(run_trace, phase).items()}
    holds = {s.partition: (s.worker, s.start_ns // 1_000_000) for s in run_trace.select(name="hold")}
    origin = summarize(run_trace)  # noqa: F841 - the window itself is checked below
    got = {s.partition: s.worker for s in imported.select(name="hold")}
    assert got == {p: w for p, (w, _) in holds.items()}
    assert summarize(imported).partitions_done == 6
    assert all(not (s.attrs or {}).get("reconstructed") for s in imported.select(name="hold"))


def test_without_timeline_calls_are_chained_and_marked(run_trace):
    text = "\n".join(line for line in cuzk_lines(run_trace) if not line.startswith("TIMELINE"))
    imported = parse_cuzk_log(text)
    assert "placed from durations alone" in imported.meta["import"]["reconstructed"]
    holds = sorted(imported.select(name="hold"), key=lambda s: s.start_ns)
    assert len(holds) == 6 and all(s.attrs["reconstructed"] for s in holds)
    assert all(a.end_ns <= b.start_ns for a, b in itertools.pairwise(holds))
    for phase in ("ntt_msm_h", "batch_add", "tail_msm"):
        got = sorted(_ms_by_partition(imported, phase).values())
        want = sorted(_ms_by_partition(run_trace, phase).values())
        assert got == [pytest.approx(v, abs=1) for v in want]


def test_production_log_with_noise_and_interleaving():
    golden = case("copy_bound")
    log = daemon_log(golden, noise=3, seed=11)
    imported = parse_cuzk_log(log, "daemon.log")
    report = imported.meta["import"]
    noise = sum(1 for line in log.splitlines() if any(n in line for n in NOISE))
    assert report["skipped"] == {"not a cuzk timing line": noise}
    assert report["first_at"]["not a cuzk timing line"].startswith("line ")
    for phase in ("ntt_msm_h", "prep_msm", "b_g2_msm", "barrier_wait"):
        assert _ms_by_partition(imported, phase) == _ms_by_partition(golden, phase), phase
    # The part of ntt_msm_h that CUZK_NTT_H does not name is the copy.
    copies = {s.partition: s.duration_ns for s in imported.select(name="h2d_copy")}
    truth = {}
    for s in golden.select(name="h2d_copy"):
        truth[s.partition] = truth.get(s.partition, 0) + s.duration_ns
    assert copies == {p: pytest.approx(ns, abs=3_000_000) for p, ns in truth.items()}
    throughput = summarize(golden).throughput_per_min
    assert summarize(imported).throughput_per_min == pytest.approx(throughput, rel=0.01)


@pytest.mark.parametrize("keep", [0.25, 0.6, 0.9])
def test_truncated_log_keeps_what_it_has(keep):
    log = daemon_log(case("prep_bound"), noise=1, seed=2)
    cut = log[: int(len(log) * keep)]  # mid-line, as a log being written looks
    imported = parse_cuzk_log(cut)
    done = summarize(imported).partitions_done
    assert 0 < done <= 12
    full = parse_cuzk_log(log)
    # Calls that are complete in the cut log carry the same numbers as in the full log.
    want = _ms_by_partition(full, "ntt_msm_h")
    for p, ms in _ms_by_partition(imported, "ntt_msm_h").items():
        assert want[p] == ms


def test_log_missing_its_beginning_still_files_lines_into_the_right_calls():
    golden = case("copy_bound")
    lines = daemon_log(golden, noise=0, timeline=False).splitlines()
    first_tail = next(i for i, line in enumerate(lines) if "tail_msm_ms" in line)
    imported = parse_cuzk_log("\n".join(lines[first_tail:]))
    ntt = sorted(s.duration_ns // 1_000_000 for s in imported.select(name="ntt_msm_h"))
    truth = sorted(_ms_by_partition(golden, "ntt_msm_h").values())
    assert len(ntt) == len(truth) - 1
    assert set(ntt) <= set(truth)
    assert imported.meta["import"]["incomplete_calls"] >= 1


def test_unknown_and_malformed_lines_are_counted_with_where_they_were():
    text = "\n".join([
        "boot",
        "CUZK_TIMING: prep_msm_ms=12",
        "CUZK_TIMING: frobnicate_ms=3",
        "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=abc",
        "TIMELINE,12,REBOOT,job,partition=1",
        "TIMELINE,xx,GPU_END,job,partition=1",
        "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=40",
    ])
    report = parse_cuzk_log(text).meta["import"]
    assert report["skipped"] == {
        "not a cuzk timing line": 1, "CUZK_TIMING line of an unknown kind": 1,
        "CUZK_TIMING line with a malformed value": 1, "TIMELINE event of an unknown kind": 1,
        "malformed TIMELINE line": 1,
    }
    assert report["first_at"]["CUZK_TIMING line with a malformed value"] == "line 4"
    assert report["incomplete_calls"] == 1


def test_a_file_without_cuzk_lines_is_refused_clearly():
    with pytest.raises(ImportFailed, match=r"no CUZK_TIMING, CUZK_NTT_H or TIMELINE lines found in 2 lines"):
        parse_cuzk_log("hello\nworld\n", "x.log")


def test_two_jobs_keep_their_partitions_apart(run_trace):
    lines = cuzk_lines(run_trace)
    second = [line.replace(",job0,", ",job1,") for line in lines]
    imported = parse_cuzk_log("\n".join(lines + second))
    assert summarize(imported).partitions_done == 12
    assert len({s.partition for s in imported.select(name="hold")}) == 12


def test_timeline_bracketing_the_whole_call_is_recognised():
    lines = []
    start = 0
    for p in range(4):
        lines += [
            f"TIMELINE,{start},GPU_START,j,worker=0,partition={p}",
            "CUZK_TIMING: pre_lock_cpu_ms=5 mutex_wait_ms=0",
            "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=100",
            "CUZK_TIMING: gpu_tid=0 barrier_wait_ms=0",
            "CUZK_TIMING: prep_msm_ms=30",
            "CUZK_TIMING: gpu_tid=0 batch_add_ms=40",
            "CUZK_TIMING: gpu_tid=0 tail_msm_ms=20 gpu_total_ms=160",
            "CUZK_TIMING: b_g2_msm_ms=50 num_circuits=1",
            f"CUZK_TIMING: mutex_held_ms={160 + p} total_start_fn_ms=215",
            f"TIMELINE,{start + 215},GPU_END,j,worker=0,partition={p},gpu_ms=215",
        ]
        start += 300
    imported = parse_cuzk_log("\n".join(lines))
    assert imported.meta["import"]["timeline_brackets"] == "the whole proving call"
    holds = sorted(imported.select(name="hold"), key=lambda s: s.partition)
    assert [s.start_ns // 1_000_000 for s in holds] == [5, 305, 605, 905]
