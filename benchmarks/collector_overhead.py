"""What recording the device costs, and how well its records line up with the host's spans.

    python benchmarks/collector_overhead.py [--log2 16] [--partitions 8] [--workers 2]
                                            [--repeats 3] [--json PATH]
    python benchmarks/collector_overhead.py --figures [--log2 18] [--partitions 4] [--json PATH]
    python benchmarks/collector_overhead.py --probe

Default: the same GPU-backend run with and without `gpu_trace` (device activity and the NVML
sampler), alternating, after one warm-up run that compiles the kernels and caches the key;
throughput is partitions per minute from the trace (median of the repeats), loss in percent
(target <= 3%). From the traced runs: the clock alignment's error bound and drift, how many
records were placed by API correlation, and how far inside its host `h2d_copy` span each
device copy lies (a negative margin beyond the bound would be an alignment failure).

--figures: one traced run per memory mode (pageable, zerocopy) with, side by side, the share
of the run the mutex was held, the share a kernel was running on the device, and NVML's
duty cycle, plus the pageable copies' host overhead (host span minus device copy).

--probe: a few records through the activity library, checked field by field; exits non-zero
when something is off (a library that does not match the driver, say).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from workbench.analysis.summary import summarize
from workbench.analysis.utilisation import utilisation
from workbench.collectors import DeviceActivity, NvmlSampler, for_config
from workbench.config import RunConfig
from workbench.model import tracks as tr
from workbench.pipeline.run import Pipeline
from workbench.trace.container import Trace


def run(config: RunConfig, backend: Any, collectors: list[Any] | None = None) -> Trace:
    result = Pipeline(config, backend, collectors=collectors).run()
    if not result.ok:
        raise SystemExit(f"run failed: {result.error}")
    return result.trace


def alignment(trace: Trace) -> dict[str, Any]:
    instants = {i.name: i.attrs for i in trace.iter_instants() if i.track == "device_activity"}
    clock, summary = instants.get("clock_alignment", {}), instants.get("summary", {})
    host: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for s in (s for s in trace.select(name="h2d_copy") if tr.parse(s.track).kind == tr.WORKER):
        host[(s.worker, s.partition)].append(s)
    starts, ends = [], []
    for copy in trace.select(track=tr.copy_track(0), name="h2d"):
        if copy.attrs.get("span") != "h2d_copy":
            continue
        # The host copy span that overlaps this device copy most is the one that issued it.
        issuing = max(host.get((copy.worker, copy.partition), []), default=None,
                      key=lambda s: min(s.end_ns, copy.end_ns) - max(s.start_ns, copy.start_ns))
        if issuing is not None:
            starts.append(copy.start_ns - issuing.start_ns)
            ends.append(issuing.end_ns - copy.end_ns)
    error = clock.get("error_ns", 0)
    records = sum(summary.get(k, 0) for k in ("kernel", "memcpy", "memset", "sync"))
    return {
        "error_ns": error, "drift_ppm": clock.get("drift_ppm"), "clock_samples": clock.get("samples"),
        "records": records, "by_api": summary.get("by_api", 0), "by_time": summary.get("by_time", 0),
        "unplaced": summary.get("unplaced", 0), "copies_checked": len(starts),
        "min_start_margin_ns": min(starts, default=None), "min_end_margin_ns": min(ends, default=None),
        "outside_bound": sum(m < -error for m in starts + ends),
        "errors": summary.get("errors", []),
    }


VARIANTS: dict[str, Callable[[RunConfig], list[Any]]] = {
    "off": lambda config: [],
    "both": lambda config: for_config(config.replace(gpu_trace=True)),
    "activity": lambda config: [DeviceActivity()],
    "activity_no_api": lambda config: [DeviceActivity(api_records=False)],
    "counters": lambda config: [NvmlSampler(config.sample_interval_ms)],
}


def overhead(args: argparse.Namespace) -> dict[str, Any]:
    from workbench.gpu.backend import GpuBackend

    config = RunConfig(backend="gpu", log2_constraints=args.log2, partitions=args.partitions,
                       gpu_workers=args.workers, synth_threads=args.synth_threads,
                       memory_mode=args.memory_mode, synth_lookahead=max(2, args.workers))
    backend = GpuBackend()
    run(config, backend)  # warm-up: kernels compiled, key cached
    variants = args.variants.split(",")
    whole: dict[str, list[float]] = {v: [] for v in variants}
    proving: dict[str, list[float]] = {v: [] for v in variants}
    aligned, busy = [], []
    for repeat in range(args.repeats):
        # Rotate the order so that a slow drift of the machine does not favour one variant.
        for variant in variants[repeat % len(variants):] + variants[:repeat % len(variants)]:
            trace = run(config, backend, VARIANTS[variant](config))
            whole[variant].append(summarize(trace).throughput_per_min)
            proving[variant].append(to_last_proof_per_min(trace))
            if variant == "both":
                aligned.append(alignment(trace))
            summary = [i.attrs for i in trace.iter_instants() if i.name == "summary"]
            if summary:
                busy.append((variant, summary[-1].get("busy_ms")))

    def loss(rates: dict[str, list[float]], variant: str) -> float:
        return 100 * (1 - statistics.median(rates[variant]) / statistics.median(rates["off"]))

    return {
        "config": {"log2": args.log2, "partitions": args.partitions, "workers": args.workers,
                   "synth_threads": args.synth_threads, "memory_mode": args.memory_mode,
                   "repeats": args.repeats},
        # Run start to run end: includes stopping the collectors (the last flush and placing).
        "partitions_per_min": whole,
        "loss_percent": {v: loss(whole, v) for v in variants if v != "off"},
        # Run start to the last proof: the proving itself, with the collectors running.
        "to_last_proof_per_min": proving,
        "loss_percent_to_last_proof": {v: loss(proving, v) for v in variants if v != "off"},
        "collector_busy_ms": busy,
        "alignment": aligned,
    }


def to_last_proof_per_min(trace: Trace) -> float:
    start = min(i.ts_ns for i in trace.iter_instants() if i.name == "run_start")
    finishes = trace.select(name="finish")
    return len(finishes) / (max(s.end_ns for s in finishes) - start) * 60e9


def figures(args: argparse.Namespace) -> dict[str, Any]:
    from workbench.gpu.backend import GpuBackend

    backend = GpuBackend()
    out = {}
    for mode in ("pageable", "zerocopy"):
        config = RunConfig(backend="gpu", log2_constraints=args.log2, partitions=args.partitions,
                           gpu_workers=2, synth_threads=args.synth_threads, memory_mode=mode,
                           gpu_trace=True)
        trace = run(config, backend)
        (gpu,) = utilisation(trace)
        copies = [c for c in trace.select(track=tr.copy_track(0), name="h2d")
                  if "host_overhead_ms" in c.attrs]
        device_gbps = [c.attrs["bytes"] / (c.end_ns - c.start_ns) for c in copies if c.end_ns > c.start_ns]
        out[mode] = {
            "throughput_per_min": summarize(trace).throughput_per_min,
            "mutex_held": gpu.mutex_held, "kernel_busy": gpu.kernel_busy, "copy_busy": gpu.copy_busy,
            "nvml_duty_cycle": gpu.nvml_duty_cycle, "nvml_pcie_rx_gbps": gpu.nvml_pcie_rx_gbps,
            "held_over_compute": gpu.held_over_compute,
            "copy_host_overhead_ms_median": _median([c.attrs["host_overhead_ms"] for c in copies]),
            "copy_host_ms_median": _median([c.attrs["host_span_ms"] for c in copies]),
            "copy_device_gbps_median": _median(device_gbps),
            "src_kinds": sorted({c.attrs["src_kind"] for c in copies}),
            "alignment": alignment(trace),
        }
    return {"config": {"log2": args.log2, "partitions": args.partitions, "workers": 2,
                       "synth_threads": args.synth_threads}, "modes": out}


def probe() -> dict[str, Any]:
    """One pinned copy, one pageable copy and one kernel, read back through the collector."""
    import cupy as cp

    from workbench.trace.recorder import Recorder

    recorder = Recorder(nvtx=False)
    recorder.name_track("probe", threading.current_thread().name)
    collector = DeviceActivity()
    collector.start(recorder)
    device = cp.empty(1 << 17, dtype=cp.uint64)
    pinned = np.frombuffer(cp.cuda.alloc_pinned_memory(1 << 20), dtype=np.uint64)
    pageable = np.ones(1 << 17, dtype=np.uint64)
    try:
        with recorder.span("probe", "copies", 0):
            for host in (pinned, pageable):
                cp.cuda.runtime.memcpyAsync(device.data.ptr, host.ctypes.data, 1 << 20, 1, 0)
            device += 1
            cp.cuda.runtime.deviceSynchronize()
    finally:
        collector.stop()
    rows = [s for s in recorder.spans if tr.parse(s[0]).on_device]
    copies = [(s[1], *[(s[6] or {}).get(k) for k in ("bytes", "src_kind", "dst_kind")]) for s in rows
              if s[0] == tr.copy_track(0)]
    problems = []
    if sorted(copies, key=str) != sorted([("h2d", 1 << 20, "pinned", "device"),
                                           ("h2d", 1 << 20, "pageable", "device")], key=str):
        problems.append(f"copies read back as {copies}")
    if not any(tr.parse(s[0]).kind == tr.KERNELS and tr.parse(s[0]).gpu == 0 for s in rows):
        problems.append("no kernel record")
    now = recorder.now_ns()
    if any(not now - 60e9 < s[2] <= s[3] <= now for s in rows):
        problems.append("timestamps outside the last minute or reversed")
    if any(s[4] != 0 for s in rows):
        problems.append(f"records not placed in the probe's span: {[(s[0], s[1], s[4]) for s in rows]}")
    return {"ok": not problems, "problems": problems, "rows": [list(s) for s in rows],
            "clock": collector.clock.describe() if collector.clock else None}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2", type=int, default=16)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--synth-threads", type=int, default=4)
    parser.add_argument("--memory-mode", default="pageable")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default="off,both",
                        help="comma-separated, from: " + ", ".join(VARIANTS) + " (off first)")
    parser.add_argument("--figures", action="store_true")
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.probe:
        result = probe()
    elif args.figures:
        result = figures(args)
    else:
        result = overhead(args)
    text = json.dumps(result, indent=1, default=str)
    if args.json:
        with open(args.json, "w") as out:
            out.write(text)
    print(text if args.probe else json.dumps(_brief(result), indent=1, default=str))
    if args.probe and not result["ok"]:
        sys.exit(1)


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    """The figures without the per-run detail, for the console."""
    if "modes" in result:
        return {m: {k: v for k, v in r.items() if k != "alignment"} | {"alignment": r["alignment"]}
                for m, r in result["modes"].items()}
    return {k: v for k, v in result.items() if k != "alignment"} | {"alignment": result["alignment"][-1:]}


if __name__ == "__main__":
    main()
