"""Tail MSM over the circuit's real key against random points (needs a CUDA device and CuPy).

    python benchmarks/key_tail_msm.py [--log2 22] [--repeats 5]

The tail of a proof is the MSM of the witness's non-0/1 values, at the "other" variables. The
real key repeats points there (u_j = L_0(τ), v_j = L_1(τ) for every other variable no
constraint reads), so buckets see P + P. Same scalars (uniform random, Montgomery) and
indices against the A query and B in G2 of the real key and against random points of each
group; device synchronised, host clock, one warm-up, median of the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.gpu import groth16_setup, srs_gen
from workbench.gpu import msm as gpu_msm
from workbench.prover.circuit import PUBLIC, SyntheticCircuit


def main() -> None:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, default=22)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    circuit = SyntheticCircuit(args.log2, 0.9, 4, 1)
    key = groth16_setup.setup(circuit)
    rows = np.arange(PUBLIC + 1, circuit.n)
    others = rows[~circuit.is_boolean(rows)].astype(np.int64)
    rng = np.random.default_rng(5)
    scalars = cupy.asarray(srs_gen.random_scalars(others.size, rng))  # below r: Montgomery forms
    indices = cupy.asarray(others)
    a_xy = key.a.xy[others]
    _, counts = np.unique(a_xy, axis=0, return_counts=True)
    print(f"2^{args.log2}: tail of {others.size} variables; A points there: {len(counts)} distinct, "
          f"the most repeated {counts.max()} times")
    g2_random = gpu_msm.G2.points_type(np.ascontiguousarray(cupy.asnumpy(srs_gen.fixed_base_on_device(
        gpu_msm.default_backend(), cupy.asarray(srs_gen.random_scalars(circuit.n, rng)), gpu_msm.G2)),
        "<u4").view(np.uint8))
    tables = {"A, real key": key.a, "G1, random points": srs_gen.generate_g1(circuit.n, rng),
              "B in G2, real key": key.b_g2, "G2, random points": g2_random}
    for name, points in tables.items():
        dev = gpu_msm.DevicePoints.from_points(points)
        times = []
        for _ in range(args.repeats + 1):
            cupy.cuda.Device().synchronize()
            start = time.perf_counter()
            gpu_msm.msm_windows(dev, scalars, indices)
            cupy.cuda.Device().synchronize()
            times.append(time.perf_counter() - start)
        spread = ", ".join(f"{t * 1e3:.1f}" for t in times[1:])
        print(f"  {name:<20} {statistics.median(times[1:]) * 1e3:7.1f} ms   ({spread})")


if __name__ == "__main__":
    main()
