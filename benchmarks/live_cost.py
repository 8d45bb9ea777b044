"""What watching a run live costs the run: the same CPU-backend run watched and unwatched.

    python benchmarks/live_cost.py [--partitions 1050] [--log2 6] [--rounds 2] [--no-browser]

Watched: the run's live view (Gantt, counters, distributions) in a Bokeh server document
served from this process, as a notebook kernel holds it, drawn by a headless chromium that
renders every update; the poller updates it at 10 Hz and refreshes the running summary as
the panel does (once a second, backing off when it is dear). Unwatched: the same run with
nobody looking. Rounds alternate (watched first, then unwatched, ...) so a change in the
machine's load hits both. The throughput of each run is its summary's; the figures printed
are medians over the rounds, with this process's CPU seconds, chromium's, the cost of an
update and the host's load average while measuring. The target: watched at least 95% of
unwatched, at 20,000 spans (about 1,050 partitions of 19 spans) and 10 Hz.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import tempfile
import threading
from typing import Any

from workbench.analysis.summary import summarize
from workbench.config import RunConfig
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.viz.lanes import expected_lanes
from workbench.viz.live import LiveView, Poller, SummaryPacer, running_summary_html

CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium")
TARGET = 0.95
DRAWN_JS = """() => {
  let n = 0;
  for (const d of Bokeh.documents) for (let k = 0; k < 3; k++) {
    const s = d.get_model_by_name('live_bars_' + k);
    if (s) n += s.data.left.length;
  }
  return n;
}"""


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def chromium_cpu_s() -> float:
    """CPU seconds of every chromium process started under this one (from /proc)."""
    stats: dict[int, tuple[int, str, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = open(f"/proc/{entry}/stat").read()  # noqa: SIM115 - read at once
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        stats[int(entry)] = (int(fields[1]), name, (int(fields[11]) + int(fields[12])) / tick)
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (parent, _, _) in stats.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return sum(cpu for pid, (_, name, cpu) in stats.items() if pid in mine and "chrom" in name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A Bokeh server on a thread of its own, its one document holding `layout`."""

    def __init__(self, layout: Any) -> None:
        from bokeh.application import Application
        from bokeh.application.handlers.function import FunctionHandler
        from bokeh.server.server import Server
        from tornado.ioloop import IOLoop

        self.port = free_port()
        self.doc: Any = None
        ready = threading.Event()

        def make(doc: Any) -> None:
            doc.add_root(layout)
            self.doc = doc

        def serve() -> None:
            asyncio.set_event_loop(asyncio.new_event_loop())
            self.loop = IOLoop.current()
            self.server = Server({"/live": Application(FunctionHandler(make))}, port=self.port,
                                 io_loop=self.loop, allow_websocket_origin=[f"127.0.0.1:{self.port}"])
            self.server.start()
            ready.set()
            self.loop.start()

        self.thread = threading.Thread(target=serve, name="bokeh-server", daemon=True)
        self.thread.start()
        ready.wait(30)

    def call(self, fn: Any) -> Any:
        """Run `fn` on the server's loop, holding the document's lock, and wait for it."""
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            try:
                box.append(fn())
            finally:
                done.set()

        self.doc.add_next_tick_callback(run)
        done.wait()
        return box[0] if box else None

    def stop(self) -> None:
        self.loop.add_callback(self.server.stop)
        self.loop.add_callback(self.loop.stop)
        self.thread.join(10)


def one_run(config: RunConfig, watched: bool, browser: bool) -> dict[str, float]:
    pipeline = Pipeline(config, CpuBackend())
    result: dict[str, float] = {}
    if not watched:
        began = cpu_s()
        pipeline.run()
        trace = pipeline.result(0.0).trace
        result["cpu_s"] = cpu_s() - began
        result["rate"] = summarize(trace).throughput_per_min
        result["spans"] = len(trace.spans)
        return result
    lanes = expected_lanes(config.synth_threads, config.workers, config.gpu_workers)
    live = LiveView(pipeline.recorder, lanes, name="live", label="benchmark")
    served = Served(live.layout)
    driver = page = browser_handle = None
    if browser:
        from playwright.sync_api import sync_playwright

        driver = sync_playwright().start()
        browser_handle = driver.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        page = browser_handle.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"http://127.0.0.1:{served.port}/live")
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=60_000)
    pacer = SummaryPacer()
    finished = threading.Event()

    def tick() -> bool:
        final = finished.is_set()
        served.call(lambda: live.tick(final=final))
        if pacer.due():
            with pacer.timed():
                running_summary_html(pipeline.recorder)
        return not final

    chromium_before = chromium_cpu_s() if browser else 0.0
    began = cpu_s()
    poller = Poller(tick)
    poller.start()
    pipeline.run()
    finished.set()
    poller.join(60)
    if poller.error is not None:
        raise poller.error
    result["cpu_s"] = cpu_s() - began
    if browser:
        assert page is not None
        page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)", timeout=60_000)
        result["chromium_cpu_s"] = chromium_cpu_s() - chromium_before
        result["drawn"] = page.evaluate(DRAWN_JS)
    trace = pipeline.result(0.0).trace
    result["rate"] = summarize(trace).throughput_per_min
    result["spans"] = len(trace.spans)
    result["updates"] = live.stats.updates
    result["update_mean_ms"] = live.stats.mean_ms
    result["update_max_ms"] = live.stats.max_ms
    result["update_cpu_ms"] = live.stats.cpu_mean_ms
    result["deferred"] = live.stats.deferred
    result["summaries"] = pacer.count
    if browser_handle is not None and driver is not None:
        browser_handle.close()
        driver.stop()
    served.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=1050)
    parser.add_argument("--log2", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-browser", action="store_true", help="the server document only, no chromium")
    args = parser.parse_args()
    os.environ.setdefault("WORKBENCH_CACHE", tempfile.mkdtemp(prefix="wb-srs-"))
    config = RunConfig(backend="cpu", partitions=args.partitions, log2_constraints=args.log2)
    one_run(config.replace(partitions=8), False, False)  # the proving key, made once
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    loads = [os.getloadavg()[0]]
    for k in range(args.rounds):
        for watched in (True, False):
            r = one_run(config, watched, not args.no_browser)
            runs[watched].append(r)
            loads.append(os.getloadavg()[0])
            print(f"round {k + 1} {'watched  ' if watched else 'unwatched'}: {r['rate']:.1f} partitions/min, "
                  f"{r['spans']:.0f} spans, this process {r['cpu_s']:.1f} CPU s"
                  + (f", chromium {r['chromium_cpu_s']:.1f} CPU s" if 'chromium_cpu_s' in r else "")
                  + (f", {r['updates']:.0f} updates, {r['deferred']:.0f} polls deferred (update mean "
                     f"{r['update_mean_ms']:.1f} ms, {r['update_cpu_ms']:.1f} ms CPU, max "
                     f"{r['update_max_ms']:.1f} ms), {r['summaries']:.0f} summaries" if watched else ""),
                  flush=True)

    def med(watched: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[watched] if key in r)

    ratio = med(True, "rate") / med(False, "rate")
    verdict = "meets" if ratio >= TARGET else "misses"
    print(f"\nmedian of {args.rounds}: watched {med(True, 'rate'):.1f} vs unwatched {med(False, 'rate'):.1f} "
          f"partitions/min = {ratio:.1%} ({verdict} the {TARGET:.0%} target)")
    print(f"CPU: this process {med(True, 'cpu_s'):.1f} s watched vs {med(False, 'cpu_s'):.1f} s unwatched"
          + (f"; chromium {med(True, 'chromium_cpu_s'):.1f} s" if not args.no_browser else ""))
    print(f"updates: mean {med(True, 'update_mean_ms'):.1f} ms ({med(True, 'update_cpu_ms'):.1f} ms CPU), "
          f"max {med(True, 'update_max_ms'):.1f} ms; "
          f"host load average (1 min) {min(loads):.2f}–{max(loads):.2f} on {os.cpu_count()} cores")
    drawn = [r.get("drawn") for r in runs[True] if "drawn" in r]
    if drawn:
        print(f"bars in the browser at the end: {drawn} (spans recorded: {[r['spans'] for r in runs[True]]})")


if __name__ == "__main__":
    main()
