"""What a served live update costs, apart from any run: a real CPU run's spans replayed into a
live view served as in benchmarks/live_cost.py, with its websocket viewer attached.

    python benchmarks/live_replay.py [--spans 19400] [--updates 45] [--sample-ms 0]

A CPU run of 64 partitions of 2^6 is recorded once, its spans tiled (shifted in time and
partition) to `--spans` and fed to a recorder in `--updates` batches, in the order they ended;
after each batch the view updates on the server's loop (as a due poll of live_cost.py does),
and every fourth batch the running summary is refreshed. Printed: the CPU seconds of the
server's thread over the updates (serialising and sending included), the update's mean CPU and
its parts, the summaries' CPU, and what the viewer received. `--sample-ms N` samples the
server thread's stack every N ms (benchmarks/live_profile.py's sampler) and prints where its
time went.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import live_cost  # the benchmark's served document and viewer, from its folder
import live_profile

from workbench.config import RunConfig
from workbench.pipeline.run import run_pipeline
from workbench.trace.recorder import Recorder, SpanRow
from workbench.viz.lanes import expected_lanes
from workbench.viz.live import LiveView
from workbench.viz.live_summary import RunningSummary

BASE_PARTITIONS = 64


def tiled_rows(spans: int) -> list[SpanRow]:
    trace = run_pipeline(RunConfig(backend="cpu", partitions=BASE_PARTITIONS, log2_constraints=6)).trace
    base = list(trace.iter_spans())
    first, last = trace.time_range()
    rows: list[SpanRow] = []
    k = 0
    while len(rows) < spans:
        shift = k * (last - first) - first
        rows += [(s.track, s.name, s.start_ns + shift, s.end_ns + shift, s.partition + BASE_PARTITIONS * k,
                  s.worker, s.attrs or None) for s in base]
        k += 1
    return sorted(rows[:spans], key=lambda r: r[3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=19_400)
    parser.add_argument("--updates", type=int, default=45)
    parser.add_argument("--sample-ms", type=float, default=0.0)
    args = parser.parse_args()
    rows = tiled_rows(args.spans)
    recorder = Recorder(nvtx=False)
    fed = [0]
    recorder.now_ns = lambda: recorder.origin_ns + fed[0]  # the run's clock: the last span fed
    live = LiveView(recorder, expected_lanes(2, 2), name="live")
    summary = RunningSummary(recorder)
    served = live_cost.Served(live.layout)
    viewer = live_cost.Client(served.url)
    sampler = live_profile.Sampler(args.sample_ms / 1e3) if args.sample_ms else None
    if sampler is not None:
        sampler.start()
    summary_cpu = 0.0
    began = served.call(time.thread_time)
    n = args.updates
    for i in range(n):
        batch = rows[i * len(rows) // n:(i + 1) * len(rows) // n]
        origin = recorder.origin_ns
        recorder.spans.extend((t, name, s + origin, e + origin, p, w, a) for t, name, s, e, p, w, a in batch)
        fed[0] = batch[-1][3]
        served.call(live.update)
        if i % 4 == 3:
            cpu = time.thread_time()
            summary.html()
            summary_cpu += time.thread_time() - cpu
        time.sleep(0.05)  # the viewer reads as it would between polls
    server_cpu = served.call(time.thread_time) - began
    if sampler is not None:
        sampler.stop()
    parts = ", ".join(f"{k} {v:.3f}" for k, v in live.stats.parts.items())
    print(f"{len(rows):,} spans in {n} updates: the server's thread {server_cpu:.3f} CPU s, update CPU mean "
          f"{live.stats.cpu_mean_ms:.2f} ms (parts, CPU s: {parts}); {summary.trace.cursor[0]:,} spans "
          f"summarised {n // 4} times in {summary_cpu:.3f} CPU s")
    print("viewer:", viewer.finish(int(served.call(live.gantt.bar_count))))
    if sampler is not None:
        name = "bokeh-server"
        busy = sampler.samples[name]
        print(f"{name}: {busy} busy samples; inclusive")
        for key, count in sampler.inclusive[name].most_common(40):
            print(f"  {100 * count / busy:5.1f}%  {key}")
        print("on top")
        for key, count in sampler.top[name].most_common(12):
            print(f"  {100 * count / busy:5.1f}%  {key}")
    served.stop()


if __name__ == "__main__":
    main()
