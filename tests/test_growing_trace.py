"""A trace kept up to date by appending is the trace rebuilt from the recorder, at every look."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np

from workbench.analysis.summary import summarize
from workbench.config import RunConfig
from workbench.importers import load_any
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.trace.container import Trace
from workbench.trace.growing import GrowingTrace
from workbench.trace.recorder import Recorder
from workbench.viz.live_summary import RunningSummary
from workbench.viz.tables import summary_html

CASE_STUDY = Path(__file__).resolve().parents[1] / "notebooks/data/h200_2e22/zerocopy_t14_w2.wbtrace"


def decoded(trace: Trace) -> dict[str, list[object]]:
    """Every column by value (string ids differ between the two ways of building)."""
    text = trace.strings.values
    out: dict[str, list[object]] = {}
    for part in ("spans", "instants", "counters"):
        table = getattr(trace, part)
        for f in dataclasses.fields(table):
            column = getattr(table, f.name)
            values = list(column) if f.name == "attrs" else np.asarray(column).tolist()
            out[f"{part}.{f.name}"] = [text[i] for i in values] if f.name in ("track", "name") else values
    return out


def assert_same(grown: Trace, rebuilt: Trace) -> None:
    assert decoded(grown) == decoded(rebuilt)
    assert grown.meta == rebuilt.meta and grown.config == rebuilt.config
    assert grown.thread_names == rebuilt.thread_names
    assert grown.tracks() == rebuilt.tracks() and grown.time_range() == rebuilt.time_range()
    assert summarize(grown) == summarize(rebuilt)


class GatedBackend(CpuBackend):
    """Each partition's finish waits for the test to have looked once more, so the looks fall
    inside the run however fast the machine runs it (a free-running run of this size was over
    before a third look on a fast machine)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Semaphore(0)

    def finish(self, parts, partition, scope):
        # A bound, not a hang: a test that stops looking lets the run end by itself.
        self.gate.acquire(timeout=5.0)
        return super().finish(parts, partition, scope)


def test_a_trace_grown_while_a_real_run_records_equals_the_rebuild_and_so_does_the_running_summary():
    config = RunConfig(backend="cpu", partitions=12, log2_constraints=6)
    backend = GatedBackend()
    pipeline = Pipeline(config, backend)
    grown = GrowingTrace(pipeline.recorder, meta={"outcome": "running"})
    summary = RunningSummary(pipeline.recorder)
    pipeline.start()
    looks, earlier = 0, []
    while not pipeline.wait(0.01):
        if looks % 3 == 0:
            summary.html()
        # The rebuild first: the grown trace then holds at least as much (the run goes on).
        rebuilt = Trace.from_recorder(pipeline.recorder, meta={"outcome": "running"})
        now = grown.update()
        assert len(now.spans) >= len(rebuilt.spans)
        earlier.append((now, decoded(now)))
        looks += 1
        backend.gate.release()
    pipeline.result(0.0)
    final = grown.update()
    assert_same(final, Trace.from_recorder(pipeline.recorder, meta={"outcome": "running"}))
    assert looks >= 12 and len(final.spans) >= 12 * 15 and len(final.instants)
    # The running verdict under the live Gantt reads as the one rebuilt from every row.
    rebuilt = Trace.from_recorder(pipeline.recorder, meta={"outcome": "running"})
    rebuilt_html = summary_html(summarize(rebuilt))
    assert summary.html() == rebuilt_html and "running: 12 partitions" in rebuilt_html
    # A trace handed out earlier is unchanged by what was appended after it.
    for trace, columns in earlier:
        assert decoded(trace) == columns


def test_a_real_gpu_trace_fed_in_uneven_batches_grows_into_the_rebuild_counters_and_attrs_included():
    """The H200 case study's recording (kernels, copies with attributes, counters), its rows
    appended to a recorder in batches of uneven size, looked at after each batch."""
    source = load_any(CASE_STUDY)
    spans = sorted(source.iter_spans(), key=lambda s: s.end_ns)
    counters = sorted(source.iter_counters(), key=lambda c: c.ts_ns)
    instants = list(source.iter_instants())
    assert len(counters) and any(s.attrs for s in spans)
    recorder = Recorder(nvtx=False)
    grown = GrowingTrace(recorder)
    sizes = [1, 7, 300, 2, 1_000, 45]
    i = c = k = 0
    while i < len(spans) or c < len(counters):
        n = sizes[k % len(sizes)]
        recorder.spans.extend((s.track, s.name, s.start_ns, s.end_ns, s.partition, s.worker, s.attrs or None)
                              for s in spans[i:i + n])
        recorder.counters.extend((x.track, x.name, x.ts_ns, x.value) for x in counters[c:c + n // 3 + 1])
        if k == 2:
            recorder.instants.extend((x.track, x.name, x.ts_ns, x.partition, x.worker, x.attrs or None)
                                     for x in instants)
        i, c, k = i + n, c + n // 3 + 1, k + 1
        if k % 5 == 0:
            assert_same(grown.update(), Trace.from_recorder(recorder))
    final = grown.update()
    assert len(final.spans) == len(spans) and len(final.counters) == len(counters)
    assert_same(final, Trace.from_recorder(recorder))
    assert_same(grown.update(), Trace.from_recorder(recorder))  # nothing new: the same again
