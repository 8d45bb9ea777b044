"""What watching a run live costs the run: the same run watched and unwatched.

    python benchmarks/live_cost.py [--backend cpu|gpu] [--partitions N] [--spans 20000] [--log2 K]
                                   [--rounds 2] [--viewer auto|chromium|websocket|none]
                                   [--view process|kernel] [--[no-]gpu-trace] [--budget-s S]
                                   [--json FILE]

Watched: the run's live view (Gantt, counters, distributions, the running summary) in a Bokeh
server document, updated at 10 Hz, the running summary refreshed as the panel does (every 2 s,
backing off when it is dear). Where the view lives (`--view`):
- `process` (default): a process of its own (viz/view_process.py, view_child.py); this process
  only drains the recorder at 10 Hz and writes the rows down a pipe as columns;
- `kernel`: this process, as a notebook kernel holds it with the panel's
  `live_view="kernel"` (the A of an A/B against `process`).
In a notebook the panel's default view also passes the view's patches on to the notebook
through the kernel: `benchmarks/live_cost_notebook.py` measures that path, in a real kernel.
Unwatched: the same run with nobody looking. Rounds alternate (watched first, then
unwatched, ...) so a change in the machine's load hits both. The CPU seconds of this process
(the run's) are given watched and unwatched: steadier than throughput on a shared host.

The viewer (said in the output):
- `chromium`: a headless chromium page that renders every update (its CPU counted apart);
- `websocket`: a websocket client of the document (benchmarks/live_client.py, bokeh.client)
  in a process of its own: it pulls the document and receives every patch, as a browser's
  page does, without drawing. In real use the browser runs on the user's machine, so what
  costs the run is this side: the updates serialised and sent over the websocket. Used by
  `auto` where there is no chromium (a GPU host);
- `none`: the document updated with no server and nobody connected (the view's own work).

`--backend gpu`: the pipeline's GPU backend as the case study's zerocopy_t14_w2 cell runs it
(partitions of 2^22, 14 synthesis processes each allowed to run ahead, 2 GPU workers,
zerocopy, bool_fraction 0.9, the device's activity recorded and streamed into the view as
it is flushed): about 145 spans a partition, so 20,000 spans are some 140 partitions, about
30 s at the cell's 285 partitions/min on an H200. Without the device's activity
(`--no-gpu-trace`) a partition makes 22 spans: a run of 915 partitions of 2^16 had not ended
after about 33 s there.
The warm-up run (8 partitions, not counted: the proving key, kernel builds, compiled
synthesis) also gives the spans a partition makes, from which `--partitions` is set to reach
`--spans` unless given; it says its rate and what a run should take. A fresh GPU host first
builds the kernels (NVRTC), in the warm-up: a first 4-partition run took 2 min 43 s on the
H200's host, most of it that build. The throughput of each run is its summary's; the figures
printed are medians over the rounds, with this process's CPU seconds, the viewer's, the cost
of an update and the host's load average while measuring. The target: watched at least 95%
of unwatched, at 20,000 spans (about 1,050 CPU-backend partitions of 19 spans) and 10 Hz.
benchmarks/live_cost_notebook.py measures the same for the notebook: the panel's run in a real
kernel, watched through its widget comm by a front end that applies every patch.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.analysis.summary import summarize
from workbench.config import RunConfig
from workbench.pipeline.backends import BackendUnavailable, select_backend
from workbench.pipeline.run import Pipeline
from workbench.viz.lanes import expected_lanes
from workbench.viz.live import LiveView, Poller
from workbench.viz.live_summary import RunningSummary, SummaryPacer
from workbench.viz.view_process import ViewProcess

CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium")
CLIENT = Path(__file__).resolve().parent / "live_client.py"
TARGET = 0.95
VIEWS = {"process": "in a process of its own, fed the rows at 10 Hz (viz/view_process.py)",
         "kernel": "in this process (viz/live.py's LiveView in a served document, as the panel holds it)"}
WARMUP_PARTITIONS = 8
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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/live"

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


def chromium_available() -> str | None:
    """Why chromium cannot be the viewer here, or None when it can."""
    if not Path(CHROMIUM).exists():
        return f"no chromium at {CHROMIUM}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None


def pick_viewer(asked: str) -> tuple[str, str]:
    """The viewer to use and the line that says what it is."""
    missing = chromium_available()
    if asked == "auto":
        asked = "chromium" if missing is None else "websocket"
    if asked == "chromium" and missing is not None:
        raise SystemExit(f"--viewer chromium: {missing}")
    said = {
        "chromium": f"headless chromium ({CHROMIUM}) drawing every update",
        "websocket": ("a websocket client of the server document (bokeh.client, benchmarks/live_client.py) "
                      "in its own process, receiving every patch" + (f"; chromium not used: {missing}"
                                                                      if missing else "")),
        "none": "nobody: the document is updated with no server and no connection",
    }[asked]
    return asked, said


class Chromium:
    def __init__(self, url: str) -> None:
        from playwright.sync_api import sync_playwright

        self.driver = sync_playwright().start()
        self.browser = self.driver.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        self.page = self.browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.goto(url)
        self.page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=60_000)
        self.cpu_before = chromium_cpu_s()

    def finish(self, held: int) -> dict[str, float]:
        self.page.wait_for_function("() => Object.values(Bokeh.index).every(v => v.is_idle)", timeout=60_000)
        out = {"viewer_cpu_s": chromium_cpu_s() - self.cpu_before, "drawn": self.page.evaluate(DRAWN_JS),
               "held": held}
        self.browser.close()
        self.driver.stop()
        return out


class Client:
    """benchmarks/live_client.py in a process of its own, connected to the served document."""

    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen([sys.executable, str(CLIENT), url], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != "ready":
            self.process.kill()
            raise SystemExit(f"the websocket viewer did not connect to {url} (said {line!r})")

    def finish(self, held: int) -> dict[str, float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"expect {held}\n")
        self.process.stdin.flush()
        said = json.loads(self.process.stdout.readline())
        self.process.wait(30)
        return {"viewer_cpu_s": said["cpu_s"], "drawn": said["held"], "held": held,
                "bars_received": said["bars_received"], "patches": said["patches"],
                "caught_up": float(said["caught_up"]), "catch_up_s": said["waited_s"]}


def one_run(config: RunConfig, watched: bool, viewer: str, view: str = "process") -> dict[str, float]:
    pipeline = Pipeline(config, select_backend(config))
    result: dict[str, float] = {}
    began_wall = time.perf_counter()
    if not watched:
        began = cpu_s()
        outcome = pipeline.run()
        result["run_s"] = time.perf_counter() - began_wall
        result["cpu_s"] = cpu_s() - began
        return finished(pipeline, outcome, result, began_wall)
    if view == "process":
        return watched_from_a_process(pipeline, config, viewer, result, began_wall)
    lanes = expected_lanes(config.synth_threads, config.workers, config.gpu_workers)
    live = LiveView(pipeline.recorder, lanes, name="live", label="benchmark")
    served: Served | None = None
    looker: Chromium | Client | None = None
    if viewer == "none":
        from bokeh.document import Document

        Document().add_root(live.layout)
    else:
        served = Served(live.layout)
        looker = Chromium(served.url) if viewer == "chromium" else Client(served.url)
    pacer = SummaryPacer()
    summary = RunningSummary(pipeline.recorder)
    done = threading.Event()

    def update(final: bool) -> None:
        if served is None or not (final or live.due()):
            live.tick(final=final)  # a poll left for later touches no Bokeh object
        else:
            served.call(lambda: live.tick(final=final))

    def tick() -> bool:
        final = done.is_set()
        update(final)
        if pacer.due():
            with pacer.timed():
                summary.html()
        if final:
            result["poller_cpu_s"] = time.thread_time()
        return not final

    began = cpu_s()
    server_began = served.call(time.thread_time) if served is not None else 0.0
    poller = Poller(tick)
    poller.start()
    running = time.perf_counter()
    outcome = pipeline.run()
    result["run_s"] = time.perf_counter() - running
    done.set()
    poller.join(60)
    if poller.error is not None:
        raise poller.error
    result["cpu_s"] = cpu_s() - began
    if served is not None:
        result["server_cpu_s"] = served.call(time.thread_time) - server_began
    if looker is not None and served is not None:
        result.update(looker.finish(int(served.call(live.gantt.bar_count))))
    result["updates"] = live.stats.updates
    result["update_mean_ms"] = live.stats.mean_ms
    result["update_max_ms"] = live.stats.max_ms
    result["update_cpu_ms"] = live.stats.cpu_mean_ms
    result["deferred"] = live.stats.deferred
    result["summaries"] = pacer.count
    result.update({f"part_{name}_s": seconds for name, seconds in live.stats.parts.items()})
    if served is not None:
        served.stop()
    return finished(pipeline, outcome, result, began_wall)


def watched_from_a_process(pipeline: Pipeline, config: RunConfig, viewer: str, result: dict[str, float],
                           began_wall: float) -> dict[str, float]:
    """The view in a process of its own (viz/view_process.py): this process only ships rows."""
    lanes = expected_lanes(config.synth_threads, config.workers, config.gpu_workers)
    view = ViewProcess(pipeline.recorder, lanes, name="live", label="benchmark", summary=True,
                       say=lambda line: print(f"live_cost: {line}", flush=True)).start()
    looker: Chromium | Client | None = None
    if viewer != "none":
        looker = Chromium(view.url) if viewer == "chromium" else Client(view.url)
    began = cpu_s()  # from here, as for the view in this process: starting the viewer apart
    running = time.perf_counter()
    outcome = pipeline.run()
    result["run_s"] = time.perf_counter() - running
    report = view.finish()
    result["cpu_s"] = cpu_s() - began
    if report is None:
        raise SystemExit(f"the view's process did not report: {view.error}")
    first = report["views"][0]
    result["view_cpu_s"] = report["cpu_s"]
    result["shipped"] = view.shipped
    result["feed_cpu_s"] = view.cpu_s  # the feeding thread's: what the view costs this process's interpreter
    result["batches"] = view.batches
    if looker is not None:
        result.update(looker.finish(int(first["bars"])))
    result["updates"] = first["updates"]
    result["update_mean_ms"] = first["update_mean_ms"]
    result["update_max_ms"] = first["update_max_ms"]
    result["update_cpu_ms"] = first["update_cpu_ms"]
    result["deferred"] = first["deferred"]
    result["summaries"] = report["summaries"]
    result.update({f"part_{name}_s": seconds for name, seconds in first["parts"].items()})
    view.close()
    return finished(pipeline, outcome, result, began_wall)


def finished(pipeline: Pipeline, outcome: Any, result: dict[str, float], began: float) -> dict[str, float]:
    if not outcome.ok:
        raise SystemExit(f"the run failed: {outcome.error}")
    trace = outcome.trace
    result["rate"] = summarize(trace).throughput_per_min
    result["spans"] = len(trace.spans)
    result["wall_s"] = time.perf_counter() - began
    del pipeline, outcome, trace
    gc.collect()  # a GPU run's buffers go before the next run starts
    return result


def run_config(args: argparse.Namespace, partitions: int) -> RunConfig:
    if args.backend == "cpu":
        return RunConfig(backend="cpu", partitions=partitions, log2_constraints=args.log2 or 6)
    traced = True if args.gpu_trace is None else bool(args.gpu_trace)
    return RunConfig(backend="gpu", partitions=partitions, log2_constraints=args.log2 or 22,
                     bool_fraction=0.9, synth_terms=4, gpu_workers=2, synthesis="processes",
                     synth_threads=14, synth_lookahead=14, memory_mode="zerocopy", gpu_trace=traced)


def line(k: int, watched: bool, r: dict[str, float]) -> str:
    text = (f"round {k + 1} {'watched  ' if watched else 'unwatched'}: {r['rate']:.1f} partitions/min, "
            f"{r['spans']:.0f} spans, {r['run_s']:.1f} s run ({r['wall_s']:.1f} s with its set-up), "
            f"this process {r['cpu_s']:.1f} CPU s")
    if not watched:
        return text
    if "viewer_cpu_s" in r:
        text += f", viewer {r['viewer_cpu_s']:.1f} CPU s"
    if "bars_received" in r:
        text += (f", {r['bars_received']:.0f} bars received in {r['patches']:.0f} patches, "
                 f"holds {r['drawn']:.0f} of the server's {r['held']:.0f}"
                 + ("" if r["caught_up"] else " (did not catch up)"))
    elif "drawn" in r:
        text += f", {r['drawn']:.0f} bars drawn of {r['held']:.0f}"
    return text + (f", {r['updates']:.0f} updates, {r['deferred']:.0f} polls deferred (update mean "
                   f"{r['update_mean_ms']:.1f} ms, {r['update_cpu_ms']:.1f} ms CPU, max "
                   f"{r['update_max_ms']:.1f} ms), {r['summaries']:.0f} summaries"
                   + (f"; CPU s of the server's thread {r['server_cpu_s']:.2f}" if "server_cpu_s" in r
                      else "")
                   + (f", of the poller's {r['poller_cpu_s']:.2f}" if "poller_cpu_s" in r else "")
                   + (f"; the view's process {r['view_cpu_s']:.2f} CPU s, fed {r['shipped']:.0f} spans in "
                      f"{r['batches']:.0f} batches by a thread of this process that took "
                      f"{r['feed_cpu_s']:.3f} CPU s"
                      if "view_cpu_s" in r else "")
                   + "; updates' CPU s by part: "
                   + ", ".join(f"{k[5:-2]} {v:.2f}" for k, v in r.items() if k.startswith("part_")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--partitions", type=int, help="default: enough for --spans (from the warm-up)")
    parser.add_argument("--spans", type=int, default=20_000, help="spans a run should make (default 20000)")
    parser.add_argument("--log2", type=int, help="constraints per partition, log2 (cpu 6, gpu 22)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--viewer", choices=("auto", "chromium", "websocket", "none"), default="auto")
    parser.add_argument("--no-browser", action="store_true", help="the same as --viewer none")
    parser.add_argument("--view", choices=("process", "kernel"), default="process",
                        help="where the watched run's view lives: a process of its own (default), or "
                             "this one, as a notebook kernel holds it with live_view='kernel'")
    parser.add_argument("--gpu-trace", action=argparse.BooleanOptionalAction,
                        help="record the device's activity (gpu: on unless --no-gpu-trace)")
    parser.add_argument("--budget-s", type=float, help="start no round that would end past this")
    parser.add_argument("--json", help="the runs and medians, written after each run")
    args = parser.parse_args()
    viewer, said = pick_viewer("none" if args.no_browser else args.viewer)
    os.environ.setdefault("WORKBENCH_CACHE", tempfile.mkdtemp(prefix="wb-srs-"))
    started = time.perf_counter()
    try:
        select_backend(run_config(args, WARMUP_PARTITIONS))
    except BackendUnavailable as err:
        print(f"live_cost: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    warm = one_run(run_config(args, WARMUP_PARTITIONS), False, "none")  # key, builds: once
    per_partition = warm["spans"] / WARMUP_PARTITIONS
    partitions = args.partitions or max(WARMUP_PARTITIONS, math.ceil(args.spans / per_partition))
    config = run_config(args, partitions)
    print(f"{args.backend} backend, {partitions} partitions of 2^{config.log2_constraints}"
          f"{', device activity recorded' if config.gpu_trace else ''}; warm-up: {per_partition:.1f} spans a "
          f"partition, {warm['rate']:.1f} partitions/min, {warm['wall_s']:.1f} s, so a run of about "
          f"{60 * partitions / warm['rate']:.0f} s; the view: {VIEWS[args.view]}; viewer: {said}", flush=True)
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    loads = [os.getloadavg()[0]]
    report: dict[str, Any] = {"backend": args.backend, "viewer": viewer, "viewer_said": said,
                              "view": args.view,
                              "partitions": partitions, "log2": config.log2_constraints,
                              "cores": os.cpu_count(), "gpu_trace": config.gpu_trace, "warmup": warm,
                              "runs": []}
    play_rounds(args, started, report, runs, loads,
                lambda watched: one_run(config, watched, viewer, args.view), line)

    def med(watched: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[watched] if key in r)

    rounds = len(runs[False])
    ratio = med(True, "rate") / med(False, "rate")
    verdict = "meets" if ratio >= TARGET else "misses"
    print(f"\nmedian of {rounds}: watched {med(True, 'rate'):.1f} vs unwatched {med(False, 'rate'):.1f} "
          f"partitions/min = {ratio:.1%} ({verdict} the {TARGET:.0%} target)")
    cpu_ratio = med(True, "cpu_s") / med(False, "cpu_s")
    print(f"CPU: this process (the run's) {med(True, 'cpu_s'):.2f} s watched vs {med(False, 'cpu_s'):.2f} s "
          f"unwatched = {cpu_ratio:.1%}"
          + (f"; viewer {med(True, 'viewer_cpu_s'):.1f} s" if viewer != "none" else ""))
    if args.view == "process":
        print(f"the view's process: {med(True, 'view_cpu_s'):.2f} CPU s (not this process's); "
              f"feeding it took this process's thread {med(True, 'feed_cpu_s'):.3f} CPU s")
    elif viewer != "none":
        print(f"the view's threads: the server's (updates, serialising, sending) "
              f"{med(True, 'server_cpu_s'):.2f} CPU s, the poller's (running summaries) "
              f"{med(True, 'poller_cpu_s'):.2f} CPU s")
    print(f"updates: mean {med(True, 'update_mean_ms'):.1f} ms ({med(True, 'update_cpu_ms'):.1f} ms CPU), "
          f"max {med(True, 'update_max_ms'):.1f} ms; "
          f"host load average (1 min) {min(loads):.2f}–{max(loads):.2f} on {os.cpu_count()} cores")
    report.update(ratio=ratio, target=TARGET, loads=[min(loads), max(loads)], rounds=rounds,
                  cpu_watched_s=med(True, "cpu_s"), cpu_unwatched_s=med(False, "cpu_s"), cpu_ratio=cpu_ratio)
    write_report(args, report)


def write_report(args: argparse.Namespace, report: dict[str, Any]) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


def play_rounds(args: argparse.Namespace, started: float, report: dict[str, Any],
                runs: dict[bool, list[dict[str, float]]], loads: list[float],
                run: Callable[[bool], dict[str, float]],
                say: Callable[[int, bool, dict[str, float]], str]) -> None:
    """`args.rounds` rounds of a watched run then an unwatched one (so a change in the host's
    load hits both), into `runs` and `report` (written after each run); no round is started
    that would end past `args.budget_s` (from `started`), judged by the last round's length."""
    write_report(args, report)
    pair_s = 0.0
    for k in range(args.rounds):
        if args.budget_s and k and time.perf_counter() - started + pair_s > args.budget_s:
            print(f"round {k + 1} not started: it would end past the {args.budget_s:.0f} s budget",
                  flush=True)
            break
        began = time.perf_counter()
        for watched in (True, False):
            r = run(watched)
            runs[watched].append(r)
            loads.append(os.getloadavg()[0])
            report["runs"].append({"round": k + 1, "watched": watched, **r})
            print(say(k, watched, r), flush=True)
            write_report(args, report)
        pair_s = time.perf_counter() - began


if __name__ == "__main__":
    main()
