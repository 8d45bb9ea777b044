"""The Groth16 trusted setup on the GPU at 2^22 against issue 16's target of 10 s (needs a CUDA
device and CuPy).

    python benchmarks/setup_gpu.py [--log2 22] [--repeats 3] [--out results.json]

The circuit is the case study's (bool_fraction 0.9, synth_terms 4, seed 1). Timed with the host
clock, the device synchronised at each phase boundary (gpu/groth16_setup.py, PHASES):
tau_columns (Lagrange basis at τ, the A/B/C column sums, the scalars), g1_queries (H, L, A, B,
IC: 4·2^k + 3 points), g2_query (B in G2: 2^k points), download (points to the host as the key's
byte arrays). The setup's figure is the median of the repeats after a warm-up at 2^10 (module
compilation stays out). Printed beside it, once each: building the R1CS from the circuit's
structure, its fingerprint, writing the key's cache file and reading it back (the rest of what
a first run at this size pays), and the ratio of the setup to the target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.gpu import groth16_setup, kernels
from workbench.prover import key_cache
from workbench.prover.circuit import SyntheticCircuit

TARGET_S = 10.0


def _timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> None:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, default=22)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    for name in ("fixed_base", "fr_vector", "ntt", "msm"):
        kernels.module(name)
    groth16_setup.setup(SyntheticCircuit(10, 0.9, 4, 1))  # warm-up: module loads, pool growth

    circuit = SyntheticCircuit(args.log2, 0.9, 4, 1)
    system, r1cs_s = _timed(circuit.r1cs)
    _, fingerprint_s = _timed(lambda: key_cache.fingerprint(system))
    runs: list[dict[str, float]] = []
    key = None
    for _ in range(args.repeats):
        times: dict[str, float] = {}
        key, total = _timed(lambda times=times: groth16_setup.setup(circuit, times=times))
        runs.append({**times, "total": total})
    assert key is not None
    with tempfile.TemporaryDirectory() as tmp:
        path = key_cache.cache_path(circuit, tmp)
        _, write_s = _timed(lambda: key_cache._write(path, key, key_cache.fingerprint(system)))
        file_gb = path.stat().st_size / 1e9
        key_cache.clear_memory_cache()
        again, read_s = _timed(lambda: key_cache.load_or_setup(circuit, tmp))
        assert again == key, "the cache file did not give the key back"

    median = {name: statistics.median(r[name] for r in runs) for name in (*groth16_setup.PHASES, "total")}
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    result = {
        "device": device.decode() if isinstance(device, bytes) else str(device),
        "log2": args.log2, "repeats": args.repeats,
        "g1_points": 3 * circuit.m + circuit.n + circuit.public + 1, "g2_points": circuit.m,
        "runs": runs, "median_s": median, "r1cs_build_s": r1cs_s,
        "fingerprint_s": fingerprint_s, "cache_write_s": write_s, "cache_read_s": read_s,
        "cache_file_gb": file_gb, "target_s": TARGET_S, "ratio_to_target": median["total"] / TARGET_S,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    print(f"{result['device']}: Groth16 setup at 2^{args.log2} ({result['g1_points']} G1 + "
          f"{result['g2_points']} G2 points), median of {args.repeats} after a warm-up")
    for name in (*groth16_setup.PHASES, "total"):
        spread = ", ".join(f"{r[name]:.3f}" for r in runs)
        print(f"  {name:<12} {median[name]:7.3f} s   ({spread})")
    print(f"  setup / target {TARGET_S:.0f} s: {result['ratio_to_target']:.2f}")
    print(f"  once: R1CS build {r1cs_s:.2f} s, fingerprint {fingerprint_s:.2f} s, "
          f"cache write {write_s:.2f} s ({file_gb:.2f} GB), cache read {read_s:.2f} s")


if __name__ == "__main__":
    main()
