"""Report cost for large traces: generation time, file size, time to first render.

    python benchmarks/report_size.py [--spans 10000 100000 1000000] [--chromium /usr/bin/chromium]

Traces are a real CPU-backend pipeline trace tiled back to back to the wanted number of
spans. Generation is timed with the verdict and again without it, to tell the two apart.
Time to first render is from navigation start until every Bokeh view of the page is idle,
in headless chromium (skipped when chromium or playwright is missing).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from workbench.config import RunConfig
from workbench.pipeline.run import run_pipeline
from workbench.trace.container import Trace
from workbench.viz.report import render_report

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
BARS_JS = """() => {
  let n = 0;
  for (const doc of Bokeh.documents)
    for (const m of doc.all_models)
      if (m.type === 'ColumnDataSource' && m.name && m.name.includes('_bars_')) n += m.data.left.length;
  return n;
}"""


def tiled_trace(spans: int) -> Trace:
    os.environ.setdefault("WORKBENCH_CACHE", tempfile.mkdtemp(prefix="wb-srs-"))
    trace = run_pipeline(RunConfig(backend="cpu", partitions=8, log2_constraints=8)).trace
    first, last = trace.time_range()
    period = last - first
    base = list(trace.iter_spans())
    rows = []
    k = 0
    while len(rows) < spans:
        rows += [(s.track, s.name, s.start_ns + k * period, s.end_ns + k * period, s.partition + 8 * k,
                  s.worker, s.attrs or None) for s in base]
        k += 1
    instants = [(i.track, i.name, i.ts_ns, i.partition, i.worker, i.attrs or None)
                for i in trace.iter_instants() if i.name == "run_start"]
    return Trace.from_rows(rows[:spans], instants, config=trace.config, meta=trace.meta)


def first_render_s(path: Path, chromium: str) -> tuple[float, int] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(chromium).exists():
        return None
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(path.as_uri(), timeout=300_000)
        page.wait_for_function(
            "() => window.Bokeh && Bokeh.documents.length > 0 && "
            "Object.values(Bokeh.index).length > 0 && Object.values(Bokeh.index).every(v => v.is_idle)",
            timeout=300_000)
        rendered_ms = page.evaluate("() => performance.now()")
        bars = page.evaluate(BARS_JS)
        browser.close()
    return rendered_ms / 1e3, bars


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="wb-report-"))
    print(f"{'spans':>10} {'generate s':>11} {'of which verdict':>17} {'file MB':>8} {'first render s':>15} "
          f"{'bars drawn':>11}")
    for spans in args.spans:
        trace = tiled_trace(spans)
        began = time.perf_counter()
        html = render_report(trace)
        generate_s = time.perf_counter() - began
        began = time.perf_counter()
        render_report(trace, verdict=False)
        verdict_s = generate_s - (time.perf_counter() - began)
        path = out / f"report-{spans}.html"
        path.write_text(html, encoding="utf-8")
        rendered = first_render_s(path, args.chromium)
        render_text = f"{rendered[0]:15.2f} {rendered[1]:11,}" if rendered else f"{'n/a':>15} {'n/a':>11}"
        print(f"{spans:>10,} {generate_s:11.2f} {verdict_s:17.2f} {path.stat().st_size / 1e6:8.1f} "
              f"{render_text}")


if __name__ == "__main__":
    main()
