"""A large Gantt in JupyterLab, whose page holds only the spans in view: zoomed into a far
region it draws that region's spans (the kernel re-queries them), and a box over the whole run,
a search and a click's details count every span of the trace, the ones not loaded included
(the kernel answers).

The trace is a real H200 run (notebooks/data); the expected numbers come from its own rows
(every span, its track, times and attributes), never from the page or from our statistics.
Like test_browser.py: Debian's chromium through Playwright, skipped with the reason where
either is missing, and one JupyterLab server for the module.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PLOT_JS,
    TOKEN,
    lab,  # noqa: F401 - the module's JupyterLab server
    open_and_run_all,
    playwright_api,
    screenshot,
    small_notebook,
    wait_accepting_dialogs,
)
from test_browser_interrogate import BAR_JS, ms

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "notebooks" / "data" / "h200_2e22" / "pageable_t14_w2.wbtrace"
MAX_BARS = 1000  # a detail window of 500 spans, of the trace's 5,756
DRAWN_JS = """(name) => { const out = [];
  for (let d = 0; d < 3; d++) { const s = wbModel(name + '_bars_' + d).data;
    for (let i = 0; i < s.left.length; i++)
      out.push([s.phase[i], Number(s.partition[i]), s.left[i], s.right[i]]); }
  return out; }"""


@pytest.fixture(scope="module")
def trace() -> Any:
    from workbench.importers import load_any

    return load_any(STUDY)


@pytest.fixture(scope="module")
def browser() -> Any:
    with playwright_api.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def page(lab, browser) -> Any:  # noqa: F811 - the fixture imported above
    """The notebook run once for the module; each test leaves the Gantt as it found it."""
    (lab["work"] / "large_gantt.ipynb").write_text(small_notebook([
        "import workbench.notebook as wb",
        f"trace = wb.load({str(STUDY)!r})",
        f"g = wb.gantt(trace, max_bars={MAX_BARS}, verdict=None)",
    ]))
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.on("pageerror", lambda e: page.console_errors.append(f"{e}\n{e.stack}"))
    page.failed_requests = []
    page.on("response", lambda r: r.status >= 400 and page.failed_requests.append(r.url))
    open_and_run_all(page, lab, "large_gantt.ipynb")
    page.wait_for_function(
        "() => window.Bokeh && Bokeh.documents.some(d => d.get_model_by_name('gantt_range'))",
        timeout=60_000)
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)", timeout=60_000)
    page.evaluate(PLOT_JS)
    yield page
    page.close()


def seconds(trace: Any, ns: int) -> float:
    return (ns - trace.meta["origin_ns"]) / 1e9


def overlapping(trace: Any, start: float, end: float) -> list[Any]:
    return [s for s in trace.iter_spans()
            if seconds(trace, s.end_ns) >= start and seconds(trace, s.start_ns) <= end]


def test_zooming_into_a_far_region_draws_the_spans_there(page, trace):
    drawn = page.evaluate(DRAWN_JS, "gantt")
    cut = max(right for _, _, _, right in drawn)
    last = max((s for s in trace.iter_spans() if s.name == "finish"), key=lambda s: s.start_ns)
    start, end = seconds(trace, last.start_ns) - 0.05, seconds(trace, last.end_ns) + 0.002
    assert start > cut and last.partition not in {p for _, p, _, _ in drawn}  # not loaded yet
    expected = overlapping(trace, start, end)
    assert 0 < len(expected) < MAX_BARS // 2  # all of them fit the detail's budget
    page.evaluate(f"() => wbPlot('gantt').model.x_range.setv({{start: {start}, end: {end}}})")
    title = f"detail: all {len(expected)} spans in view"
    try:
        page.wait_for_function(f"""(js) => {{ const rows = eval(js)('gantt');
            return rows.length === {len(expected)} && rows.every(r => r[3] >= {start} && r[2] <= {end})
              && wbPlot('gantt').model.title.text.startsWith('{title}'); }}""", arg=DRAWN_JS, timeout=60_000)
    except playwright_api.TimeoutError:
        screenshot(page, "failed-notebook-far-region")
        seen = page.evaluate("""(js) => { const r = wbPlot('gantt').model.x_range;
            return [eval(js)('gantt').length, wbPlot('gantt').model.title.text, r.start, r.end,
                    Bokeh.documents.length]; }""", DRAWN_JS)
        pytest.fail(f"the detail view did not draw the {len(expected)} spans in view: {seen}; "
                    f"console: {page.console_errors}")
    rows = page.evaluate(DRAWN_JS, "gantt")
    assert sorted((phase, p) for phase, p, _, _ in rows if phase in ("finish", "barrier_wait")) == sorted(
        (s.name, s.partition) for s in expected if s.name in ("finish", "barrier_wait"))
    assert ("finish", last.partition) in {(phase, p) for phase, p, _, _ in rows}
    page.evaluate("() => wbPlot('gantt').el.scrollIntoView({block: 'start'})")  # the detail, not the overview
    screenshot(page, "notebook-far-region")
    assert not page.console_errors


def test_a_box_over_the_whole_run_counts_every_span_not_only_those_loaded(page, trace):
    loaded = len(page.evaluate(DRAWN_JS, "gantt"))
    # A margin before the run's first span, so a box from the frame's edge holds all of it.
    page.evaluate("() => { const pv = wbPlot('gantt_overview'); pv.model.toolbar.active_drag = "
                  "pv.model.toolbar.tools.find(t => t.type === 'BoxSelectTool'); "
                  "pv.model.x_range.start = -0.5; pv.el.scrollIntoView({block: 'center'}); }")
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)")
    frame = page.evaluate("""() => { const pv = wbPlot('gantt_overview');
        const r = pv.canvas.el.getBoundingClientRect(), f = pv.frame.bbox;
        return [r.left + f.left, r.left + f.right, r.top + f.top + f.height / 2]; }""")
    left, right, y = frame
    page.mouse.move(left + 1, y)
    page.mouse.down()
    page.mouse.move(right - 1, y + 10, steps=5)
    page.mouse.up()
    page.wait_for_function("() => window.wb && wb.stats && wb.stats.gantt", timeout=30_000)
    stats = page.evaluate("() => wb.stats.gantt")
    x0, x1 = stats["x0"], stats["x1"]
    spans = overlapping(trace, x0, x1)
    assert stats["spans"] == len(spans) == len(trace.spans) > loaded  # the box holds the whole run

    def moves_bytes(s: Any) -> bool:
        return isinstance(s.attrs.get("bytes"), int | float) and s.attrs["bytes"] > 0

    copies = [s for s in spans if s.track.endswith(("/copy", "/memset")) or moves_bytes(s)]
    assert stats["copies"] == len(copies) > 0
    assert stats["bytes"] == sum(s.attrs.get("bytes", 0) for s in copies if moves_bytes(s))
    kernels = sorted((s for s in spans if s.track == "gpu0/stream/17"), key=lambda s: s.start_ns)
    t0, t1 = trace.meta["origin_ns"] + x0 * 1e9, trace.meta["origin_ns"] + x1 * 1e9
    covered, reach = 0.0, t0
    for s in kernels:  # the union of the stream's kernels within the box
        a, b = max(s.start_ns, reach), min(s.end_ns, t1)
        if b > a:
            covered += b - a
            reach = b
    assert stats["lanes"]["gpu0 stream 17"] == len(kernels) > 0
    assert stats["busy"]["gpu0 stream 17"] == pytest.approx(covered / (t1 - t0), rel=1e-6)
    panel = page.evaluate("() => wbModel('gantt_range').text")
    assert f"{len(spans):,} spans; {len(copies):,} copies" in panel
    page.evaluate("""() => { const found = [];
        const walk = v => { found.push(v); (v.child_views ?? []).forEach(walk); };
        Object.values(Bokeh.index).forEach(walk);
        found.find(v => v.model.name === 'gantt_range').el.scrollIntoView({block: 'end'}); }""")
    screenshot(page, "notebook-range-statistics")
    assert not page.console_errors


def test_the_search_finds_a_partition_that_is_not_loaded_and_enter_goes_there(page, trace):
    page.evaluate("() => wbPlot('gantt').model.x_range.setv({start: 0, end: 0.5})")
    page.wait_for_function("(js) => eval(js)('gantt').every(r => r[2] <= 0.5)", arg=DRAWN_JS)
    loaded = {p for _, p, _, _ in page.evaluate(DRAWN_JS, "gantt")}
    last = max(trace.spans.partition.tolist())
    wanted = [s for s in trace.iter_spans() if s.partition == last]
    assert last not in loaded and wanted
    search = page.locator(".bk-TextInput input").first
    search.fill(f"partition {last}")
    first = seconds(trace, min(s.start_ns for s in wanted))
    page.wait_for_function(f"() => wbModel('gantt_matches').text.startsWith('{len(wanted)} matches, "
                           f"first at {first:.6f} s')", timeout=30_000)
    search.press("Enter")
    page.wait_for_function("() => wbModel('gantt_matches').text.includes('showing')", timeout=30_000)
    page.wait_for_function("([js, p]) => eval(js)('gantt').some(r => r[1] === p)", arg=[DRAWN_JS, last],
                           timeout=30_000)
    # The range's start and end arrive as two changes: wait for both.
    page.wait_for_function("(t) => { const r = wbPlot('gantt').model.x_range; "
                           "return r.start <= t && t <= r.end; }", arg=first, timeout=30_000)
    page.evaluate("() => wbPlot('gantt').el.scrollIntoView({block: 'start'})")
    screenshot(page, "notebook-search")
    search.fill("")
    page.wait_for_function("() => wbModel('gantt_matches').text === ''")
    assert not page.console_errors


DEVICE_TRACK = re.compile(r"gpu\d+/(stream/\d+|copy|memset)$")  # kernels, copies, memsets: grouped by name
STEP_ROW = re.compile(r"<tr class=\"(wb-here)?\"><td>(?:&nbsp;)*([^<]+)</td><td>([^<]+)</td><td>[^<]+</td>"
                      r"<td>([^<]+)</td>")


def test_a_click_tells_its_partitions_whole_story_though_most_of_it_is_not_loaded(page, trace):
    # Zoomed into one partition's mutex hold: its synthesis, queue, wait and finish lie outside.
    holds = sorted((s for s in trace.iter_spans() if s.track.startswith("mutex/") and s.name == "hold"),
                   key=lambda s: s.start_ns)
    hold = holds[len(holds) // 2]
    p = hold.partition
    start, end = seconds(trace, hold.start_ns) + 1e-4, seconds(trace, hold.end_ns) - 1e-4
    page.evaluate(f"() => wbPlot('gantt').model.x_range.setv({{start: {start}, end: {end}}})")
    page.wait_for_function(f"""([js, p]) => {{ const rows = eval(js)('gantt');
        return rows.every(r => r[3] >= {start} && r[2] <= {end}) && rows.some(r => r[1] === p); }}""",
                           arg=[DRAWN_JS, p], timeout=60_000)
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)")
    mine = [s for s in trace.iter_spans() if s.partition == p]
    loaded = [r for r in page.evaluate(DRAWN_JS, "gantt") if r[1] == p]
    assert 0 < len(loaded) < len(mine)  # most of its story is not in the page
    # The page holds no story of any partition: the kernel tells it when a bar is clicked.
    assert page.evaluate("() => wbModel('gantt_story').data.partition.length") == 0
    where = page.evaluate(BAR_JS, ["gantt", "ntt_msm_h", p, None])
    page.mouse.click(where["x"], where["y"])
    page.wait_for_function(f"() => wbModel('gantt_details').text.includes('partition {p}:')", timeout=30_000)
    text = page.evaluate("() => wbModel('gantt_details').text")
    clicked = re.search(r"<b>([^<]+)</b> on ([^<]+)</div>", text)
    assert clicked is not None
    # Every span of the partition is a step, its kernels, copies and memsets one step per name
    # on a lane (a count and their summed time), plus its time in the queue.
    host = [s for s in mine if not DEVICE_TRACK.match(s.track)]
    device: dict[tuple[str, str], list[Any]] = {}
    for s in mine:
        if DEVICE_TRACK.match(s.track):
            device.setdefault((s.track, s.name), []).append(s)
    steps = STEP_ROW.findall(text)
    assert len(steps) == len(host) + len(device) + 1
    inst = trace.instants
    at = {name: [int(inst.ts_ns[i]) for i in range(len(inst.ts_ns))
                 if inst.partition[i] == p and trace.strings.values[inst.name[i]] == name]
          for name in ("queued", "pickup")}
    expected = [ms(s.duration_ns) for s in host] + [ms(sum(s.duration_ns for s in group))
                                                    for group in device.values()]
    assert sorted(d for _, _, _, d in steps) == sorted([*expected, ms(at["pickup"][0] - at["queued"][0])])
    names = [step for _, step, _, _ in steps]
    # (kernel names are drawn demangled, so the groups are matched by their counts)
    assert sorted(int(n.split(" ×")[1]) for n in names if " ×" in n) == sorted(
        len(group) for group in device.values() if len(group) > 1)
    for phase in ("synthesis", "queue", "mutex_wait", "mutex_hold", "ntt_msm_h", "finish"):
        assert phase in names
    assert [step for here, step, _, _ in steps if here] == [clicked.group(1)]
    total = (max(s.end_ns for s in mine) - min(s.start_ns for s in mine)) / 1e6
    assert f"partition {p}: {total:.1f} ms from its first step to its last" in text
    # What it lies within on its lane, outermost first: the hold, and its thread's spans around it.
    begun = float(re.search(r"<th>start</th><td>([0-9.]+) s", text).group(1))
    inner = next(s for s in host
                 if s.name == clicked.group(1) and abs(seconds(trace, s.start_ns) - begun) < 2e-6)
    outer = sorted((s for s in host if s is not inner and s.start_ns <= inner.start_ns
                    and s.end_ns >= inner.end_ns and s.track in (hold.track, inner.track)),
                   key=lambda s: -s.duration_ns)
    within = re.search(r"<th>within</th><td>([^<]+)</td>", text)
    assert outer and within is not None
    assert re.findall(r"\(([^)]+)\)", within.group(1)) == [ms(s.duration_ns) for s in outer]
    page.evaluate("() => wbPlot('gantt').el.scrollIntoView({block: 'start'})")
    screenshot(page, "notebook-details")
    assert not page.console_errors


def test_a_reopened_notebooks_gantt_answers_a_click_from_the_page_and_says_the_kernel_is_needed(
        lab, browser, trace):  # noqa: F811 - the fixture imported above
    """A notebook's large Gantt asks its kernel for a click's details. Saved, its kernel ended
    and the notebook opened again, it shows the Gantt's static copy, where a click used to say
    "asking the kernel…" for ever: now it says at once that the partition's story needs the
    kernel (re-run the cell), and shows the span as the page holds it (its phase, lane, start,
    duration, partition and worker, as the trace's own row gives them)."""
    name = "reopened_gantt.ipynb"
    (lab["work"] / name).write_text(small_notebook([
        "import workbench.notebook as wb",
        f"g = wb.gantt(wb.load({str(STUDY)!r}), max_bars={MAX_BARS}, verdict=None)",
    ]))
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    try:
        open_and_run_all(page, lab, name)
        page.wait_for_function(
            "() => window.Bokeh && Bokeh.documents.some(d => d.get_model_by_name('gantt_details'))",
            timeout=60_000)
        page.locator(".jp-Notebook").first.click()
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while "wb-fallback" not in (lab["work"] / name).read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        headers = {"Authorization": f"token {TOKEN}"}
        sessions = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"{lab['url']}/api/sessions", headers=headers)).read())
        for session in sessions:  # this notebook's kernel only: the module's other notebook keeps its own
            if session["path"].endswith(name):
                urllib.request.urlopen(urllib.request.Request(
                    f"{lab['url']}/api/sessions/{session['id']}", method="DELETE", headers=headers)).read()
        page.goto(f"{lab['url']}/lab/workspaces/reopened-gantt/tree/{name}?token={TOKEN}")
        page.wait_for_selector(".jp-Notebook", timeout=90_000)
        shown = page.locator(".wb-fallback:not([hidden])")
        wait_accepting_dialogs(page, lambda: shown.count() > 0, "the static copy shown", 90)
        shown.first.locator(".bk-Figure, canvas").first.wait_for(timeout=30_000)
        page.wait_for_function("() => Bokeh.documents.some(d => d.get_model_by_name('gantt_details'))"
                               " && Object.values(Bokeh.index).every(v => v.is_idle)", timeout=30_000)
        page.evaluate(PLOT_JS)
        where = page.evaluate(BAR_JS, ["gantt", "ntt_msm_h", None, None])
        assert where is not None
        page.mouse.click(where["x"], where["y"])
        try:
            page.wait_for_function(
                "() => wbModel('gantt_details').text.includes('the kernel that drew this Gantt is gone')",
                timeout=15_000)
        except playwright_api.TimeoutError:
            said = page.evaluate("() => wbModel('gantt_details').text")
            screenshot(page, "failed-notebook-reopened-click")
            pytest.fail(f"the click on the reopened Gantt said: {said!r}")
        text = page.evaluate("() => wbModel('gantt_details').text")
        page.evaluate("() => wbPlot('gantt').el.scrollIntoView({block: 'start'})")
        screenshot(page, "notebook-reopened-click")
    finally:
        page.close()
    assert "asking the kernel" not in text and "Re-run the cell to ask one" in text
    assert "its partition's whole story comes from a kernel" in text
    head = re.search(r"<b>([^<]+)</b> on ([^<]+)</div>", text)
    assert head is not None and head.group(2) == where["lane"]  # the innermost bar under the pointer
    begun = float(re.search(r"<th>start</th><td>([0-9.]+) s", text).group(1))
    span = next(s for s in trace.iter_spans()
                if s.name == head.group(1) and abs(seconds(trace, s.start_ns) - begun) < 2e-6)
    assert span.start_ns <= trace.meta["origin_ns"] + where["right"] * 1e9 + 2e3
    assert f"<th>duration</th><td>{ms(span.duration_ns)}</td>" in text
    assert f"<th>partition</th><td>{span.partition}</td>" in text
    assert f"<th>worker</th><td>{span.worker}</td>" in text
