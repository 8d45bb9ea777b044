"""Every line kind the cuzk daemon prints is recognised and placed; odd lines are skipped and
counted by line number; the verdict on the seed's kind of log names ntt_msm_h first.

Format facts (public sources of the daemon and the prover it drives; tests/cuzk_writer.py
writes each from its format string):

filecoin-project/curio, extern/supraseal-c2/cuda/groth16_cuda.cu (fprintf to stderr):
    CUZK_TIMING: split_vectors_ms=%ld setup_to_split_ms=%ld        span split_vectors
    CUZK_TIMING: prep_msm_ms=%ld                                   span prep_msm
    CUZK_TIMING: b_g2_msm_ms=%ld num_circuits=%zu                  span b_g2_msm (+ num_circuits)
    CUZK_TIMING: pre_lock_cpu_ms=%ld mutex_wait_ms=%ld             spans pre_lock_cpu, mutex wait
    CUZK_TIMING: gpu_tid=%zu ntt_msm_h_ms=%ld                      span ntt_msm_h
    CUZK_TIMING: gpu_tid=%zu barrier_wait_ms=%ld                   span barrier_wait
    CUZK_TIMING: gpu_tid=%zu batch_add_ms=%ld                      span batch_add
    CUZK_TIMING: gpu_tid=%zu tail_msm_ms=%ld gpu_total_ms=%ld      span tail_msm (gpu_total: the hold)
    CUZK_TIMING: mutex_held_ms=%ld total_start_fn_ms=%ld           span mutex hold, call anchoring
    CUZK_TIMING: async_dealloc_ms=%ld                              attribute of the call's finish
    CUZK_TIMING: set pool release threshold to MAX on gpu %d       attribute of ntt_msm_h
    CUZK_TIMING: d_a_cache allocated %zu MiB on gpu %d             attribute of ntt_msm_h
    CUZK_TIMING: host_register=fallback err=%d                     attribute of the hold
    CUZK_TIMING: prestage_vram free_mib=%zu usable_mib=%zu need_da_mib=%zu need_dbc_mib=%zu
                 total_mib=%zu (one line)                          attribute of the hold
    CUZK_TIMING: prestage_setup=skip_vram | =ok domain=%zu lot_of_memory=%d | =fallback err=%d
                                                                   attribute of the hold
  (the pre-staging and host-registration lines are one version of the file, the pool, d_a
  cache, mutex and barrier lines another; both are read)
filecoin-project/curio, extern/supraseal-c2/cuda/groth16_ntt_h.cu:
    CUZK_NTT_H: d_b_alloc=%ldms ntt_kernels=%ldms coset_intt_sync=%ldms msm_init=%ldms
                msm_invoke=%ldms msm_dtor=%ldms total=%ldms (one line)   spans inside ntt_msm_h
filecoin-project/curio, extern/cuzk/cuzk-core/src/engine.rs (eprintln!, "TIMELINE,{},{},{},{}"):
    SYNTH_START partition=N | kind=K; SYNTH_END partition=N,synth_ms=M | synth_ms=M;
    GPU_QUEUE partition=N | monolithic; GPU_PICKUP, GPU_START worker=W[,partition=N];
    GPU_END worker=W[,partition=N],gpu_ms=M; CHAN_SEND (named in its comment)
                                                     synthesis spans, queue instants, anchoring
filecoin-project/curio, extern/cuzk/cuzk-core/src/engine.rs (tracing info!, fields after the
message, partition as Some(N)): "GPU_TIMING hot_path pre-prove overhead", "GPU_TIMING
spawn_blocking prove_start", "GPU_TIMING prove_start returned", "FIN_TIMING finalizer
partition", "FIN_TIMING finalizer monolithic", "FIN_TIMING malloc_trim (success path)",
"FIN_TIMING malloc_trim (discard path)"          figures of the run: their only clock is the
                                                 log's wall-clock prefix, which no other line has
Everything else the daemon logs (tracing info lines, journald prefixes) is skipped as "not a
cuzk timing line", counted, with the first line numbers kept.

Before: on the seed's kind of log (two workers, ntt_msm_h 2.7 to 8.9 s, batch_add ~400 ms,
tail_msm ~200 ms, the copies inside ntt_msm_h) the headline was "The GPU mutex serialises
work that is not GPU compute: The mutex is held 97% of the run ..." naming no phase, and
split_vectors, async_dealloc, pool, d_a cache and tracing lines were counted unknown.
"""

import random
import re
import statistics

import pytest
from cuzk_writer import FORMATS, NOISE, TRACING, CallSpec, production_log, timeline_line, tracing_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.analysis import DiagnoseOptions, diagnose
from workbench.importers import ImportFailed, load_cuzk_log, parse_cuzk_log
from workbench.importers.cuzk_lines import ANSI

NTT = [2700, 8860, 4100, 6500, 3000, 7800, 5200, 2900, 8200, 3600, 6900, 4500, 3300, 7400]
PREP = [1488, 4178, 2100, 3300, 1700, 2600, 3900, 1600, 2900, 2200, 3500, 1900, 2400, 3100]
BATCH = [400 + (p % 3) - 1 for p in range(len(NTT))]
TAIL = [197 + (p % 2) * 2 for p in range(len(NTT))]
PRESTAGE = ["ok", "skip", "error", "unregistered"]
# Timeline and tracing lines of a monolithic job, which the partition pipeline never prints.
MONOLITHIC = [
    timeline_line(90000, "SYNTH_START", "mono-1", "kind=WinningPoSt"),
    timeline_line(90400, "SYNTH_END", "mono-1", "synth_ms=400"),
    timeline_line(90400, "CHAN_SEND", "mono-1", "partition=0"),
    timeline_line(90401, "GPU_QUEUE", "mono-1", "monolithic"),
    timeline_line(90402, "GPU_PICKUP", "mono-1", "worker=1"),
    tracing_line("2026-03-02T10:01:30.500000Z", "FIN_TIMING finalizer monolithic",
                 {"worker_id": 1, "finish_ms": 5, "drop_res_ms": 0, "lock_wait_ms": 0, "process_ms": 2,
                  "total_ms": 7}),
    tracing_line("2026-03-02T10:01:30.600000Z", "FIN_TIMING malloc_trim (discard path)",
                 {"job_id": "mono-1", "partition": 3, "malloc_trim_ms": 4}),
]


def _calls(**kw):
    return [CallSpec(ntt_msm_h=n, prep_msm=pr, batch_add=b, tail_msm=t, synthesis=2500,
                     prestage=PRESTAGE[p] if p < len(PRESTAGE) else "", **kw)
            for p, (n, pr, b, t) in enumerate(zip(NTT, PREP, BATCH, TAIL, strict=True))]


@pytest.fixture(scope="module")
def written():
    return production_log(_calls(), workers=2, noise=2, seed=3)


@pytest.fixture(scope="module")
def log_text(written):
    return written.text + "\n".join(MONOLITHIC) + "\n"


def _pattern(fmt):
    """A format string as a regular expression: printf conversions and Rust {} match any value."""
    parts = re.split(r"(%ld|%zu|%d|\{\})", fmt)
    return "".join(r"-?\d+" if p.startswith("%") else r"[^,\n]*" if p == "{}" else re.escape(p)
                   for p in parts)


def test_every_format_string_is_in_the_log(log_text):
    for kind, fmt in FORMATS.items():
        assert re.search(_pattern(fmt), log_text), kind
    for message in TRACING:
        assert message in log_text, message


def test_every_line_kind_is_recognised(log_text):
    report = parse_cuzk_log(log_text, "daemon.log").meta["import"]
    noise = sum(1 for line in log_text.splitlines() if any(n in line for n in NOISE))
    assert report["skipped"] == {"not a cuzk timing line": noise}
    blank = sum(1 for line in log_text.splitlines() if not line.strip())
    assert report["kept"] + noise + blank == report["read"] == len(log_text.splitlines())
    assert set(report["figures"]) == set(TRACING)
    hot = report["figures"]["GPU_TIMING spawn_blocking prove_start"]
    assert hot["lines"] == len(NTT)


def _by_partition(trace, name, track_prefix=""):
    spans = trace.select(name=name, track_prefix=track_prefix)
    return {s.partition: s.duration_ns // 1_000_000 for s in spans}


def test_placed_spans_last_what_the_lines_say(written, log_text):
    trace = parse_cuzk_log(log_text, "daemon.log")
    truth = written.spans
    for name in ("ntt_msm_h", "barrier_wait", "batch_add", "tail_msm", "prep_msm", "b_g2_msm",
                 "split_vectors", "pre_lock_cpu"):
        want = {p: spans[name][1] - spans[name][0] for p, spans in truth.items()}
        got = _by_partition(trace, name, "worker/")
        assert got == want, name
    for name, key in (("hold", "mutex_hold"), ("wait", "mutex_wait")):
        assert _by_partition(trace, name, "mutex/") == {p: s[key][1] - s[key][0] for p, s in truth.items()}
    # split_vectors ends where setup_to_split says, from the start of the call.
    pre = {s.partition: s.start_ns for s in trace.select(name="pre_lock_cpu")}
    for s in trace.select(name="split_vectors"):
        p = s.partition
        assert (s.end_ns - pre[p]) // 1_000_000 == truth[p]["split_vectors"][1] - truth[p]["pre_lock_cpu"][0]
    # Holds start where the mutex was taken, on the worker that took it.
    holds = {s.partition: (s.start_ns // 1_000_000, s.worker) for s in trace.select(name="hold")}
    assert holds == {p: (s["mutex_hold"][0], written.worker[p]) for p, s in truth.items()}


def test_figure_lines_become_attributes(written, log_text):
    trace = parse_cuzk_log(log_text, "daemon.log")
    ntt = {s.partition: s.attrs or {} for s in trace.select(name="ntt_msm_h")}
    assert ntt[0]["d_a_cache_mib"] == 4096 and ntt[0]["pool_release_threshold"] == "MAX"
    assert all("d_a_cache_mib" not in a for p, a in ntt.items() if p)
    holds = {s.partition: s.attrs or {} for s in trace.select(name="hold")}
    assert holds[0]["prestage_setup"] == "ok" and holds[0]["prestage_domain"] == 1 << 27
    assert holds[1]["prestage_setup"] == "skip_vram" and holds[1]["prestage_free_mib"] == 80000
    assert holds[2]["prestage_setup"] == "fallback" and holds[2]["prestage_err"] == 2
    assert holds[3]["host_register"] == "fallback" and holds[3]["host_register_err"] == 712
    assert all("prestage_setup" not in a and "host_register" not in a for p, a in holds.items() if p > 3)
    finish = [s.attrs for s in trace.select(name="finish", track_prefix="worker/") if s.partition < len(NTT)]
    assert sorted(a["async_dealloc_ms"] for a in finish) == [60] * len(NTT)
    assert {s.attrs["num_circuits"] for s in trace.select(name="b_g2_msm")} == {1}


def test_monolithic_timeline_details_are_read(log_text):
    trace = parse_cuzk_log(log_text, "daemon.log")
    synth = [s for s in trace.select(name="synthesis") if s.duration_ns == 400 * 1_000_000]
    assert len(synth) == 1


def test_headline_on_the_seed_kind_of_log_names_ntt_msm_h_first():
    # The copies inside ntt_msm_h, which CUZK_NTT_H's parts do not name: ntt_kernels constant.
    log = production_log(_calls(ntt_kernels=300), workers=2, noise=1, seed=5).text
    verdict = diagnose(parse_cuzk_log(log, "seed.log"), DiagnoseOptions())
    headline = verdict.headline
    assert headline.startswith("ntt_msm_h"), headline
    swing = max(NTT) / min(NTT)
    assert f"swings {swing:.1f}x ({min(NTT)}-{max(NTT)} ms" in headline
    assert "100% of the variation in how long the mutex is held" in headline
    assert (f"batch_add and tail_msm stay constant (batch_add ~{statistics.median(BATCH):.0f} ms, "
            f"tail_msm ~{statistics.median(TAIL):.0f} ms)") in headline
    top = verdict.findings[0]
    assert top.numbers["carrier_swing"] == pytest.approx(swing)
    assert top.numbers["carrier_share"] > 0.9
    assert top.numbers["carrier_hold_variance_share"] > 0.95
    assert "variable_lock_phase" in verdict.ids


def test_odd_lines_are_skipped_with_their_line_numbers(written):
    lines = written.text.splitlines()
    odd = {5: "CUZK_TIMING: frobnicate_ms=3", 9: "CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=12x",
           14: "TIMELINE,abc,GPU_END,j,worker=0", 20: "TIMELINE,5,REBOOT,j,partition=1",
           25: "GPU_TIMING warp drive engaged x_ms=3", 30: "FIN_TIMING finalizer partition total_ms=zz",
           33: "CUZK_NTT_H: total=lots", 36: "CUZK_TIMING: prep_msm_ms=" + "9" * 5000,
           37: "TIMELINE," + "7" * 5000 + ",GPU_END,j,worker=0"}
    for at in sorted(odd):
        lines.insert(at - 1, odd[at])
    report = parse_cuzk_log("\n".join(lines)).meta["import"]
    where = report["skipped_lines"]
    reasons = {
        5: "CUZK_TIMING line of an unknown kind", 9: "CUZK_TIMING line with a malformed value",
        14: "malformed TIMELINE line", 20: "TIMELINE event of an unknown kind",
        25: "GPU_TIMING line of an unknown kind", 30: "FIN_TIMING line with a malformed value",
        33: "CUZK_NTT_H line with a malformed value", 36: "CUZK_TIMING line with a malformed value",
        37: "malformed TIMELINE line",
    }
    for at, reason in reasons.items():
        assert at in where[reason], (at, reason, where.get(reason))
        assert report["skipped"][reason] == sum(1 for r in reasons.values() if r == reason)


def test_a_file_with_nothing_usable_names_the_file(tmp_path):
    path = tmp_path / "empty-ish.log"
    path.write_bytes(b"\x00\xff garbage\nno timings here\n")
    with pytest.raises(ImportFailed, match=r"empty-ish\.log: no CUZK_TIMING.*2 lines"):
        load_cuzk_log(path)
    with pytest.raises(ImportFailed, match=r"missing\.log: cannot read"):
        load_cuzk_log(tmp_path / "missing.log")


REAL = production_log(_calls()[:4], workers=2, noise=1, seed=9).text.splitlines() + MONOLITHIC


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(REAL), st.text(max_size=80),
                          st.tuples(st.sampled_from(REAL), st.integers(0, 200), st.text(max_size=6))
                          .map(lambda t: t[0][:t[1]] + t[2] + t[0][t[1]:])), max_size=40),
       st.integers(0, 2**32))
def test_random_lines_give_a_trace_or_a_clear_refusal(lines, seed):
    random.Random(seed).shuffle(lines)
    text = "\n".join(lines)
    try:
        trace = parse_cuzk_log(text, "random.log")
    except ImportFailed as err:
        assert str(err).startswith("random.log: ")
        return
    report = trace.meta["import"]
    # Every line is kept or skipped under a reason, with where.
    rows = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []
    blank = sum(1 for row in rows if not ANSI.sub("", row.rstrip("\r")).strip())
    assert report["read"] == len(rows)
    assert report["kept"] + sum(report["skipped"].values()) + blank == len(rows)
    for reason, count in report["skipped"].items():
        assert report["first_at"][reason].startswith("line ")
        assert 0 < len(report["skipped_lines"][reason]) <= count
    diagnose(trace, DiagnoseOptions(whatif=False))


def test_each_span_names_the_line_its_figure_came_from(log_text):
    trace = parse_cuzk_log(log_text, "daemon.log")
    lines = log_text.splitlines()
    keys = {"ntt_msm_h": "ntt_msm_h_ms", "batch_add": "batch_add_ms", "tail_msm": "tail_msm_ms",
            "prep_msm": "prep_msm_ms", "b_g2_msm": "b_g2_msm_ms", "synthesis": "synth_ms",
            "split_vectors": "split_vectors_ms", "pre_lock_cpu": "pre_lock_cpu_ms", "hold": "mutex_held_ms",
            "ntt": "ntt_kernels", "msm_h": "msm_invoke", "coset_intt": "coset_intt_sync"}
    seen = set()
    for span in trace.iter_spans():
        line = (span.attrs or {}).get("line")
        if span.name == "wait":  # the mutex's wait, the GPU thread's at the barrier
            key = "mutex_wait_ms" if span.track.startswith("mutex/") else "barrier_wait_ms"
        elif span.name in keys:
            key = keys[span.name]
        else:
            continue
        if line is None:
            continue
        assert re.search(rf"\b{key}={span.duration_ns // 1_000_000}(ms)?\b", lines[line - 1]), (span, line)
        seen.add(key)
    assert seen == {*keys.values(), "mutex_wait_ms", "barrier_wait_ms"}
    placed = [s for s in trace.iter_spans() if s.name in keys and s.partition < len(NTT)]
    assert all("line" in (s.attrs or {}) for s in placed)
