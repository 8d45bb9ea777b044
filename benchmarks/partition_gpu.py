"""The GPU part of one partition, split by phase: copy, h (7 NTTs), H MSM, batch_add, tail_msm.

    python benchmarks/partition_gpu.py [--log2 22 24] [--repeats 5] [--bool-fraction 0.9] [--out F]

Inputs are a real synthetic-circuit partition (witness with the given share of 0/1 scalars,
a, b, c from synthesis) and G1 query points generated on the GPU; a, b, c come from pinned
memory. Each phase is timed with CUDA events after a warm-up; medians of the repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import numpy as np


def measure(log2: int, repeats: int, bool_fraction: float) -> dict[str, Any]:
    import cupy as cp

    from workbench.gpu import msm, srs_gen
    from workbench.gpu.host_memory import CudaHostMemory
    from workbench.gpu.ntt import GpuDomain
    from workbench.prover.circuit import SyntheticCircuit
    from workbench.prover.prep import QUERIES, prep_msm

    n = 1 << log2
    host = CudaHostMemory()
    circuit = SyntheticCircuit(log2, bool_fraction, 4, seed=1)
    target = type("Target", (), {})()
    target.witness = np.empty((n, 4), np.uint64)
    target.a, target.b, target.c = (host.pinned((n, 4)) for _ in range(3))
    circuit.synthesize(0, target)
    prepared = prep_msm(target.witness)
    rng = np.random.default_rng(log2)
    points = {q: msm.DevicePoints.from_points(srs_gen.generate_g1(n, rng)) for q in ("h", *QUERIES)}
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        a, b, c = (cp.empty((n, 4), cp.uint64) for _ in range(3))
        domain = GpuDomain(log2, stream=stream)
        domain.prepare()
    cp.cuda.Device().synchronize()
    events = [cp.cuda.Event() for _ in range(6)]
    names = ("h2d_copy", "ntt_h", "msm_h", "batch_add", "tail_msm")

    def once() -> dict[str, float]:
        events[0].record(stream)
        for dev, src in ((a, target.a), (b, target.b), (c, target.c)):
            cp.cuda.runtime.memcpyAsync(dev.data.ptr, src.ctypes.data, src.nbytes, 1, stream.ptr)
        events[1].record(stream)
        h = domain.compute_h(a, b, c)
        events[2].record(stream)
        msm.msm(points["h"], h, stream=stream)
        events[3].record(stream)
        with stream:
            bitmap = cp.asarray(prepared.ones_bitmap)
            tail = cp.asarray(prepared.tail_scalars), cp.asarray(prepared.tail_indices)
        for q in QUERIES:
            if prepared.split[q]:
                msm.batch_add(points[q], bitmap, stream=stream)
        events[4].record(stream)
        for q in QUERIES:
            msm.msm(points[q], *tail, stream=stream)
        events[5].record(stream)
        events[5].synchronize()
        return {k: cp.cuda.get_elapsed_time(events[i], events[i + 1]) for i, k in enumerate(names)}

    once()
    runs = [once() for _ in range(repeats)]
    median = {k: statistics.median(r[k] for r in runs) for k in names}
    median["ntt_msm_h"] = median["h2d_copy"] + median["ntt_h"] + median["msm_h"]
    median["gpu_total"] = median["ntt_msm_h"] + median["batch_add"] + median["tail_msm"]
    return {"median_ms": median, "tail": prepared.n_tail, "ones": prepared.n_one,
            "split": dict(prepared.split), "repeats": repeats}


def main() -> None:
    import cupy as cp

    parser = argparse.ArgumentParser()
    parser.add_argument("--log2", type=int, nargs="+", default=[22, 24])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bool-fraction", type=float, default=0.9)
    parser.add_argument("--out")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for log2 in args.log2:
        result = results[f"2^{log2}"] = measure(log2, args.repeats, args.bool_fraction)
        print(f"2^{log2}: tail {result['tail']} scalars, ones {result['ones']}; "
              f"median of {args.repeats} (ms)")
        for k, v in result["median_ms"].items():
            print(f"  {k:<10} {v:9.2f}")
        cp.get_default_memory_pool().free_all_blocks()
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
