"""The curve sums of one partition past the H MSM, on a real witness: the G1 queries' tails
(one sort, three joined tables) and batch additions, and B's G2 tail and batch addition.

    python benchmarks/msm_tails_gpu.py --out results.json [--log2 22] [--repeats 5]

The witness is a synthetic-circuit partition's (bool_fraction 0.9, as benchmarks/
partition_gpu.py), split by the prover's prep_msm into the 0/1 bitmap and the tail scalars.
G1 tables are 2^log2 points from the GPU generator; the G2 table is 2^19 distinct points
(host generation) repeated to 2^log2, since G2 points cost the host ~0.1 ms each, or with
--g2-table device 2^log2 distinct points from the GPU generator (seconds less). Each sum
is timed with CUDA events around the whole call, after a warm-up, median of the repeats, in
each accumulation variant of msm_gpu.py (XYZZ only, affine rounds), whose results must agree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from msm_gpu import DEFAULT_VARIANTS, VARIANTS, is_fixed, time_events, variant, window_of

from workbench.gpu import kernels, msm_tables, srs_gen
from workbench.gpu import msm as gpu_msm

G2_DISTINCT = 1 << 19


def _g2_table(cupy: Any, n: int, seed: int) -> gpu_msm.DevicePoints:
    from py_arkworks_bls12381 import G2Point

    from workbench.prover import srs
    from workbench.prover.curve import G2Points

    distinct = srs._grid_points(G2Points, G2Point(), min(n, G2_DISTINCT), np.random.default_rng(seed))
    dev = gpu_msm.DevicePoints.from_points(distinct)
    data = cupy.tile(dev.data, (-(-n // dev.n), 1))[:n]
    return gpu_msm.DevicePoints(data=cupy.ascontiguousarray(data), n=n, backend=dev.backend, group=gpu_msm.G2)


def _g2_device_table(cupy: Any, n: int, seed: int) -> gpu_msm.DevicePoints:
    """n distinct points s_i * G2 by the fixed-base kernel, in Montgomery form."""
    be = gpu_msm.default_backend()
    scalars = cupy.asarray(srs_gen.random_scalars(n, np.random.default_rng(seed)))
    data = srs_gen.fixed_base_on_device(be, scalars, gpu_msm.G2)
    be.launch("msm", "fp_array_to_mont", 4 * n, (data, np.uint64(4 * n)), threads=256)
    return gpu_msm.DevicePoints(data=data, n=n, backend=be, group=gpu_msm.G2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--log2", type=int, default=22)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    parser.add_argument("--ops", nargs="+", default=["g1_tails", "g1_batch_add", "g2_tail", "g2_batch_add"])
    parser.add_argument("--g2-table", choices=["host", "device"], default="host")
    args = parser.parse_args()
    cupy = kernels.require_cupy()
    from workbench.prover.circuit import SyntheticCircuit
    from workbench.prover.prep import QUERIES, prep_msm

    n = 1 << args.log2
    t0 = time.perf_counter()
    circuit = SyntheticCircuit(args.log2, 0.9, 4, seed=args.seed)
    target = type("Target", (), {})()
    target.witness = np.empty((n, 4), np.uint64)
    target.a, target.b, target.c = (np.empty((n, 4), np.uint64) for _ in range(3))
    circuit.synthesize(0, target)
    prepared = prep_msm(target.witness)
    t1 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    g1 = gpu_msm.concat([srs_gen.device_points_from_scalars(srs_gen.random_scalars(n, rng)) for _ in QUERIES])
    g2 = _g2_table(cupy, n, args.seed) if args.g2_table == "host" else _g2_device_table(cupy, n, args.seed)
    cupy.cuda.Device().synchronize()
    t2 = time.perf_counter()
    bitmap = cupy.asarray(prepared.ones_bitmap)
    scalars, indices = cupy.asarray(prepared.tail_scalars), cupy.asarray(prepared.tail_indices)
    sets = len(QUERIES)
    m = int(scalars.shape[0])

    def ops(name: str) -> dict[str, Any]:
        c, c1 = window_of(name, m), window_of(name, m, sets)
        if is_fixed(name):  # the G1 table first (not timed), then its window; G2 has no tables
            msm_tables.TABLES.build(g1, c1)
        w1 = None if is_fixed(name) else c1
        w = gpu_msm.window_bits(m) if is_fixed(name) else c
        return {
            "g1_tails": lambda: [s.combine() for s in gpu_msm.msm_windows_sets(g1, sets, scalars, indices,
                                                                               window=w1)],
            "g1_batch_add": lambda: gpu_msm.batch_add_sets(g1, sets, bitmap),
            "g2_tail": lambda: [gpu_msm.msm(g2, scalars, indices, window=w)],
            "g2_batch_add": lambda: [gpu_msm.batch_add(g2, bitmap)],
        }

    # Each row as it is measured, and the report after each: a run cut short by a device
    # call's time limit still says what it measured.
    print(f"2^{args.log2} partition: {prepared.n_tail} tail scalars, {prepared.n_one} ones; "
          f"synthesis {t1 - t0:.1f} s, tables {t2 - t1:.1f} s; median of {args.repeats} (ms)", flush=True)
    rows = []
    for op in args.ops:
        results = set()
        for name in args.variants:
            fn = ops(name)[op]
            with variant(name):
                times = time_events(cupy, fn, 1, args.repeats)
                results.add(tuple(fn()))
            rows.append({"op": op, "variant": name, "window_bits": window_of(name, m),
                         "median_ms": statistics.median(times), "min_ms": min(times), "times_ms": times})
            r = rows[-1]
            agree = f"agree={len(results) == 1}" if name == args.variants[-1] else ""
            print(f"  {r['op']:13} {r['variant']:12} c={r['window_bits']:<3} {r['median_ms']:9.2f} "
                  f"[{min(times):.2f}-{max(times):.2f}]  {agree}", flush=True)
        rows[-1]["variants_agree"] = len(results) == 1
        report = {"log2": args.log2, "tail_scalars": prepared.n_tail, "ones": prepared.n_one,
                  "g2_distinct_points": min(n, G2_DISTINCT) if args.g2_table == "host" else n,
                  "g2_table": args.g2_table, "synthesis_s": t1 - t0, "tables_s": t2 - t1,
                  "repeats": args.repeats, "results": rows}
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
