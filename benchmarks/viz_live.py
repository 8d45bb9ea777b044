"""Live view cost: spans streamed into the live Gantt at 10 Hz, measured on the UI side.

    python benchmarks/viz_live.py [--spans 20000] [--seconds 10]

A feeder thread replays a real pipeline trace (tiled to the wanted size) into a recorder at
an even rate, as pipeline threads would record it; the poller drains and streams it into
the live view wrapped in its notebook widget (so patch serialisation counts). Prints the
cost per update and how late the main thread's 10 ms sleeps wake meanwhile (what a kernel
executing cells would feel).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

from workbench.config import RunConfig
from workbench.pipeline.run import run_pipeline
from workbench.trace.recorder import Recorder, SpanRow
from workbench.viz.lanes import expected_lanes
from workbench.viz.live import LiveView, Poller


def template_rows(spans: int) -> list[SpanRow]:
    os.environ.setdefault("WORKBENCH_CACHE", tempfile.mkdtemp(prefix="wb-srs-"))
    trace = run_pipeline(RunConfig(backend="cpu", partitions=8, log2_constraints=8)).trace
    base = [(s.track, s.name, s.start_ns, s.end_ns, s.partition, s.worker, s.attrs or None)
            for s in trace.iter_spans()]
    first, last = trace.time_range()
    period = last - first
    rows: list[SpanRow] = []
    k = 0
    while len(rows) < spans:
        rows += [(t, n, s + k * period - first, e + k * period - first, p + 8 * k, w, a)
                 for t, n, s, e, p, w, a in base]
        k += 1
    rows = rows[:spans]
    rows.sort(key=lambda r: r[3])  # recorded when they end
    return rows


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    from jupyter_bokeh import BokehModel

    rows = template_rows(args.spans)
    recorder = Recorder(nvtx=False)
    live = LiveView(recorder, expected_lanes(2, 2), name="live")
    widget = BokehModel(live.layout)  # its patches are built and sent (to no kernel) per change
    fed = threading.Event()

    def feed() -> None:
        began = time.perf_counter()
        per_row = args.seconds / len(rows)
        for i, row in enumerate(rows):
            due = began + i * per_row
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            offset = recorder.origin_ns
            recorder.spans.append((row[0], row[1], row[2] + offset, row[3] + offset, *row[4:]))
        fed.set()

    def tick() -> bool:
        if fed.is_set():
            live.update(final=True)
            return False
        live.update()
        return True

    feeder = threading.Thread(target=feed, name="feeder", daemon=True)
    poller = Poller(tick)
    feeder.start()
    poller.start()
    lateness = []
    while poller.alive:
        asked = time.perf_counter()
        time.sleep(0.01)
        lateness.append((time.perf_counter() - asked - 0.01) * 1e3)
    poller.join()
    feeder.join()
    stats = live.stats
    costs = [s * 1e3 for s in stats.seconds]
    busy = costs
    print(f"{stats.spans:,} spans over {args.seconds:.0f} s at 10 Hz: {stats.updates} updates, "
          f"{stats.spans / max(stats.updates, 1):.0f} spans per update")
    print(f"UI-side cost per update (drain + bars + stream + widget patch): mean {stats.mean_ms:.1f} ms, "
          f"median {statistics.median(busy):.1f} ms, p95 {percentile(busy, 0.95):.1f} ms, "
          f"max {stats.max_ms:.1f} ms; {sum(costs) / (args.seconds * 1e3):.1%} of one core")
    print(f"main thread 10 ms sleeps woke late by: median {statistics.median(lateness):.2f} ms, "
          f"p99 {percentile(lateness, 0.99):.2f} ms, max {max(lateness):.2f} ms")
    print(f"bars drawn: {live.gantt.bar_count():,} (widget {widget.model_id[:8]})")


if __name__ == "__main__":
    main()
