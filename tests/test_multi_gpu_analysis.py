"""Analysis of runs on several GPUs: findings per GPU, the whole run, host memory contention
between GPUs' copies, and Gantt lanes grouped by GPU."""

import re

import pytest
from golden import CASES, Spec, build, contended

from workbench.analysis import DiagnoseOptions, diagnose
from workbench.analysis.contention import host_contention
from workbench.analysis.verdict import gpu_trace
from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.render.verdict_text import render_verdict
from workbench.trace.container import Trace

MS = 1_000_000
NO_WHATIF = DiagnoseOptions(whatif=False)


@pytest.fixture(scope="module")
def two_gpu_run() -> Trace:
    config = RunConfig(backend="cpu", gpus=2, gpu_workers=2, log2_constraints=6, partitions=12,
                       memory_mode="pageable")
    result = Pipeline(config, CpuBackend()).run()
    assert result.ok, result.error
    return result.trace


def contended_copies(rounds: int = 8) -> Trace:
    """Two GPUs, one worker each. GPU 0 copies at the start of every round; GPU 1 copies at
    the same moment in even rounds and half a round later in odd ones. Copies running
    together share host memory at 2 GB/s each; alone one copies at 8 GB/s."""
    spans, instants = [], []
    vector_bytes = 400_000_000
    for k in range(rounds):
        for gpu in (0, 1):
            p, w = 2 * k + gpu, gpu
            start = k * 2000 * MS + (1000 * MS if gpu == 1 and k % 2 else 0)
            gbps = 2.0 if k % 2 == 0 else 8.0
            track = f"worker/{w}"
            spans.append((f"synth/{gpu}", "synthesis", start - 600 * MS, start - 100 * MS, p, -1, None))
            spans.append((f"mutex/gpu{gpu}", "wait", start, start, p, w, None))
            at = start
            for vector in "abc":
                end = at + int(vector_bytes / gbps)
                spans.append((track, "h2d_copy", at, end, p, w,
                              {"vector": vector, "bytes": vector_bytes, "source": "pageable"}))
                at = end
            for name, ms in (("ntt", 200), ("coset_intt", 50), ("msm_h", 100)):
                spans.append((track, name, at, at + ms * MS, p, w, None))
                at += ms * MS
            spans.append((track, "ntt_msm_h", start, at, p, w, None))
            for name, ms in (("batch_add", 80), ("tail_msm", 40)):
                spans.append((track, name, at, at + ms * MS, p, w, None))
                at += ms * MS
            spans.append((f"mutex/gpu{gpu}", "hold", start, at, p, w, None))
            spans.append((track, "finish", at, at + 20 * MS, p, w, None))
    end = max(s[3] for s in spans)
    instants += [("run", "run_start", -1000 * MS, -1, -1, None), ("run", "run_end", end, -1, -1, None)]
    config = {"backend": "gpu", "gpus": 2, "gpu_workers": 1, "memory_mode": "pageable",
              "lock_scope": "coarse", "partitions": 2 * rounds, "synth_threads": 2}
    meta = {"outcome": "completed", "gpus": 2, "worker_gpu": {"0": 0, "1": 1}}
    return Trace.from_rows(spans, instants, (), config, meta)


def merged(a: Spec, b: Spec) -> Trace:
    """Two golden runs side by side as one run on two GPUs: `a` on GPU 0, `b` on GPU 1."""
    ta, tb = build(a), build(b)

    def moved(track: str) -> str:
        track = re.sub(r"^(mutex/gpu|gpu|nvml/gpu)0(?=/|$)", r"\g<1>1", track)
        track = re.sub(r"^(worker/|barrier/worker)(\d+)",
                       lambda m: f"{m.group(1)}{int(m.group(2)) + a.workers}", track)
        return re.sub(r"^synth/(\d+)$", lambda m: f"synth/{int(m.group(1)) + a.synth_threads}", track)

    spans = [(s.track, s.name, s.start_ns, s.end_ns, s.partition, s.worker, s.attrs or None)
             for s in ta.iter_spans()]
    spans += [(moved(s.track), s.name, s.start_ns, s.end_ns,
               s.partition + a.partitions if s.partition >= 0 else -1,
               s.worker + a.workers if s.worker >= 0 else -1, s.attrs or None) for s in tb.iter_spans()]
    instants = [(i.track, i.name, i.ts_ns, i.partition, i.worker, i.attrs or None)
                for i in ta.iter_instants() if i.track != "run"]
    instants += [(moved(i.track), i.name, i.ts_ns, i.partition + a.partitions if i.partition >= 0 else -1,
                  i.worker + a.workers if i.worker >= 0 else -1, i.attrs or None)
                 for i in tb.iter_instants() if i.track != "run"]
    end = max(s[3] for s in spans)
    instants += [("run", "run_start", 0, -1, -1, None), ("run", "run_end", end, -1, -1, None)]
    counters = [(c.track, c.name, c.ts_ns, c.value) for c in ta.iter_counters()]
    counters += [(moved(c.track), c.name, c.ts_ns, c.value) for c in tb.iter_counters()]
    workers = {str(w): 0 for w in range(a.workers)} | {str(a.workers + w): 1 for w in range(b.workers)}
    config = {**ta.config, "gpus": 2}
    return Trace.from_rows(spans, instants, counters, config,
                           {"outcome": "completed", "gpus": 2, "worker_gpu": workers})


def test_contention_sets_each_copy_against_the_other_gpus_copies():
    c = host_contention(contended_copies())
    assert c is not None and c.gpus == (0, 1)
    assert c.overlapping == 24  # both GPUs' copies in the 4 even rounds
    assert [g.overlapping for g in c.per_gpu] == [12, 12]
    assert c.alone_gbps == pytest.approx(8.0, rel=1e-3)
    assert c.concurrent_gbps == pytest.approx(2.0, rel=1e-3)
    assert c.slowdown == pytest.approx(0.75, rel=1e-3)
    assert c.other_gpu_correlation is not None and c.other_gpu_correlation < -0.9
    assert c.synth_correlation is None  # synthesis never runs during a copy here
    assert c.pageable_overlap_ms == pytest.approx(4 * 600, rel=1e-3)
    # Beyond the lone rate: each overlapped copy took 200 ms where 50 would do.
    assert c.excess_ms == pytest.approx(24 * 150, rel=1e-3)
    assert all(c.copies[[x.span for x in c.copies].index(i)].other_gpu_copies > 0 for i in c.slowest)


def test_contention_needs_copies_on_two_gpus(two_gpu_run):
    one_gpu, _ = gpu_trace(two_gpu_run, 1)
    assert host_contention(one_gpu) is None
    assert host_contention(build(CASES["copy_bound"])) is None


def test_contention_finding_fires_on_the_evidence():
    trace = contended_copies()
    verdict = diagnose(trace, NO_WHATIF)
    finding = verdict.get("host_contention")
    assert finding is not None, verdict.ids
    assert finding.numbers["slowdown"] == pytest.approx(0.75, rel=1e-3)
    assert "2.0 GB/s (median) against 8.0 GB/s alone, 75% slower" in finding.sentence
    assert {trace.span(i).name for i in finding.evidence.spans} == {"h2d_copy"}
    assert verdict.contention is not None and verdict.multi_gpu
    text = render_verdict(verdict, trace)
    assert "copies by GPU" in text and "24 copies overlapped another GPU's copy" in text


def test_findings_name_the_gpu_they_concern():
    # GPU 0 copies small pinned buffers; GPU 1 copies pageable ones slowed by synthesis.
    fast = CASES["balanced"]
    slow = Spec(partitions=12, synth_threads=14, source="pageable", copy_gbps=contended,
                synth_ms=lambda p: 3000.0 * (p + 1), prep_ms=lambda p: 1500.0, ntt_ms=1100.0)
    trace = merged(fast, slow)
    verdict = diagnose(trace, DiagnoseOptions(link_gbps=50, whatif=False))
    assert verdict.on_gpu("copy_bound", 1) is not None, verdict.ids
    assert verdict.on_gpu("copy_bound", 0) is None
    copy = verdict.get("copy_bound")
    assert copy is verdict.on_gpu("copy_bound", 1)
    assert copy.title.startswith("GPU 1: ") and copy.sentence.startswith("On GPU 1, ")
    assert copy.numbers["gpu"] == 1.0
    # Cost is GPU 1's share spread over both GPUs; evidence points into the whole trace.
    assert copy.cost == pytest.approx(copy.numbers["gpu_cost"] / 2)
    assert {trace.span(i).track for i in copy.evidence.spans} <= {"worker/2", "worker/3", "mutex/gpu1"}
    for f in verdict.findings:
        if "/gpu" in f.id:
            gpu = f.id.rsplit("/gpu", 1)[1]
            assert f.title.startswith(f"GPU {gpu}: "), f.title
    assert [g.gpu for g in verdict.gpus] == [0, 1]
    assert [g.partitions for g in verdict.gpus] == [12, 12]


def test_imbalance_between_gpus_is_a_finding():
    busy = CASES["balanced"]
    starved = Spec(synth_threads=1, synth_ms=lambda p: 6000.0, partitions=4)
    verdict = diagnose(merged(busy, starved), NO_WHATIF)
    finding = verdict.get("gpu_imbalance")
    assert finding is not None, verdict.ids
    assert finding.numbers["busiest_gpu"] == 0 and finding.numbers["idlest_gpu"] == 1
    assert finding.numbers["busiest_busy"] - finding.numbers["idlest_busy"] >= 0.25
    assert "GPU 1 computes" in finding.sentence
