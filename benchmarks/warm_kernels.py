"""Compile kernel modules in parallel processes, so that CuPy's on-disk cache holds them
before the tests and benchmarks run (needs a CUDA device and CuPy).

    python benchmarks/warm_kernels.py msm batch_add "affine_round+BA_PRODUCTS_CALLED" --rates

A fresh device machine otherwise compiles every module serially on first use, NVRTC taking
tens of seconds for each of msm.cu and batch_add.cu; names as workbench.gpu.kernels.module
takes them (defines after '+'). --rates also compiles benchmarks/msm_gpu.py's microkernels.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _compile(name: str) -> tuple[str, float]:
    from workbench.gpu import kernels

    t0 = time.perf_counter()
    if name == "rates":
        import msm_gpu

        cupy = kernels.require_cupy()
        code = kernels.expand_includes(msm_gpu.RATE_HEADER + msm_gpu.RATE_KERNELS)
        cupy.RawModule(code=code, options=("-std=c++17",)).get_function("fp_mul_rate")
    else:
        kernels.module(name)
    return name, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--rates", action="store_true")
    args = parser.parse_args()
    names = [*args.modules, *(["rates"] if args.rates else [])]
    with ProcessPoolExecutor(max_workers=len(names)) as pool:
        for name, seconds in pool.map(_compile, names):
            print(f"compiled {name} in {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main()
