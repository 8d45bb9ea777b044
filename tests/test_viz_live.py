"""The live view: drained on the UI side, streamed in batches, following the run."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from bokeh.document import Document

from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.trace.recorder import Recorder
from workbench.viz.lanes import expected_lanes
from workbench.viz.live import LiveView, Poller


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000_000

    def now_ns(self) -> int:
        return self.now


def test_a_live_run_ends_with_every_span_drawn_and_only_the_poller_touching_bokeh():
    config = RunConfig(backend="cpu", partitions=4, log2_constraints=6)
    pipeline = Pipeline(config, CpuBackend())
    live = LiveView(pipeline.recorder, expected_lanes(config.synth_threads, config.gpu_workers))
    document = Document()
    document.add_root(live.layout)
    touched_by: set[str] = set()
    document.on_change(lambda event: touched_by.add(threading.current_thread().name))
    finished = threading.Event()

    def tick() -> bool:
        if finished.is_set():
            live.update(final=True)
            return False
        live.update()
        return True

    poller = Poller(tick, period=0.02)
    poller.start()
    pipeline.start()
    pipeline.wait(60)
    trace = pipeline.result(0.0).trace
    finished.set()
    assert poller.join(10) and poller.error is None
    assert touched_by == {"workbench-live"}
    assert live.gantt.bar_count() == len(trace.spans)
    assert live.stats.spans == len(trace.spans) and live.stats.updates >= 2
    assert set(live.distributions.boxes.data["phase"]) >= {"synthesis", "ntt_msm_h", "finish"}
    assert live.gantt.lanes[:len(expected_lanes(2, 2))] == expected_lanes(2, 2)


def test_updates_stream_only_what_is_new_in_one_batch_per_source():
    clock = FakeClock()
    recorder = Recorder(clock=clock, nvtx=False)
    live = LiveView(recorder)
    pushes = []
    source = live.gantt.sources[0]
    source.on_change("data", lambda attr, old, new: pushes.append(len(new["left"])))
    for i in range(250):
        recorder.add_span("synth/0", "synthesis", clock.now + i * 10, clock.now + i * 10 + 5, i)
    assert live.update() == 250
    assert live.update() == 0
    recorder.add_span("synth/1", "synthesis", clock.now, clock.now + 5, 999)
    assert live.update() == 1
    assert live.gantt.bar_count() == 251
    assert len(pushes) == 2  # one stream per update that had bars at this depth


def test_the_view_follows_the_run_until_someone_zooms():
    clock = FakeClock()
    recorder = Recorder(clock=clock, nvtx=False)
    live = LiveView(recorder)
    x_range = live.gantt.figure.x_range
    clock.now += 2_000_000_000
    live.update()
    assert x_range.start == 0.0 and x_range.end == pytest.approx(2.5)  # a step ahead of the run
    clock.now += 400_000_000
    live.update()
    assert x_range.end == pytest.approx(2.5)  # within the step: the axis (and its figures) unchanged
    clock.now += 1_600_000_000
    live.update()
    assert x_range.end == pytest.approx(5.0)
    x_range.start, x_range.end = 1.0, 1.5  # a person zooms in
    clock.now += 2_000_000_000
    live.update()
    assert not live.following and (x_range.start, x_range.end) == (1.0, 1.5)


def test_counters_appear_when_samples_arrive():
    recorder = Recorder(nvtx=False)
    live = LiveView(recorder)
    assert not live.counters.layout.visible
    recorder.counter("nvml/gpu0", "pcie_tx_bytes_s", 12e9)
    live.update()
    assert live.counters.layout.visible and list(live.counters.figures) == ["GB/s"]
    assert live.counters.sources["GB/s"].data["value"][0] == pytest.approx(12.0)
    # A series in another unit arriving mid-run gets a figure of its own, above (percent first).
    recorder.counter("nvml/gpu0", "utilization_gpu", 75.0)
    live.update()
    assert [f.yaxis[0].axis_label for f in live.counters.layout.children] == ["percent", "GB/s"]
    assert live.counters.sources["%"].data["value"] == [75.0]


def test_a_failing_tick_ends_polling_and_keeps_the_error():
    def tick() -> bool:
        raise RuntimeError("view broke")

    poller = Poller(tick, period=0.01)
    poller.start()
    assert poller.join(5)
    assert isinstance(poller.error, RuntimeError) and not poller.alive


def test_the_live_legend_names_the_kernels_that_took_longest_so_far_not_the_first_to_arrive():
    """The H200 case study's spans (kernels included), fed in the order they ended: the six
    kernels with the most time have entries of their own, every other kernel's bars, those
    drawn before the ranking changed too, are "other kernels"."""
    import re
    from pathlib import Path

    from workbench.importers import load_any
    from workbench.viz.lanes import readable

    data = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "h200_2e22"
    trace = load_any(data / "pageable_t14_w2.wbtrace")
    spans = sorted(trace.iter_spans(), key=lambda s: s.end_ns)
    kernel_ns: dict[str, int] = {}
    arrival: list[str] = []
    for s in spans:
        if re.fullmatch(r"gpu\d+/stream/\d+", s.track):
            name = readable(s.name)
            kernel_ns[name] = kernel_ns.get(name, 0) + s.end_ns - s.start_ns
            if name not in arrival:
                arrival.append(name)
    top = set(sorted(kernel_ns, key=lambda k: -kernel_ns[k])[:6])
    assert top != set(arrival[:6])  # else this test could not tell the two apart

    recorder = Recorder(nvtx=False)
    live = LiveView(recorder, [])
    shift = recorder.origin_ns - spans[0].start_ns
    for k in range(0, len(spans), 300):
        recorder.spans.extend((s.track, s.name, s.start_ns + shift, s.end_ns + shift, s.partition, s.worker,
                               s.attrs or None) for s in spans[k:k + 300])
        live.update()
    live.update(final=True)
    shown = {item.label.value for item in live.gantt.legend.items if item.visible}
    assert shown & set(kernel_ns) == top and "other kernels" in shown
    for source in live.gantt.sources:
        for phase, kind in zip(source.data["phase"], source.data["kind"], strict=True):
            if phase in kernel_ns and kind in (phase, "other kernels"):  # a kernel's bar
                assert kind == (phase if phase in top else "other kernels"), (phase, kind)


def test_a_live_view_before_any_sample_passes_bokehs_own_checks_without_a_warning():
    from bokeh.core.validation import check_integrity

    live = LiveView(Recorder(nvtx=False), expected_lanes(2, 2))
    document = Document()
    document.add_root(live.layout)
    issues = check_integrity(list(document.models))
    assert not issues.warning and not issues.error, issues


def test_past_its_cap_the_live_gantt_bins_the_oldest_spans_and_accounts_for_every_one():
    """A real run's spans, tiled to 9,000 and fed in the order they ended: the browser's
    sources hold at most LIVE_BARS bars, the newest span by span, the rest in bins whose
    counts add up, with the span-level ones, to every span fed."""
    import re

    from workbench.pipeline.run import run_pipeline
    from workbench.viz import live as live_module

    trace = run_pipeline(RunConfig(backend="cpu", partitions=8, log2_constraints=6)).trace
    base = list(trace.iter_spans())
    first, last = trace.time_range()
    rows = []
    k = 0
    while len(rows) < 9_000:
        shift = k * (last - first) - first
        rows += [(s.track, s.name, s.start_ns + shift, s.end_ns + shift, s.partition + 8 * k, s.worker,
                  s.attrs or None) for s in base]
        k += 1
    rows = sorted(rows[:9_000], key=lambda r: r[3])
    recorder = Recorder(nvtx=False)
    live = LiveView(recorder, expected_lanes(2, 2))
    for i in range(0, len(rows), 250):
        recorder.spans.extend((t, n, s + recorder.origin_ns, e + recorder.origin_ns, p, w, a)
                              for t, n, s, e, p, w, a in rows[i:i + 250])
        live.update()
        assert live.gantt.bar_count() <= live_module.LIVE_BARS
    live.update(final=True)
    assert live.compactions >= 1 and live.stats.spans == 9_000
    binned = span_level = 0
    for source in live.gantt.sources:
        for detail in source.data["detail"]:
            found = re.match(r"(\d+) spans start here", str(detail))
            if found:
                binned += int(found.group(1))
            else:
                span_level += 1
    assert binned + span_level == 9_000
    assert span_level >= live_module.RECENT_BARS
    newest = max(range(len(rows)), key=lambda i: rows[i][3])
    assert rows[newest][4] in {p for s in live.gantt.sources for p in s.data["partition"]}  # span by span
    assert "binned" in live.gantt.figure.title.text
