"""What the Gantt's interrogation is built from, checked without a browser: a partition's story,
the lane groups, the level-of-detail store and a notebook's re-query on range change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from bokeh.models import ColumnDataSource

from workbench.importers import load_any
from workbench.viz.bars import origin_of, trace_bars
from workbench.viz.lanes import lane_group, lane_sort_key
from workbench.viz.levels import in_view, store_source
from workbench.viz.story import stories
from workbench.viz.timeline import gantt_figure

DATA = Path(__file__).parent / "data"
RUN = DATA / "whatif" / "w2.wbtrace"  # a recorded pipeline run: 8 partitions, 2 GPU workers
NSYS = DATA / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"


def sources(layout) -> dict[str, ColumnDataSource]:
    return {s.name: s for s in layout.select({"type": ColumnDataSource}) if s.name}


def test_each_partitions_story_holds_all_its_spans_and_its_time_in_the_queue():
    trace = load_any(RUN)
    origin = origin_of(trace)
    steps, notes = stories(trace, trace_bars(trace, origin), origin)
    for p in sorted(set(trace.spans.partition.tolist()) - {-1}):
        mine = sorted(s.duration_ns / 1e6 for s in trace.iter_spans() if s.partition == p)
        told = [(step, ms) for q, step, ms in zip(steps["partition"], steps["step"], steps["duration_ms"],
                                                  strict=True) if q == p]
        assert sorted(ms for step, ms in told if step != "queue") == pytest.approx(mine)
        assert [step for step, _ in told].count("queue") == 1
        first = next(text for q, text in zip(notes["partition"], notes["text"], strict=True) if q == p)
        extent = [s for s in trace.iter_spans() if s.partition == p]
        total = (max(s.end_ns for s in extent) - min(s.start_ns for s in extent)) / 1e6
        assert first.startswith(f"partition {p}: {total:.1f} ms from its first step to its last")


def test_a_foreign_trace_gets_no_story_and_no_pipeline_words():
    layout = gantt_figure(load_any(NSYS))
    found = sources(layout)
    assert not found["gantt_story"].data["partition"] and not found["gantt_notes"].data["text"]


def test_lane_groups_keep_a_worker_a_gpu_and_a_thread_together():
    lanes = ["os/thread/7", "gpu0 stream 7", "cuda/thread/7", "thread/9", "worker 1 prep", "worker 1",
             "cuda/thread/9", "thread/7", "gpu0 copy", "synth 0"]
    ordered = sorted(lanes, key=lane_sort_key)
    groups = [lane_group(lane) for lane in ordered]
    # Each group's lanes are next to each other, so it collapses as one block.
    for g in groups:
        assert groups[groups.index(g):groups.index(g) + groups.count(g)] == [g] * groups.count(g)
    assert lane_group("cuda/thread/7") == lane_group("thread/7") == lane_group("os/thread/7") == "thread 7"
    assert lane_group("worker 1 prep") == "worker 1" and lane_group("gpu0 copy") == "gpu0"
    assert lane_group("gpu1 worker 2 mutex hold") == "gpu1 worker 2"


def test_the_store_keeps_every_span_with_its_words_and_the_window_is_what_overlaps():
    trace = load_any(NSYS)
    bars = trace_bars(trace)
    store, cut = store_source(bars, "g")
    assert cut is None
    names, data = store.tags[0], store.data
    assert len(data["left"]) == len(trace.spans) and np.all(np.diff(data["left"]) >= 0)
    decoded = sorted(zip([names["lane"][c] for c in data["lane"]], [names["phase"][c] for c in data["phase"]],
                         data["left"].tolist(), strict=True))
    assert decoded == sorted(zip(bars.lane.tolist(), bars.phase.tolist(), bars.left.tolist(), strict=True))
    origin = origin_of(trace)
    start, end = 0.6, 0.61
    overlapping = sum(1 for s in trace.iter_spans()
                      if (s.end_ns - origin) / 1e9 >= start and (s.start_ns - origin) / 1e9 <= end)
    order = np.argsort(bars.left, kind="stable")
    shown, total = in_view(bars, order, start, end, budget=10**6)
    assert total == len(shown) == overlapping > 0
    longest, total = in_view(bars, order, start, end, budget=5)
    assert total == overlapping and len(longest) == 5
    assert longest.duration_ms.min() >= np.sort(shown.duration_ms)[-5]


def test_a_notebook_detail_view_asks_for_the_spans_in_its_range():
    trace = load_any(DATA / "whatif" / "g2w2.wbtrace")
    layout = gantt_figure(trace, max_bars=100, requery=True)
    found = sources(layout)
    assert "gantt_store" not in found  # the notebook carries no store
    detail = next(f for f in layout.children if getattr(f, "name", None) is None and hasattr(f, "x_range")
                  and f.title.text.startswith("detail"))
    origin = origin_of(trace)
    last = max(trace.iter_spans(), key=lambda s: s.start_ns)
    start, end = (last.start_ns - origin) / 1e9 - 0.01, (last.end_ns - origin) / 1e9
    detail.x_range.start, detail.x_range.end = start, end
    drawn = sum(len(found[f"gantt_bars_{d}"].data["left"]) for d in range(3))
    expected = sum(1 for s in trace.iter_spans()
                   if (s.end_ns - origin) / 1e9 >= start and (s.start_ns - origin) / 1e9 <= end)
    assert 0 < expected <= 50 and drawn == expected  # 50: the detail's budget, half of max_bars
    partitions = {int(p) for d in range(3) for p in found[f"gantt_bars_{d}"].data["partition"]}
    assert last.partition in partitions and "all" in detail.title.text


def test_a_notebooks_kernel_answers_a_box_and_a_search_over_every_span_not_only_those_drawn():
    from bokeh.events import SelectionGeometry
    from bokeh.models import Div, TextInput

    trace = load_any(RUN)
    layout = gantt_figure(trace, max_bars=100, requery=True)
    panels = {m.name: m for m in layout.select({"type": Div}) if m.name}
    overview, detail = [f for f in layout.children if hasattr(f, "x_range")][:2]
    drawn = sum(len(sources(layout)[f"gantt_bars_{d}"].data["left"]) for d in range(3))
    origin = trace.meta["origin_ns"]
    x0, x1 = 0.25, 1e3
    box = SelectionGeometry(overview, geometry={"type": "rect", "x0": x1, "x1": x0}, final=True)
    overview._trigger_event(box)
    answer = panels["gantt_range"].tags[0]
    inside = [s for s in trace.iter_spans()
              if (s.end_ns - origin) / 1e9 >= x0 and (s.start_ns - origin) / 1e9 <= x1]
    assert answer["spans"] == len(inside) > drawn
    sizes = [s.attrs["bytes"] for s in inside if isinstance(s.attrs.get("bytes"), int)]
    assert answer["bytes"] == sum(sizes) > 0
    holds = [s for s in inside if s.track == "mutex/gpu0" and s.name == "hold"]
    held = sum(s.end_ns - max(s.start_ns, origin + x0 * 1e9) for s in holds)  # holds never overlap
    assert answer["kinds"]["mutex_hold"] == [len(holds), pytest.approx(held / 1e9)]
    # A search counts every span, and Enter moves the detail view to the next match, whose spans
    # the kernel then draws.
    last = max(trace.spans.partition.tolist())
    search = next(iter(layout.select({"type": TextInput})))
    detail.x_range.start, detail.x_range.end = 0.0, 0.01
    search.value_input = search.value = f"partition {last}"
    found = panels["gantt_matches"].tags[0]
    assert found["count"] == sum(1 for s in trace.iter_spans() if s.partition == last)
    mine = [s for s in trace.iter_spans() if s.partition == last]
    assert found["first"] == pytest.approx((min(s.start_ns for s in mine) - origin) / 1e9)
    assert detail.x_range.start <= found["first"] <= detail.x_range.end
    assert last in {int(p) for d in range(3) for p in sources(layout)[f"gantt_bars_{d}"].data["partition"]}


def test_a_notebooks_kernel_tells_a_clicked_spans_thread_context_from_spans_not_drawn():
    from bokeh.models import Div

    trace = load_any(NSYS)
    layout = gantt_figure(trace, max_bars=60, requery=True)  # the detail draws the 30 longest in view
    found = sources(layout)
    detail = next(f for f in layout.children if hasattr(f, "x_range") and f.title.text.startswith("detail"))
    origin = trace.meta.get("origin_ns", trace.time_range()[0])
    spans = list(trace.iter_spans())
    call = max((s for s in spans if s.track.startswith("cuda/thread/")), key=lambda s: s.duration_ns)
    detail.x_range.start, detail.x_range.end = (call.start_ns - origin) / 1e9, (call.end_ns - origin) / 1e9
    drawn = [(d, i) for d in range(3) for i in range(len(found[f"gantt_bars_{d}"].data["left"]))]

    def cell(d: int, i: int, c: str):
        value = found[f"gantt_bars_{d}"].data[c][i]
        return value.item() if hasattr(value, "item") else value

    d, i = max(drawn, key=lambda di: cell(*di, "right") - cell(*di, "left"))
    assert cell(d, i, "lane").startswith("cuda")
    # The OS calls of its thread running at its midpoint, from the trace's own rows.
    thread = call.track.removeprefix("cuda/")
    mid = (call.start_ns + call.end_ns) / 2
    then = sorted((s.name, s.duration_ns / 1e6) for s in spans
                  if s.track == f"os/{thread}" and s.start_ns <= mid <= s.end_ns)
    shown = {(cell(e, j, "phase"), round(cell(e, j, "duration_ms"), 6)) for e, j in drawn}
    assert then and not any((name, round(ms, 6)) in shown for name, ms in then)  # none of them drawn
    # The page asks as js/details.js does, with the clicked bar's columns.
    asked = {c: cell(d, i, c) for c in ("phase", "lane", "left", "right", "partition")}
    found["gantt_ask"].tags = [{**asked, "seq": "1"}]
    answer = next(m for m in layout.select({"type": Div}) if m.name == "gantt_details").tags[0]
    assert answer["phase"] == asked["phase"] and "steps" not in answer
    assert sorted((name, pytest.approx(ms)) for name, _, ms in answer["around"]) == then
    assert all(thread.split("/")[-1] in lane for _, lane, _ in answer["around"])
