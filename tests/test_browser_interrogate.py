"""Interrogating the Gantt in a real browser: a click opens a span's details (a partition's
whole story, or a foreign span's thread context), a box over a time range gives what is in it,
the search finds a partition, flow arrows join each release to the next acquire, a lane group
collapses, the keys zoom and pan, and a large report reaches any span at full zoom.

Expected values come from the trace files themselves (SQL over the nsys export, the spans of
our own run), never from the page's own numbers. Like test_browser.py: Debian's chromium
through Playwright, skipped with the reason where either is missing.
"""

from __future__ import annotations

import itertools
import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    LEGEND_JS,
    PLOT_JS,
    boxes_overlapping,
    layout_boxes,
    open_offline,
    pixel,
    playwright_api,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
NSYS = ROOT / "tests" / "data" / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"
RUN = ROOT / "tests" / "data" / "whatif" / "w2.wbtrace"
STUDY = ROOT / "notebooks" / "data" / "h200_2e22" / "pageable_t14_w2.wbtrace"

# Where on screen a bar is, found by what it is: its phase, and its partition (or lane).
BAR_JS = """([name, phase, partition, lane]) => {
  const pv = wbPlot(name);
  pv.el.scrollIntoView({block: "center"});
  const box = pv.canvas.el.getBoundingClientRect();
  for (let d = 0; d < 3; d++) {
    const s = wbModel(name + "_bars_" + d).data;
    let best = -1;
    for (let i = 0; i < s.left.length; i++) {
      if (s.phase[i] !== phase || (partition !== null && Number(s.partition[i]) !== partition)) continue;
      if (lane !== null && s.lane[i] !== lane) continue;
      if (best < 0 || s.right[i] - s.left[i] > s.right[best] - s.left[best]) best = i;
    }
    if (best < 0) continue;
    const lanes = [...pv.model.left[0].major_label_overrides.entries()].find(([, l]) => l === s.lane[best]);
    const y = Number(lanes[0]);
    return {x: box.left + pv.frame.x_scale.compute((s.left[best] + s.right[best]) / 2),
            y: box.top + pv.frame.y_scale.compute(y), left: s.left[best], right: s.right[best],
            lane: s.lane[best]};
  }
  return null;
}"""


@pytest.fixture(scope="module")
def browser() -> Any:
    with playwright_api.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def page(browser) -> Any:
    """One page for the module: a report already open is not loaded again (a test that changes
    what is shown puts it back)."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.on("pageerror", lambda e: page.console_errors.append(f"{e}\n{e.stack}"))
    yield page
    page.close()


@pytest.fixture(scope="module")
def run_trace() -> Any:
    """A recorded run of the pipeline: 8 partitions, 2 GPU workers sharing one mutex."""
    from workbench.importers import load_any

    return load_any(RUN)


@pytest.fixture(scope="module")
def run_report(run_trace, tmp_path_factory) -> Path:
    from workbench.viz.report import render_report

    path = tmp_path_factory.mktemp("interrogate") / "run.html"
    path.write_text(render_report(run_trace), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def nsys_report(tmp_path_factory) -> Path:
    from workbench.importers import load_any
    from workbench.viz.report import render_report

    path = tmp_path_factory.mktemp("interrogate") / "nsys.html"
    path.write_text(render_report(load_any(NSYS), verdict=False), encoding="utf-8")
    return path


def shot(page: Any, name: str, figure: str = "gantt") -> None:
    """The chart at the top of the window, its panels under it."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.evaluate(f"() => wbPlot('{figure}').el.scrollIntoView({{block: 'start'}})")
    page.screenshot(path=str(ARTIFACTS / f"interrogate-{name}.png"))


def opened(page: Any, path: Path, timeout_ms: int = 30_000) -> None:
    page.console_errors.clear()
    if page.url == path.as_uri():
        page.evaluate("() => window.scrollTo(0, 0)")
        return
    page.unroute("**/*")
    assert not open_offline(page, path, timeout_ms)
    page.evaluate(PLOT_JS)


def details(page: Any, name: str = "gantt") -> str:
    return page.evaluate(f"() => wbModel('{name}_details').text")


def idle(page: Any) -> None:
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)")


def ms(ns: int) -> str:
    """A duration as the panel writes it (js/common.js: wb.ms)."""
    v = ns / 1e6
    return f"{v / 1000:.3f} s" if v >= 1000 else f"{v:.2f} ms" if v >= 1 else f"{v * 1000:.1f} µs"


def test_clicking_a_span_opens_its_partitions_whole_story(page, run_trace, run_report):
    from workbench.analysis.verdict import diagnose

    opened(page, run_report)
    where = page.evaluate(BAR_JS, ["gantt", "mutex_wait", 2, None])
    page.mouse.click(where["x"], where["y"])
    page.wait_for_function("() => wbModel('gantt_details').text.includes('partition 2')")
    text = details(page)
    assert "<b>mutex_wait</b>" in text
    steps = re.findall(r"<tr class=\"(wb-here)?\"><td>(?:&nbsp;)*([^<]+)</td><td>([^<]+)</td><td>[^<]+</td>"
                       r"<td>([^<]+)</td>", text)
    mine = sorted((s for s in run_trace.iter_spans() if s.partition == 2), key=lambda s: s.start_ns)
    # Every span of the partition is a step, with its duration, plus its time in the queue.
    assert len(steps) == len(mine) + 1
    queue = next(d for _, step, _, d in steps if step == "queue")
    assert sorted(d for _, _, _, d in steps) == sorted([ms(s.duration_ns) for s in mine] + [queue])
    names = [step for _, step, _, _ in steps]
    for phase in ("synthesis", "queue", "mutex_wait", "mutex_hold", "ntt_msm_h", "barrier_wait", "finish"):
        assert phase in names
    assert names.index("synthesis") < names.index("queue") < names.index("mutex_hold") < names.index("finish")
    assert [here for here, step, _, _ in steps if step == "mutex_wait"] == ["wb-here"]
    inst = run_trace.instants
    queued = [int(inst.ts_ns[i]) for i in range(len(inst.ts_ns))
              if inst.partition[i] == 2 and run_trace.strings.values[inst.name[i]] == "queued"]
    picked = [int(inst.ts_ns[i]) for i in range(len(inst.ts_ns))
              if inst.partition[i] == 2 and run_trace.strings.values[inst.name[i]] == "pickup"]
    assert queue == ms(picked[0] - queued[0])
    # The verdict's words about it: each finding whose evidence names partition 2.
    for finding in diagnose(run_trace).findings:
        if 2 in finding.evidence.partitions:
            assert f"verdict: {finding.title}".replace("&", "&amp;").replace("<", "&lt;") in text
    shot(page, "details-partition")
    assert not page.console_errors


def test_a_partitions_details_carry_the_verdicts_words_about_it(page, tmp_path):
    """The run above has no finding that names a partition; this trace's findings name some
    partitions and not others (tests/golden.py): a click on a bar of one named tells each
    finding's title, a click on one named by none tells no verdict."""
    from golden import case

    from workbench.analysis.verdict import diagnose
    from workbench.viz.report import render_report

    trace = case("copy_bound")
    findings = diagnose(trace).findings
    named = {p: [f.title for f in findings if p in f.evidence.partitions]
             for p in set(trace.spans.partition.tolist()) if p >= 0}
    both = max(named, key=lambda p: (len(named[p]), -p))
    none = min(p for p, titles in named.items() if not titles)
    assert len(named[both]) >= 2
    path = tmp_path / "findings.html"
    path.write_text(render_report(trace), encoding="utf-8")
    opened(page, path)
    page.locator(".bk-btn", has_text="flow arrows").first.click()  # no arrow across the bars' pixels
    page.wait_for_function("() => !wbModel('gantt|flows').visible")
    idle(page)
    for p in (both, none):
        where = page.evaluate(BAR_JS, ["gantt", "finish", p, None])
        page.wait_for_timeout(600)  # a click right after the last one went unanswered here (a double tap)
        page.mouse.click(where["x"], where["y"])
        page.wait_for_function(f"() => wbModel('gantt_details').text.includes('partition {p}:')")
        text = details(page)
        escaped = [t.replace("&", "&amp;").replace("<", "&lt;") for t in named[p]]
        assert text.count("verdict: ") == len(escaped), (p, text)
        assert all(f"verdict: {title}" in text for title in escaped), (p, text)
    assert not page.console_errors


def test_search_finds_a_partition_and_dims_the_rest(page, run_trace, run_report):
    from workbench.viz.palette import PHASE_COLORS

    opened(page, run_report)
    page.locator(".bk-btn", has_text="flow arrows").first.click()  # no arrow across the bars' pixels
    page.wait_for_function("() => !wbModel('gantt|flows').visible")
    idle(page)
    other = page.evaluate(BAR_JS, ["gantt", "synthesis", 1, None])
    mine = page.evaluate(BAR_JS, ["gantt", "synthesis", 3, None])
    colour = tuple(int(PHASE_COLORS["synthesis"][k:k + 2], 16) for k in (1, 3, 5))
    assert pixel(page, other["x"], other["y"]) == colour
    search = page.locator(".bk-TextInput input").first
    search.fill("partition 3")
    page.wait_for_function("() => wbModel('gantt_matches').text.includes('match')")
    expected = sum(1 for s in run_trace.iter_spans() if s.partition == 3)
    assert page.evaluate("() => wbModel('gantt_matches').text").startswith(f"{expected} matches")
    idle(page)
    assert pixel(page, mine["x"], mine["y"]) == colour
    assert pixel(page, other["x"], other["y"]) != colour  # dimmed towards the white plot
    shot(page, "search")
    search.fill("")
    page.locator(".bk-btn", has_text="flow arrows").first.click()
    page.wait_for_function("() => wbModel('gantt|flows').visible")
    assert not page.console_errors


def test_the_search_finds_a_worker_a_phase_and_a_kernel_by_name(page, run_trace, run_report, nsys_report):
    """Besides a partition: a worker's spans, a phase's, and a kernel's by its name (counted
    from the trace's rows; the kernels from the export's own table)."""
    def count(path: Path, query: str) -> str:
        opened(page, path)
        search = page.locator(".bk-TextInput input").first
        search.fill(query)
        page.wait_for_function("() => wbModel('gantt_matches').text.includes('match')")
        said = page.evaluate("() => wbModel('gantt_matches').text")
        search.fill("")
        page.wait_for_function("() => wbModel('gantt_matches').text === ''")
        return said

    spans = list(run_trace.iter_spans())
    assert count(run_report, "worker 1").startswith(f"{sum(s.worker == 1 for s in spans)} matches")
    assert count(run_report, "ntt_msm_h").startswith(f"{sum(s.name == 'ntt_msm_h' for s in spans)} matches")
    (kernels,) = sqlite3.connect(NSYS).execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
        "WHERE s.value = 'par_reduce_kernel'").fetchone()
    assert kernels > 0 and count(nsys_report, "par_reduce_kernel").startswith(f"{kernels} matches")
    assert not page.console_errors


def test_flow_arrows_join_each_release_to_the_next_acquire_and_toggle(page, run_trace, run_report):
    opened(page, run_report)
    flows = page.evaluate("() => { const d = wbModel('gantt_flows').data; return [...d.x0.keys()].map(i => "
                          "[d.kind[i], d.x0[i], d.x1[i], d.lane0[i], d.lane1[i]]); }")
    origin = run_trace.meta["origin_ns"]
    holds = sorted((s for s in run_trace.select(track="mutex/gpu0", name="hold")), key=lambda s: s.start_ns)
    expected = [((a.end_ns - origin) / 1e9, (b.start_ns - origin) / 1e9, a.worker, b.worker)
                for a, b in itertools.pairwise(holds) if a.worker != b.worker]
    drawn = sorted((x0, x1, l0, l1) for kind, x0, x1, l0, l1 in flows if kind == "lock_handoff")
    assert len(drawn) == len(expected) > 0
    for (x0, x1, l0, l1), (e0, e1, wa, wb) in zip(drawn, sorted(expected), strict=True):
        assert x0 == pytest.approx(e0, abs=1e-9) and x1 == pytest.approx(e1, abs=1e-9)
        assert (l0, l1) == (f"worker {wa} mutex hold", f"worker {wb} mutex hold")
    toggle = page.locator(".bk-btn", has_text="flow arrows").first
    toggle.click()
    page.wait_for_function("() => !wbModel('gantt|flows').visible")
    toggle.click()
    page.wait_for_function("() => wbModel('gantt|flows').visible")
    assert not page.console_errors


def test_collapsing_a_group_hides_its_lanes(page, run_report):
    opened(page, run_report)
    labels = "() => [...wbPlot('gantt').model.left[0].major_label_overrides.values()]"
    before = page.evaluate(labels)
    assert "worker 0 mutex hold" in before
    page.locator(".bk-CheckboxGroup label", has_text="worker 0 (4 lanes)").locator("input").click()
    page.wait_for_function(f"() => !({labels})().includes('worker 0')")
    after = page.evaluate(labels)
    assert after == [lane for lane in before if not lane.startswith("worker 0")]
    # The bars of those lanes are drawn nowhere; the others moved up.
    tops = page.evaluate("""() => { const pv = wbPlot('gantt'); const out = {};
        for (const rv of pv.renderer_views.values()) {
          const s = rv.model.data_source; if (!s || !s.name || !s.name.startsWith('gantt_bars_')) continue;
          s.data.lane.forEach((lane, i) => { (out[lane] = out[lane] || []).push(rv.glyph.top[i]); }); }
        return out; }""")
    hidden = [math.isnan(v) for lane, values in tops.items() if lane.startswith("worker 0") for v in values]
    kept = [math.isnan(v) for lane, values in tops.items() if not lane.startswith("worker 0") for v in values]
    assert hidden and all(hidden) and kept and not any(kept)
    shot(page, "collapsed-group")
    page.locator(".bk-CheckboxGroup label", has_text="worker 0 (4 lanes)").locator("input").click()
    page.wait_for_function(f"() => ({labels})().includes('worker 0')")
    assert not page.console_errors


def test_with_every_group_but_one_collapsed_the_legend_stays_whole_and_overlaps_nothing(page, run_report):
    """The chart shrinks to the lanes left; its legend once kept its rows and ran out of the
    figure, over the controls and under the next figure, most entries out of reach."""
    opened(page, run_report)
    labels = [t.strip() for t in page.locator(".bk-CheckboxGroup label").all_inner_texts()]
    labels = [label for label in labels if label != "run"]
    assert len(labels) >= 3
    for label in labels:
        page.locator(".bk-CheckboxGroup label", has_text=label).locator("input").click()
    page.wait_for_function("() => [...wbPlot('gantt').model.left[0].major_label_overrides.values()]"
                           ".join() === 'run'")
    idle(page)
    try:
        legend = page.evaluate(LEGEND_JS, "gantt")
        assert legend["labels"] and not legend["unreachable"], legend["unreachable"]
        assert not boxes_overlapping(layout_boxes(page))
        shot(page, "collapsed-all-but-run")
    finally:
        for label in labels:
            page.locator(".bk-CheckboxGroup label", has_text=label).locator("input").click()
        page.wait_for_function("() => wbPlot('gantt').model.left[0].major_label_overrides.size > 1")
    assert not page.console_errors


def test_a_foreign_span_gets_its_thread_context_and_no_pipeline_words(page, nsys_report):
    opened(page, nsys_report)
    where = page.evaluate(BAR_JS, ["gantt", "par_ranged1d_kernel", None, None])
    page.mouse.click(where["x"], where["y"])
    page.wait_for_function("() => wbModel('gantt_details').text.includes('par_ranged1d_kernel')")
    text = details(page)
    assert "launched from" in text and "cuda/thread/" in text
    for word in ("partition", "synthesis", "mutex", "queue", "barrier"):
        assert word not in text.lower()
    shot(page, "details-foreign")
    assert not page.console_errors


SCREEN_JS = """(t) => { const pv = wbPlot('gantt'); const r = pv.canvas.el.getBoundingClientRect();
    const f = pv.frame.bbox;
    return [r.left + pv.frame.x_scale.compute(t), r.top + f.top + f.height / 2]; }"""


def box_select(page, t0: float, t1: float) -> dict:
    """Drag a box with the Gantt's box-select tool from time t0 to t1 (seconds on its axis),
    at mid-height; the statistics the page reports of it."""
    page.evaluate("() => { const pv = wbPlot('gantt'); pv.model.toolbar.active_drag = "
                  "pv.model.toolbar.tools.find(t => t.type === 'BoxSelectTool'); "
                  "pv.el.scrollIntoView({block: 'center'}); }")
    x0, y0 = page.evaluate(SCREEN_JS, t0)
    x1, _ = page.evaluate(SCREEN_JS, t1)
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x1, y0 + 20, steps=5)
    page.mouse.up()
    page.wait_for_function("() => window.wb && wb.stats && wb.stats.gantt")
    return page.evaluate("() => wb.stats.gantt")


def test_box_select_reports_what_a_known_trace_holds_in_the_range(page, nsys_report):
    opened(page, nsys_report)
    # The stream's first and last kernel, as drawn, and where on screen a time lies.
    first_left, last_right = page.evaluate("""() => { let a = Infinity, b = -Infinity;
        for (let d = 0; d < 3; d++) {
        const s = wbModel('gantt_bars_' + d).data;
        for (let i = 0; i < s.left.length; i++) if (s.lane[i] === 'gpu0 stream 7') {
          a = Math.min(a, s.left[i]); b = Math.max(b, s.right[i]); } }
        return [a, b]; }""")
    stats = box_select(page, first_left + 0.3 * (last_right - first_left),
                       first_left + 0.45 * (last_right - first_left))
    db = sqlite3.connect(NSYS)
    (first_ns,) = db.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    t0, t1 = first_ns + (stats["x0"] - first_left) * 1e9, first_ns + (stats["x1"] - first_left) * 1e9
    kernels = db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end >= ? AND start <= ? "
                         "ORDER BY start", (t0, t1)).fetchall()
    covered, reach = 0.0, t0
    for start, end in kernels:  # the union of the kernels' time within the range
        a, b = max(start, reach), min(end, t1)
        if b > a:
            covered += b - a
            reach = b
    copies, moved = db.execute("SELECT count(*), coalesce(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                               "WHERE end >= ? AND start <= ?", (t0, t1)).fetchone()
    assert len(kernels) > 10 and copies > 0  # a range with something in it
    assert stats["lanes"]["gpu0 stream 7"] == len(kernels)
    assert stats["busy"]["gpu0 stream 7"] == pytest.approx(covered / (t1 - t0), abs=1e-6)
    assert stats["copies"] == copies and stats["bytes"] == moved
    panel = page.evaluate("() => wbModel('gantt_range').text")
    assert f"{copies:,} copies" in panel and f"{covered / (t1 - t0) * 100:.1f}%" in panel
    shot(page, "range-statistics")
    assert not page.console_errors


def test_box_select_sums_a_runs_waits_by_phase(page, run_trace, run_report):
    """The waits a box holds, by phase, clipped to the box: the mutex's waits, each barrier
    side's and the GPU thread's barrier phase, summed from the trace's own rows."""
    opened(page, run_report)
    idle(page)
    origin = run_trace.meta["origin_ns"]
    first, last = run_trace.time_range()
    stats = box_select(page, (first - origin + 0.3 * (last - first)) / 1e9,
                       (first - origin + 0.7 * (last - first)) / 1e9)
    lo, hi = origin + stats["x0"] * 1e9, origin + stats["x1"] * 1e9

    def phase(span: Any) -> str | None:
        if span.name == "wait" and span.track.startswith("mutex/"):
            return "mutex_wait"
        if span.name == "wait" and span.track.startswith("barrier/"):
            return f"barrier_wait ({span.attrs['party']})"
        return "barrier_wait" if span.name == "barrier_wait" else None

    expected: dict[str, float] = {}
    for span in run_trace.iter_spans():
        name = phase(span)
        if name is not None and span.end_ns >= lo and span.start_ns <= hi:
            expected[name] = expected.get(name, 0.0) + (min(span.end_ns, hi) - max(span.start_ns, lo)) / 1e9
    assert set(expected) == {"mutex_wait", "barrier_wait (prep)", "barrier_wait (gpu)", "barrier_wait"}
    assert stats["waits"] == pytest.approx(expected, abs=1e-6)
    panel = page.evaluate("() => wbModel('gantt_range').text")
    assert f"mutex_wait {ms(round(expected['mutex_wait'] * 1e9))}" in panel, panel
    page.evaluate("() => { const pv = wbPlot('gantt'); pv.model.toolbar.active_drag = 'auto'; }")
    assert not page.console_errors


def test_a_large_report_reaches_any_span_at_full_zoom_and_the_keys_zoom_and_pan(page, tmp_path):
    from workbench.importers import load_any
    from workbench.viz.report import render_report

    trace = load_any(STUDY)
    path = tmp_path / "large.html"
    path.write_text(render_report(trace, max_bars=1000, verdict=False), encoding="utf-8")
    opened(page, path, timeout_ms=60_000)
    cut = page.evaluate("() => { let m = -Infinity; for (let d = 0; d < 3; d++) for (const r of "
                        "wbModel('gantt_bars_' + d).data.right) m = Math.max(m, r); return m; }")
    last = max((s for s in trace.iter_spans() if s.name == "finish"), key=lambda s: s.start_ns)
    origin = trace.meta.get("origin_ns", trace.time_range()[0])
    start, end = (last.start_ns - origin) / 1e9, (last.end_ns - origin) / 1e9
    assert start > cut  # past the first detail window
    page.evaluate(f"() => wbPlot('gantt').model.x_range.setv({{start: {start - 0.002}, end: {end + 0.002}}})")
    page.wait_for_function("""(p) => { for (let d = 0; d < 3; d++) {
        const s = wbModel('gantt_bars_' + d).data;
        for (let i = 0; i < s.left.length; i++) if (s.phase[i] === 'finish' && Number(s.partition[i]) === p)
          return true; } return false; }""", arg=last.partition)
    idle(page)
    where = page.evaluate(BAR_JS, ["gantt", "finish", last.partition, None])
    page.mouse.click(where["x"], where["y"])
    page.wait_for_function(f"() => wbModel('gantt_details').text.includes('partition {last.partition}')")
    shot(page, "large-report-far-span")
    # w zooms in by a fifth around the centre, d pans right by a fifth of the width.
    page.mouse.move(where["x"], where["y"])
    span = "() => [wbPlot('gantt').model.x_range.start, wbPlot('gantt').model.x_range.end]"
    a0, a1 = page.evaluate(span)
    page.keyboard.press("w")
    b0, b1 = page.evaluate(span)
    assert b1 - b0 == pytest.approx(0.8 * (a1 - a0)) and (b0 + b1) / 2 == pytest.approx((a0 + a1) / 2)
    page.keyboard.press("d")
    c0, c1 = page.evaluate(span)
    assert c0 - b0 == pytest.approx(0.2 * (b1 - b0)) and c1 - c0 == pytest.approx(b1 - b0)
    # s zooms out by as much as w zoomed in, a pans back left; the page does not scroll.
    scrolled = page.evaluate("() => window.scrollY")
    page.keyboard.press("s")
    e0, e1 = page.evaluate(span)
    assert e1 - e0 == pytest.approx((c1 - c0) / 0.8) and (e0 + e1) / 2 == pytest.approx((c0 + c1) / 2)
    page.keyboard.press("a")
    f0, f1 = page.evaluate(span)
    assert e0 - f0 == pytest.approx(0.2 * (e1 - e0)) and f1 - f0 == pytest.approx(e1 - e0)
    assert page.evaluate("() => window.scrollY") == scrolled
    # The search counts every span in the file, not only those drawn, and Enter goes to a match.
    first = min((s for s in trace.iter_spans() if s.partition >= 0), key=lambda s: s.start_ns).partition
    wanted = [s for s in trace.iter_spans() if s.partition == first]
    search = page.locator(".bk-TextInput input").first
    search.fill(f"partition {first}")
    search.press("Enter")
    page.wait_for_function("() => wbModel('gantt_matches').text.includes('showing')")
    assert page.evaluate("() => wbModel('gantt_matches').text").startswith(f"{len(wanted)} matches")
    d0, d1 = page.evaluate(span)
    assert min(s.start_ns for s in wanted) <= origin + (d0 + d1) / 2 * 1e9 <= max(s.end_ns for s in wanted)
    page.wait_for_function("""(p) => { for (let d = 0; d < 3; d++) {
        if (wbModel('gantt_bars_' + d).data.partition.some(q => Number(q) === p)) return true; }
        return false; }""", arg=first)
    assert not page.console_errors


def test_a_notebook_gantt_whose_kernel_never_answers_a_click_says_so_after_a_while(page, run_trace, tmp_path):
    """A notebook's large Gantt asks its kernel for a click's details; in a page with no kernel
    behind it (and no static copy's mark saying so) the "asking the kernel…" line gives way,
    after the wait, to a plain one saying no kernel answered, and to the span as the page
    holds it (its start and duration as the trace's own row gives them)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    from workbench.viz.timeline import gantt_figure

    assert len(run_trace.spans) > 100  # past max_bars: an overview and a detail that asks the kernel
    path = tmp_path / "no_kernel.html"
    path.write_text(file_html(gantt_figure(run_trace, max_bars=100, requery=True), INLINE, "no kernel"),
                    encoding="utf-8")
    opened(page, path)
    idle(page)
    page.evaluate("() => { window.wb = window.wb || {states: {}}; wb.KERNEL_WAIT_S = 1; }")
    where = page.evaluate(BAR_JS, ["gantt", "finish", None, None])
    page.mouse.click(where["x"], where["y"])
    assert "asking the kernel" in details(page)
    page.wait_for_function("() => wbModel('gantt_details').text.includes('No answer from the notebook')",
                           timeout=10_000)
    text = details(page)
    assert "re-run the cell to ask again" in text and "its partition's whole story" in text
    begun = float(re.search(r"<th>start</th><td>([0-9.]+) s", text).group(1))
    origin = run_trace.meta.get("origin_ns", run_trace.time_range()[0])
    span = next(s for s in run_trace.iter_spans()
                if s.name == "finish" and abs((s.start_ns - origin) / 1e9 - begun) < 2e-6)
    assert f"<th>duration</th><td>{ms(span.end_ns - span.start_ns)}</td>" in text
    assert f"<th>partition</th><td>{span.partition}</td>" in text
    shot(page, "notebook-no-kernel-answer")
    assert not page.console_errors


def test_a_static_copy_without_its_kernel_answers_clicks_boxes_and_searches_from_its_own_spans(
        page, run_trace, tmp_path):
    """The static copy of a notebook's large Gantt (its document marked as a reopened notebook's
    copy is, fallback.py) asks no kernel: a click says at once that the story needs one, and a box
    and a search count the spans the page holds, saying so (the trace's own rows give the
    numbers: its spans that start within the drawn window)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    from workbench.viz.timeline import gantt_figure

    path = tmp_path / "static_copy.html"
    path.write_text(file_html(gantt_figure(run_trace, max_bars=100, requery=True), INLINE, "copy"),
                    encoding="utf-8")
    opened(page, path)
    idle(page)
    page.evaluate("() => { for (const d of Bokeh.documents) d.wbNoKernel = true; }")
    where = page.evaluate(BAR_JS, ["gantt", "finish", None, None])
    page.mouse.click(where["x"], where["y"])
    text = details(page)
    assert "asking the kernel" not in text and "the kernel that drew this Gantt is gone" in text
    drawn = page.evaluate("""() => { const out = [];
        for (let d = 0; d < 3; d++) { const s = wbModel('gantt_bars_' + d).data;
          for (let i = 0; i < s.left.length; i++) out.push([s.left[i], s.right[i]]); } return out; }""")
    origin = run_trace.meta.get("origin_ns", run_trace.time_range()[0])
    cut = max(left for left, _ in drawn)
    held = [s for s in run_trace.iter_spans() if (s.start_ns - origin) / 1e9 <= cut + 1e-9]
    assert len(held) == len(drawn) < len(run_trace.spans)
    # A box over the middle of the drawn window.
    page.evaluate(f"() => wbPlot('gantt').model.x_range.setv({{start: 0, end: {cut * 1.05}}})")
    idle(page)
    stats = box_select(page, 0.3 * cut, 0.6 * cut)
    lo, hi = origin + stats["x0"] * 1e9, origin + stats["x1"] * 1e9
    assert stats["spans"] == sum(s.end_ns >= lo and s.start_ns <= hi for s in held) > 0
    panel = page.evaluate("() => wbModel('gantt_range').text")
    assert f"Counted over the {len(held):,} spans this page holds" in panel and "re-run the cell" in panel
    # A search counts the partition's spans among those the page holds.
    p = max(s.partition for s in held)
    search = page.locator(".bk-TextInput input").first
    search.fill(f"partition {p}")
    page.wait_for_function("() => wbModel('gantt_matches').text.includes('this page holds')")
    said = page.evaluate("() => wbModel('gantt_matches').text")
    assert said.startswith(f"{sum(s.partition == p for s in held)} match")
    search.fill("")
    assert not page.console_errors
