"""In a real browser: the report opens offline, and the quickstart notebook works in JupyterLab.

Debian's chromium is driven by Playwright (no browser download). Without either the tests
skip and say why; CI installs both. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
TOKEN = "workbench-test-token"
PANEL_CELL = "panel = wb.panel()"  # the quickstart's: the panel's own defaults, a run to watch
QUICK_PANEL = "panel = wb.panel(partitions=8, log2_constraints=10)"  # what the tests run instead

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytest.importorskip("bokeh", reason="the notebook extra is not installed")
if not Path(CHROMIUM).exists():
    pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Bars of every depth in the named Gantt, as the browser holds them.
BARS_JS = """(name) => {
  const rows = [];
  for (const doc of Bokeh.documents) {
    for (let depth = 0; depth < 3; depth++) {
      const source = doc.get_model_by_name(name + '_bars_' + depth);
      if (!source) continue;
      const d = source.data;
      for (let i = 0; i < d.left.length; i++) rows.push([d.phase[i], Number(d.partition[i])]);
    }
  }
  return rows;
}"""


@pytest.fixture
def page(tmp_path) -> Iterator[Any]:
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.console_errors = []  # type: ignore[attr-defined]
        page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
        page.on("pageerror", lambda e: page.console_errors.append(f"{e}\n{e.stack}"))
        page.failed_requests = []  # type: ignore[attr-defined]
        page.on("response", lambda r: r.status >= 400 and page.failed_requests.append(r.url))
        try:
            yield page
        finally:
            browser.close()


def screenshot(page: Any, name: str, element: Any = None) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    target = element if element is not None else page
    target.screenshot(path=str(ARTIFACTS / f"{name}.png"))


# -- (a) the report ----------------------------------------------------------------------------
def open_offline(page: Any, path: Path, timeout_ms: int = 30_000) -> list[str]:
    """Open a report with the network cut off, wait until Bokeh has drawn; returns the
    addresses the page tried to reach."""
    requested: list[str] = []

    def offline(route: Any) -> None:
        if not route.request.url.startswith("file://"):
            requested.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", offline)
    page.goto(path.as_uri())
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=timeout_ms)
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)", timeout=timeout_ms)
    return requested


def test_report_opens_offline_with_every_bar(page, tmp_path):
    from workbench.config import RunConfig
    from workbench.pipeline.run import run_pipeline
    from workbench.viz.report import render_report

    trace = run_pipeline(RunConfig(backend="cpu", partitions=4, log2_constraints=6)).trace
    path = tmp_path / "report.html"
    path.write_text(render_report(trace), encoding="utf-8")
    requested = open_offline(page, path)
    rows = page.evaluate(BARS_JS, "gantt")
    assert len(rows) == len(trace.spans)
    assert {p for phase, p in rows if phase == "finish"} == {0, 1, 2, 3}
    assert page.locator("canvas").count() >= 2
    assert not requested, f"the report asked the network for {requested}"
    assert not boxes_overlapping(layout_boxes(page))  # its tables and figures
    assert not page.console_errors
    screenshot(page, "report")


def test_case_study_report_opens_offline_with_both_runs(page, tmp_path):
    """The H200 case study's report, written from the committed traces."""
    root = Path(__file__).resolve().parents[1]
    path = tmp_path / "study.html"
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "case_study.py"), "--summarize",
                           "--data", str(root / "notebooks" / "data" / "h200_2e22"), "--report", str(path)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(root)})  # this checkout's package
    assert proc.returncode == 0, proc.stderr
    requested = open_offline(page, path, timeout_ms=60_000)
    assert page.locator("canvas").count() >= 3
    text = page.inner_text("body")
    assert "pageable_t14_w2" in text and "zerocopy_t14_w2" in text
    assert "Slow host-to-device copies hold the GPU mutex" in text
    assert not requested, f"the report asked the network for {requested}"
    assert not boxes_overlapping(layout_boxes(page))
    assert not page.console_errors
    screenshot(page, "case_study_report")


# -- (a2) legible views: legend, hover, compare layout -------------------------------------------
# Helpers kept on the page: the plot view drawing a Gantt's bars, and where on screen a bar is.
PLOT_JS = """() => {
  window.wbPlot = (name) => {
    const views = [];
    const walk = v => { views.push(v); for (const c of (v.child_views ?? [])) walk(c); };
    for (const v of Object.values(Bokeh.index)) walk(v);
    const ours = r => r.data_source && r.data_source.name === name + "_bars_0";
    return views.find(v => v.model.renderers && v.model.renderers.some(ours));
  };
  window.wbModel = (name) => Bokeh.documents.map(d => d.get_model_by_name(name)).find(m => m);
  window.wbBarPoint = (name, phase, at = 0.5) => {
    const pv = wbPlot(name);
    pv.el.scrollIntoView({block: "center"});
    const box = pv.canvas.el.getBoundingClientRect();
    for (let d = 0; d < 3; d++) {
      const s = wbModel(name + "_bars_" + d).data;
      const width = i => s.right[i] - s.left[i];
      let best = -1;
      for (let i = 0; i < s.left.length; i++)
        if (s.phase[i] === phase && (best < 0 || width(i) > width(best))) best = i;
      if (best >= 0) return [box.left + pv.frame.x_scale.compute(s.left[best] + at * width(best)),
                             box.top + pv.frame.y_scale.compute((s.top[best] + s.bottom[best]) / 2)];
    }
    return null;
  };
}"""
# Each legend entry scrolled into view (within the legend, if it scrolls): is it then inside the
# legend's box, and the legend inside the plot's canvas?
LEGEND_JS = """(name) => {
  const pv = wbPlot(name);
  const legend = [...pv.renderer_views.values()].find(v => v.model.type === "Legend");
  const inside = (a, b) => a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5
                           && a.left >= b.left - 0.5 && a.right <= b.right + 0.5;
  const out = {labels: [], unreachable: []};
  for (const entry of legend.entries.filter(e => e.item.visible)) {  // a live view's unseen kinds wait hidden
    out.labels.push(entry.label);
    entry.el.scrollIntoView({block: "nearest", inline: "nearest"});
    const item = entry.el.getBoundingClientRect(), box = legend.el.getBoundingClientRect();
    const canvas = pv.canvas.el.getBoundingClientRect();
    if (!(inside(item, box) && inside(box, canvas))) out.unreachable.push(entry.label);
  }
  const kinds = new Set();
  for (let d = 0; d < 3; d++) for (const k of (wbModel(name + "_bars_" + d).data.kind ?? [])) kinds.add(k);
  out.kinds = [...kinds];
  return out;
}"""


def case_study_trace() -> Any:
    from workbench.importers import load_any

    return load_any(ROOT / "notebooks" / "data" / "h200_2e22" / "pageable_t14_w2.wbtrace")


def kernel_time_by_name(trace: Any) -> dict[str, int]:
    """Kernel time per name, from the spans on stream tracks (the grammar's kernel tracks)."""
    totals: dict[str, int] = {}
    for span in trace.iter_spans():
        if re.fullmatch(r"gpu\d+/stream/\d+", span.track):
            totals[span.name] = totals.get(span.name, 0) + span.end_ns - span.start_ns
    return totals


def pixel(page: Any, x: float, y: float) -> tuple[int, int, int]:
    from io import BytesIO

    from PIL import Image

    shot = page.screenshot(clip={"x": x - 1, "y": y - 1, "width": 3, "height": 3})
    return Image.open(BytesIO(shot)).convert("RGB").getpixel((1, 1))


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16))


@pytest.mark.parametrize("which", ["default_run", "case_study"])
def test_every_legend_entry_is_reachable_and_a_click_hides_its_bars(page, tmp_path, which):
    from workbench.config import RunConfig
    from workbench.pipeline.run import run_pipeline
    from workbench.viz.palette import PHASE_COLORS
    from workbench.viz.report import render_report

    if which == "default_run":  # the panel's shape: 2 GPU workers, 2 synthesis threads
        trace = run_pipeline(RunConfig(backend="cpu", partitions=4, log2_constraints=6)).trace
    else:
        trace = case_study_trace()
    path = tmp_path / "report.html"
    path.write_text(render_report(trace, verdict=False), encoding="utf-8")
    open_offline(page, path, timeout_ms=60_000)
    page.evaluate(PLOT_JS)
    legend = page.evaluate(LEGEND_JS, "gantt")
    assert not legend["unreachable"], f"legend entries out of reach: {legend['unreachable']}"
    assert sorted(legend["labels"]) == sorted(legend["kinds"])  # one entry per kind drawn
    if which == "case_study":
        # The six kernels that took longest have entries of their own, the rest share one.
        top = sorted(kernel_time_by_name(trace).items(), key=lambda kv: -kv[1])[:6]
        assert {name for name, _ in top} <= set(legend["labels"]) and "other kernels" in legend["labels"]
        assert len(legend["labels"]) <= 40
    gantt = page.evaluate("""() => { const r = wbPlot('gantt').el.getBoundingClientRect();
        return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; }""")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"gantt-legend-{which}.png"), clip=gantt, full_page=True)
    if which == "case_study":  # the Gantt, its legend and the counters, one figure per unit
        page.screenshot(path=str(ARTIFACTS / "case-study-report.png"), full_page=True)

    # A click on "mutex_wait" hides its bars: a pixel of the longest wait turns from its colour
    # to the plot's white (a quarter in: flow arrows end at a wait's edges).
    # Its entry shows the kind's colour.
    swatch = page.locator(".bk-Legend .bk-item", has_text=re.compile(r"^mutex_wait$")).first.locator("canvas")
    swatch.scroll_into_view_if_needed()
    box = swatch.bounding_box()
    assert pixel(page, box["x"] + box["width"] / 2, box["y"] + box["height"] / 2) == hex_rgb(
        PHASE_COLORS["mutex_wait"])
    where = "() => wbBarPoint('gantt', 'mutex_wait', 0.25)"
    x, y = page.evaluate(where)
    assert pixel(page, x, y) == hex_rgb(PHASE_COLORS["mutex_wait"])
    entry = page.locator(".bk-Legend .bk-item", has_text=re.compile(r"^mutex_wait$")).first
    entry.scroll_into_view_if_needed()
    entry.click()
    page.wait_for_function("() => !wbModel('gantt|mutex_wait').visible")
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)")
    x, y = page.evaluate(where)
    assert pixel(page, x, y) == (255, 255, 255)
    assert not page.console_errors


def test_hovering_nested_bars_gives_one_tooltip_naming_the_parents(page, tmp_path):
    from workbench.config import RunConfig
    from workbench.pipeline.run import run_pipeline
    from workbench.viz.report import render_report

    trace = run_pipeline(RunConfig(backend="cpu", partitions=2, log2_constraints=6)).trace
    path = tmp_path / "report.html"
    path.write_text(render_report(trace, verdict=False), encoding="utf-8")
    open_offline(page, path)
    page.evaluate(PLOT_JS)
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)")
    x, y = page.evaluate("() => wbBarPoint('gantt', 'msm_h')")  # inside ntt_msm_h inside a hold
    page.mouse.move(x, y)
    tips = page.locator(".bk-tooltip-content")
    tips.first.wait_for(state="visible", timeout=10_000)
    # Each nested bar's renderer answers the hover; the page's script then hides all but the
    # innermost. On a loaded machine a look can fall between the two: the count is polled until
    # it is one, and the test fails if more than one tooltip is still shown after 5 s.
    playwright_api.expect(page.locator(".bk-tooltip-content >> visible=true")).to_have_count(1, timeout=5_000)
    shown = [t for t in tips.all() if t.is_visible()]
    assert len(shown) == 1
    text = shown[0].inner_text()
    assert re.search(r"phase:\s+msm_h", text)
    assert re.search(r"within:\s+mutex_hold \([\d.]+ ms\) › ntt_msm_h \([\d.]+ ms\)", text)
    screenshot(page, "gantt-hover")


def boxes_overlapping(boxes: list[tuple[str, dict[str, float]]]) -> list[tuple[str, str]]:
    found = []
    for i, (name_a, a) in enumerate(boxes):
        for name_b, b in boxes[i + 1:]:
            if (a["x"] < b["x"] + b["width"] - 1 and b["x"] < a["x"] + a["width"] - 1
                    and a["y"] < b["y"] + b["height"] - 1 and b["y"] < a["y"] + a["height"] - 1):
                found.append((name_a, name_b))
    return found


# An element's box as far as it can be seen: cut by every box around it that scrolls or clips,
# up to its notebook cell (a long output scrolls in a box of its own in some notebook
# interfaces, and what it holds past that box's edge lies under the next cell without being
# seen there). The notebook's own scrolling is left alone: its cells below the fold count.
SEEN_BOX_JS = """(el) => {
  const r = el.getBoundingClientRect();
  let [l, t, rr, b] = [r.left, r.top, r.right, r.bottom];
  for (let n = el.parentNode; n; n = n.parentNode) {
    if (n.nodeType === 11) n = n.host;  // out of a shadow root, to the element that holds it
    if (!n || n.nodeType !== 1 || n.classList.contains("jp-Cell")) break;
    const s = getComputedStyle(n);
    if (s.overflowX === "visible" && s.overflowY === "visible") continue;
    const c = n.getBoundingClientRect();
    [l, t, rr, b] = [Math.max(l, c.left), Math.max(t, c.top), Math.min(rr, c.right), Math.min(b, c.bottom)];
  }
  return rr > l && b > t ? {x: l, y: t, width: rr - l, height: b - t} : null;
}"""


def layout_boxes(page: Any, scope: Any = None) -> list[tuple[str, dict[str, float]]]:
    """Seen boxes (SEEN_BOX_JS) of every summary table and every Gantt or counter figure on the
    page."""
    root = scope if scope is not None else page
    found = []
    for kind, selector in (("table", "table.wb-table"), ("figure", ".bk-Figure")):
        for n, element in enumerate(root.locator(selector).all()):
            box = element.evaluate(SEEN_BOX_JS) if element.is_visible() else None
            if box and box["width"] and box["height"]:
                caption = element.locator("caption").all_inner_texts() if kind == "table" else []
                found.append((f"{kind} {n} {caption[0] if caption else ''}".strip(), box))
    return found


def settled_boxes(page: Any, timeout_s: float = 15) -> list[tuple[str, dict[str, float]]]:
    """`layout_boxes` once two looks half a second apart agree: a notebook still placing a
    cell's output moves what lies below it between one element's box and the next."""
    before, deadline = layout_boxes(page), time.monotonic() + timeout_s
    while True:
        page.wait_for_timeout(500)
        now = layout_boxes(page)
        if now == before or time.monotonic() > deadline:
            return now
        before = now


@pytest.mark.parametrize("width", [900, 1300])
def test_compare_tables_and_figures_never_overlap(page, tmp_path, width):
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    from workbench.importers import load_any
    from workbench.viz.compare import compare_figure

    data = ROOT / "notebooks" / "data" / "h200_2e22"
    a, b = load_any(data / "pageable_t14_w2.wbtrace"), load_any(data / "zerocopy_t14_w2.wbtrace")
    path = tmp_path / "compare.html"
    layout = compare_figure(a, b, ("pageable_t14_w2", "zerocopy_t14_w2"))
    path.write_text(file_html(layout, INLINE, "compare"))
    page.set_viewport_size({"width": width, "height": 1000})
    open_offline(page, path, timeout_ms=60_000)
    boxes = layout_boxes(page)
    assert sum(name.startswith("table") for name, _ in boxes) == 7  # A's three, B's three, B against A
    assert sum(name.startswith("figure") for name, _ in boxes) >= 2
    assert not boxes_overlapping(boxes)
    page.screenshot(path=str(ARTIFACTS / f"compare-{width}.png"), full_page=True)
    assert not page.console_errors


# -- (b) JupyterLab ----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[dict[str, Any]]:
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    home = tmp_path_factory.mktemp("lab")
    work = home / "notebooks"
    shutil.copytree(ROOT / "notebooks", work)
    quickstart = nbjson(work / "01_quickstart.ipynb")
    assert PANEL_CELL in quickstart
    (work / "01_quickstart.ipynb").write_text(quickstart.replace(PANEL_CELL, QUICK_PANEL))
    long_run = quickstart.replace(PANEL_CELL, "panel = wb.panel(partitions=400, log2_constraints=10)")
    (work / "long_run.ipynb").write_text(long_run)
    shutil.copy(work / "01_quickstart.ipynb", work / "classic.ipynb")
    (work / "page_panel.ipynb").write_text(quickstart.replace(
        PANEL_CELL, "panel = wb.panel(partitions=8, log2_constraints=10, live_view='page')"))
    (work / "compare_panel.ipynb").write_text(small_notebook(
        ["import workbench.notebook as wb", "panel = wb.panel(partitions=2, log2_constraints=8)"]))
    settings = home / "settings" / "@jupyterlab"
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "notebook-extension").mkdir(parents=True)
    # No news and no update checks: the browser must not reach for the network.
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    # Start the notebook's own kernel without asking, as a person ticking "always" would.
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"autoStartDefaultKernel": True}))
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "WORKBENCH_CACHE": str(tmp_path_factory.getbasetemp() / "srs-cache"),
           # The kernels import this checkout's code, not an installed copy.
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
        f"--port={port}", f"--ServerApp.token={TOKEN}", f"--ServerApp.root_dir={work}",
        f"--LabApp.user_settings_dir={home / 'settings'}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
    ]
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "jupyterlab.log", "w")  # noqa: SIM115 - closed after the server stops
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log_tail = (ARTIFACTS / "jupyterlab.log").read_text()[-3000:]
                    pytest.fail("JupyterLab did not start:\n" + log_tail)
                time.sleep(0.5)
        yield {"url": url, "work": work}
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        log.close()


def nbjson(path: Path) -> str:
    return path.read_text()


def small_notebook(cells: list[str]) -> str:
    return json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                   "source": source} for source in cells],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    })


ALL_CELLS_RAN_JS = """() => {
  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
    .map(p => p.textContent.trim());
  return prompts.length > 0 && prompts.every(t => /^\\[\\d+\\]:$/.test(t));
}"""


def wait_accepting_dialogs(page: Any, ready: Any, what: str, timeout: float) -> None:
    """Poll `ready()`; JupyterLab may ask which kernel to start, and the notebook's own kernel
    is the dialog's default, so any dialog on the way is accepted."""
    accept = page.locator(".jp-Dialog .jp-mod-accept")
    deadline = time.monotonic() + timeout
    while not ready():
        if accept.count() and accept.first.is_visible():
            accept.first.click()
        if time.monotonic() > deadline:
            screenshot(page, f"failed-{what}")
            pytest.fail(f"timed out: {what}")
        time.sleep(0.25)


def start_kernel(lab: dict[str, Any], notebook: str) -> None:
    """Start the notebook's kernel through the server, so the page attaches to a running one
    instead of racing its own start against "run all"."""
    body = json.dumps({"path": notebook, "type": "notebook", "name": notebook,
                       "kernel": {"name": "python3"}}).encode()
    request = urllib.request.Request(
        f"{lab['url']}/api/sessions", data=body, method="POST",
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=60).read()


def run_all(page: Any) -> None:
    page.click("div.lm-MenuBar-itemLabel:text-is('Run')")
    page.click("li.lm-Menu-item[data-command='runmenu:run-all']")


def open_and_run_all(page: Any, lab: dict[str, Any], notebook: str, classic: bool = False) -> None:
    start_kernel(lab, notebook)
    if classic:
        page.goto(f"{lab['url']}/notebooks/{notebook}?token={TOKEN}")
    else:
        # A workspace of its own: nothing restored from an earlier test competes for the kernel.
        workspace = re.sub(r"\W", "-", notebook)
        page.goto(f"{lab['url']}/lab/workspaces/{workspace}/tree/{notebook}?token={TOKEN}")
    page.wait_for_selector(".jp-Notebook", timeout=90_000)
    idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    status = page.locator(".jp-StatusBar-TextItem", has_text="| Idle")

    def ready() -> bool:
        if classic:  # no status bar there; the kernel was started above
            return idle.count() > 0
        return idle.count() > 0 and status.count() > 0 and "No Kernel" not in status.first.inner_text()

    wait_accepting_dialogs(page, ready, f"open {notebook}", 90)
    run_all(page)
    # A kernel that was still settling can drop the queued cells; an idle kernel with cells
    # left unrun for a while gets "run all" again (the notebook's cells may run twice).
    idle_since = [time.monotonic()]

    def all_ran() -> bool:
        if page.evaluate(ALL_CELLS_RAN_JS):
            return True
        if not idle.count():
            idle_since[0] = time.monotonic()
        elif time.monotonic() - idle_since[0] > 8:
            run_all(page)
            idle_since[0] = time.monotonic()
        return False

    wait_accepting_dialogs(page, all_ran, f"run all of {notebook}", 180)
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert not [t for t in errors.all_inner_texts() if "Traceback" in t or "Error" in t]


def assert_no_errors_of_ours(page: Any) -> None:
    """No console error and no failed request, except the notebook interface's own: its shell
    throws once while loading settings and one of its fonts answers 403, before any cell runs
    and whatever the notebook holds; on a loaded machine its debugger's state restore can be
    cancelled by the kernel's own start (the debugger is the interface's, never ours)."""
    shell = "/static/notebook/"
    failed = [url for url in page.failed_requests if shell not in url]
    shell_failures = len(page.failed_requests) - len(failed)
    load_failures = [e for e in page.console_errors if e.startswith("Failed to load resource")]
    others = [e for e in page.console_errors
              if "static/notebook/notebook_core" not in e and not e.startswith("Failed to load resource")
              and not e.startswith("Could not restore the debugger state")]
    assert not failed and not others and len(load_failures) <= shell_failures, (
        failed, others, load_failures)


def panel_status(page: Any) -> str:
    texts = page.locator(".widget-html-content").all_inner_texts()
    return next((t for t in texts if re.match(r"run \d+", t)), "")


def run_button(page: Any) -> Any:
    return page.locator("button.jupyter-button:text-is('Run')").first


def panel_running_shot(page: Any) -> None:
    """The panel part-way through a run: its knobs, buttons, progress bar and the top of its live
    Gantt (for the notes; a picture, nothing checked)."""
    bar = page.locator(".widget-hprogress .progress-bar, .widget-hprogress").first
    bar.scroll_into_view_if_needed()
    panel = page.locator(".jp-OutputArea-output", has=page.locator("button.jupyter-button:text-is('Run')"))
    box = panel.first.bounding_box()
    if box:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab-panel-running.png"),
                        clip={"x": box["x"], "y": max(box["y"], 0), "width": box["width"],
                              "height": min(box["height"], 700)})


@pytest.mark.parametrize("interface", ["jupyterlab", "classic"])
def test_quickstart_runs_and_draws_every_partition(page, lab, interface):
    notebook = "01_quickstart.ipynb" if interface == "jupyterlab" else "classic.ipynb"
    open_and_run_all(page, lab, notebook, classic=interface == "classic")
    button = run_button(page)
    button.scroll_into_view_if_needed()
    button.click()
    page.wait_for_function(
        """(js) => {
          const rows = eval(js)('live');
          const done = new Set(rows.filter(r => r[0] === 'finish').map(r => r[1]));
          return done.size === 8;
        }""", arg=BARS_JS, timeout=120_000)
    deadline = time.monotonic() + 60
    while "completed" not in panel_status(page) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "run 1 completed: 8/8 partitions" in panel_status(page)
    partitions = {p for _, p in page.evaluate(BARS_JS, "live") if p >= 0}
    assert partitions == set(range(8))
    # The live Gantt's legend within reach, and none of the panel's figures over another.
    page.evaluate(PLOT_JS)
    legend = page.evaluate(LEGEND_JS, "live")
    assert legend["labels"] and not legend["unreachable"], legend["unreachable"]
    boxes = settled_boxes(page)
    overlapping = boxes_overlapping(boxes)
    if overlapping:
        names = {a for pair in overlapping for a in pair}
        first = next(box for name, box in boxes if name in names)
        page.evaluate(f"() => window.scrollTo(0, {first['y']} - 100)")
        screenshot(page, f"failed-{interface}-overlap")
    assert not overlapping, (overlapping, [b for b in boxes if b[0] in {a for p in overlapping for a in p}])
    page.locator(".bk-Figure, .bk-Column").first.scroll_into_view_if_needed()
    screenshot(page, f"{interface}-quickstart")
    assert_no_errors_of_ours(page)


def test_the_panels_live_view_as_a_page_of_its_own_draws_every_partition(page, lab):
    """live_view="page": the page in the panel's frame is the view's process's server; the
    controls and the status line are the kernel's."""
    open_and_run_all(page, lab, "page_panel.ipynb")
    button = run_button(page)
    button.scroll_into_view_if_needed()
    button.click()
    framed = page.locator(".widget-html-content iframe").first
    framed.wait_for(timeout=60_000)
    assert framed.get_attribute("src").startswith("http://127.0.0.1:")
    frame = framed.element_handle().content_frame()
    assert frame is not None and not frame.url.startswith(lab["url"])
    frame.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=60_000)
    frame.wait_for_function(
        """(js) => {
          const rows = eval(js)('live');
          return new Set(rows.filter(r => r[0] === 'finish').map(r => r[1])).size === 8;
        }""", arg=BARS_JS, timeout=120_000)
    deadline = time.monotonic() + 60
    while "completed" not in panel_status(page) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "run 1 completed: 8/8 partitions" in panel_status(page)
    assert {p for _, p in frame.evaluate(BARS_JS, "live") if p >= 0} == set(range(8))
    page.locator("iframe").first.scroll_into_view_if_needed()
    screenshot(page, "jupyterlab-panel-view-page")
    assert_no_errors_of_ours(page)


def test_stop_mid_run_in_jupyterlab_reports_stopped_and_leaves_no_run_thread(page, lab):
    open_and_run_all(page, lab, "long_run.ipynb")
    run_button(page).click()
    page.wait_for_function(
        """(js) => eval(js)('live').some(r => r[0] === 'finish')""", arg=BARS_JS, timeout=120_000)
    panel_running_shot(page)
    page.locator("button.jupyter-button:text-is('Stop')").first.click()
    deadline = time.monotonic() + 60
    while "stopped" not in panel_status(page) and time.monotonic() < deadline:
        time.sleep(0.2)
    status = panel_status(page)
    assert re.search(r"run 1 stopped: \d+/400 partitions", status), status
    screenshot(page, "jupyterlab-stopped")
    # Ask the kernel, from a new cell, which of the workbench's threads are still there.
    page.locator(".jp-CodeCell").last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("Enter")  # into the new cell's editor
    page.keyboard.type("import threading; print('threads:', sorted(t.name for t in threading.enumerate() "
                       "if t.name.startswith('workbench-')))")
    page.keyboard.press("Shift+Enter")
    # The new cell's output alone: the panel's verdict speaks of synthesis threads too, and
    # matched while the new cell had not printed yet.
    output = page.locator(".jp-OutputArea-output", has_text=re.compile(r"^\s*threads: \[")).last
    try:
        output.wait_for(timeout=30_000)
    except playwright_api.TimeoutError:
        screenshot(page, "failed-threads-cell")
        raise
    assert output.inner_text().strip() == "threads: []"


LAPTOP = {"width": 1200, "height": 900}  # where the overlaps were seen; wide screens hid them


def test_memory_modes_notebook_compare_has_no_overlapping_tables_or_figures(page, lab):
    page.set_viewport_size(LAPTOP)
    open_and_run_all(page, lab, "02_memory_modes.ipynb")
    boxes = layout_boxes(page)
    assert sum(name.startswith("table") for name, _ in boxes) >= 7
    assert sum(name.startswith("figure") for name, _ in boxes) >= 2
    overlapping = boxes_overlapping(boxes)
    page.locator("table.wb-table").first.scroll_into_view_if_needed()
    screenshot(page, "jupyterlab-02-compare")
    assert not overlapping
    assert_no_errors_of_ours(page)


def test_case_study_compares_have_no_overlapping_tables_or_figures(page, lab):
    """03's two compare cells, on its H200 traces, as 03 calls them (03 itself runs minutes of
    verdicts and replays besides)."""
    page.set_viewport_size(LAPTOP)
    data = ROOT / "notebooks" / "data" / "h200_2e22"
    (lab["work"] / "study_compare.ipynb").write_text(small_notebook([
        "import workbench.notebook as wb",
        f"runs = {{n: wb.load({str(data)!r} + '/' + n + '.wbtrace') for n in "
        "('pageable_t14_w2', 'zerocopy_t14_w2', 'pageable_t14_w2_load14', 'zerocopy_t14_w2_load14')}",
        "wb.compare(runs['pageable_t14_w2_load14'], runs['zerocopy_t14_w2_load14'])",
        "wb.compare(runs['pageable_t14_w2'], runs['zerocopy_t14_w2'])",
    ]))
    open_and_run_all(page, lab, "study_compare.ipynb")
    page.get_by_text("B against A").nth(1).wait_for(timeout=60_000)
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)", timeout=60_000)
    boxes = layout_boxes(page)
    assert sum("B against A" in name for name, _ in boxes) == 2
    assert sum(name.startswith("figure") for name, _ in boxes) >= 4
    text = page.inner_text(".jp-Notebook")
    assert "A: pageable_t14_w2_load14.wbtrace" in text and "run A" not in text  # named by their files
    overlapping = boxes_overlapping(boxes)
    page.get_by_text("B against A").first.scroll_into_view_if_needed()
    screenshot(page, "jupyterlab-03-compare")
    assert not overlapping
    assert_no_errors_of_ours(page)


def test_panel_compare_has_no_overlapping_tables_or_figures(page, lab):
    page.set_viewport_size(LAPTOP)
    open_and_run_all(page, lab, "compare_panel.ipynb")
    for number in (1, 2):
        run_button(page).click()
        deadline = time.monotonic() + 120
        while f"run {number} completed" not in panel_status(page) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert f"run {number} completed" in panel_status(page)
    compare = page.locator("button.jupyter-button:text-is('Compare')").first
    compare.scroll_into_view_if_needed()
    compare.click()
    page.get_by_text("B against A").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1_000)  # the compare Gantts draw after their tables
    boxes = layout_boxes(page)
    assert sum("B against A" in name for name, _ in boxes) == 1
    overlapping = boxes_overlapping(boxes)
    page.get_by_text("B against A").first.scroll_into_view_if_needed()
    screenshot(page, "jupyterlab-panel-compare")
    assert not overlapping
    assert_no_errors_of_ours(page)


def test_a_run_from_the_panel_makes_no_bokeh_warning_in_the_console(page, lab):
    """Each Run used to log Bokeh's warnings about the distributions' empty log axis."""
    warnings: list[str] = []
    page.on("console", lambda m: m.type in ("warning", "error") and "bokeh" in m.text.lower()
            and warnings.append(m.text))
    (lab["work"] / "warnings.ipynb").write_text(small_notebook(
        ["import workbench.notebook as wb", "panel = wb.panel(partitions=4, log2_constraints=8)"]))
    open_and_run_all(page, lab, "warnings.ipynb")
    run_button(page).click()
    deadline = time.monotonic() + 120
    while "run 1 completed" not in panel_status(page) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "run 1 completed" in panel_status(page)
    page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)")
    assert not warnings, warnings


def test_a_reopened_notebook_shows_the_panels_last_run_instead_of_a_widget_error(page, lab):
    """Run from the panel, save, end the kernel, open the notebook again: where the widget's
    model is gone the static copy of the last run is shown, its Gantt drawn; while the kernel
    lived the copy stayed hidden (the panel's output appears once)."""
    name = "reopen.ipynb"
    (lab["work"] / name).write_text(small_notebook(
        ["import workbench.notebook as wb", "panel = wb.panel(partitions=3, log2_constraints=6)"]))
    open_and_run_all(page, lab, name)
    run_button(page).click()
    deadline = time.monotonic() + 120
    while "run 1 completed" not in panel_status(page) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "run 1 completed" in panel_status(page)
    copy = page.locator(".wb-fallback")
    copy.first.wait_for(state="attached", timeout=30_000)
    assert not copy.first.is_visible()
    page.locator(".jp-Notebook").first.click()
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while "wb-fallback" not in (lab["work"] / name).read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    saved = json.loads((lab["work"] / name).read_text())
    assert any("wb-fallback" in "".join(o.get("data", {}).get("text/html", ""))
               for cell in saved["cells"] for o in cell.get("outputs", []))
    headers = {"Authorization": f"token {TOKEN}"}
    sessions = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"{lab['url']}/api/sessions", headers=headers)).read())
    for session in sessions:
        urllib.request.urlopen(urllib.request.Request(
            f"{lab['url']}/api/sessions/{session['id']}", method="DELETE", headers=headers)).read()
    page.goto(f"{lab['url']}/lab/workspaces/reopened/tree/{name}?token={TOKEN}")
    page.wait_for_selector(".jp-Notebook", timeout=90_000)
    shown = page.locator(".wb-fallback:not([hidden])")
    wait_accepting_dialogs(page, lambda: shown.count() > 0, "the static copy shown", 90)
    text = shown.first.inner_text()
    assert "run 1 completed: 3/3 partitions" in text
    shown.first.locator(".bk-Figure, canvas").first.wait_for(timeout=30_000)  # its Gantt drawn
    errors = page.get_by_text("model not found")
    assert not [e for e in errors.all() if e.is_visible()]
    shown.first.scroll_into_view_if_needed()
    screenshot(page, "jupyterlab-reopened")
