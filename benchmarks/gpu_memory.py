"""Device memory a GPU run really takes, against what the backend's check asks for.

    python benchmarks/gpu_memory.py [--log2 20 22] [--workers 1 2] [--out F]

Each case is a real pipeline run on the GPU backend (2 partitions a worker, pinned memory), in
a fresh process: a run's arrays outlive it in the pool of the process that ran it, so a second
case in the same process would count the first one's.
The peak is the most the run's arrays held at once (CuPy's pool, polled every 0.2 ms; the
pool's own size, cached blocks included, is printed beside it as an upper bound), the setup's
peak (the key made on the device) apart. The key's points stay on the device for the whole
run; a, b, c, h, the MSM's sort and its affine rounds' scratch are per worker. Printed: the
peaks, the key's share, the per-worker rest in bytes per constraint, and the check's
estimate with its ratio to the peak.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from typing import Any


def measure(log2: int, workers: int) -> dict[str, Any]:
    import cupy as cp

    from workbench.config import RunConfig
    from workbench.gpu.backend import GpuBackend, device_need
    from workbench.pipeline.run import run_pipeline

    pool = cp.get_default_memory_pool()
    config = RunConfig(backend="gpu", log2_constraints=log2, gpu_workers=workers,
                       partitions=2 * workers, memory_mode="pinned", trace=False)
    backend = GpuBackend()
    after_setup: list[int] = []
    setup = backend.setup

    def setup_then_count(*args: Any, **kwargs: Any) -> None:
        setup(*args, **kwargs)
        after_setup.append(pool.used_bytes())  # the key's points, resident for the whole run
        after_setup.append(peak[0])  # the setup's own peak (the key made on the device)
        peak[0] = 0

    backend.setup = setup_then_count  # type: ignore[method-assign]
    peak = [0]
    running = threading.Event()
    running.set()

    def poll() -> None:
        # A sort or a round's scratch lives for milliseconds: polling at 0.2 ms sees it.
        while running.is_set():
            peak[0] = max(peak[0], pool.used_bytes())
            time.sleep(0.0002)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    result = run_pipeline(config, backend)
    running.clear()
    poller.join()
    if not result.ok:
        raise SystemExit(f"2^{log2}, {workers} workers: the run failed: {result.error}")
    key, setup_peak = after_setup
    per_worker = (peak[0] - key) / workers  # with 2 workers: each worker's own share plus half the holder's
    check = device_need(config)
    row = {"log2": log2, "workers": workers, "peak_used_bytes": peak[0], "pool_bytes": pool.total_bytes(),
           "setup_peak_bytes": setup_peak,
           "key_bytes": key, "per_worker_bytes": per_worker,
           "per_constraint_worker": per_worker / (1 << log2), "check_bytes": check,
           "ratio_check_to_peak": check / peak[0]}
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2", type=int, nargs="+", default=[20, 22])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out")
    parser.add_argument("--case", nargs=2, type=int, help=argparse.SUPPRESS)  # LOG2 WORKERS, in this process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(measure(*args.case)))
        return
    rows = []
    for log2 in args.log2:
        for workers in args.workers:
            child = subprocess.run([sys.executable, __file__, "--case", str(log2), str(workers)],
                                   capture_output=True, text=True)
            if child.returncode:
                raise SystemExit(f"2^{log2} x {workers} workers: {child.stderr.strip()[-2000:]}")
            row = json.loads(child.stdout.strip().splitlines()[-1])
            rows.append(row)
            gib = {k: row[k] / 2**30
                   for k in ("peak_used_bytes", "pool_bytes", "setup_peak_bytes", "key_bytes")}
            print(f"2^{log2} x {workers} workers: peak {gib['peak_used_bytes']:.2f} GiB "
                  f"(pool {gib['pool_bytes']:.2f}; setup {gib['setup_peak_bytes']:.2f}; "
                  f"key {gib['key_bytes']:.2f}), per worker "
                  f"{row['per_constraint_worker']:.0f} B/constraint; check asks "
                  f"{row['check_bytes'] / 2**30:.2f} GiB = {row['ratio_check_to_peak']:.2f} of the peak")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
