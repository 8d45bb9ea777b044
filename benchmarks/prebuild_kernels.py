"""Build the kernel modules with nvcc here, for a GPU machine to load instead of compiling.

    python benchmarks/prebuild_kernels.py --out .cubins [--arch 90] [--jobs 2] [--defines A,B=1]
                                          [MODULE ...]

A fresh GPU machine compiles every module with NVRTC on first use, minutes of its time
(msm.cu and batch_add.cu the longest). This compiles them on this machine instead, with the
same expanded source and defines, into files named by what they were built from
(workbench/gpu/prebuilt.py); carry the folder and set WORKBENCH_KERNEL_CUBINS to it there.
A module whose source or defines differ from what was built is compiled there as before.

MODULE names are as workbench.gpu.kernels.module takes them ("affine_round+BA_PRODUCTS_CALLED");
by default every kernels/*.cu with its default build, and the affine-round builds that
workbench/gpu/affine_rounds.py's options name. --defines adds a whole-run build
(WORKBENCH_KERNEL_DEFINES) to each. Prints each module's compile time and size.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.gpu import affine_rounds, kernels, prebuilt


def default_modules() -> list[str]:
    # FR_MUL_INTEGER: the integer product, which the GPU NTT tests build beside the default (FP64).
    integer = ["ntt+FR_MUL_INTEGER", "fr_vector+FR_MUL_INTEGER"]
    return sorted(p.stem for p in kernels.KERNELS_DIR.glob("*.cu")) + affine_rounds.round_builds() + integer


def build(name: str, out: Path, arch: str, run_defines: tuple[str, ...], nvcc: str) -> tuple[str, float, int]:
    file, own = kernels.split_name(name)
    defines = (*run_defines, *own)
    code = kernels.source(file)
    target = out / prebuilt.file_name(file, code, defines, arch)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{file}.cu"
        src.write_text(code)
        cmd = [nvcc, "-cubin", prebuilt.STD, f"-arch=sm_{arch}", *(f"-D{d}" for d in defines),
               "-o", str(target), str(src)]
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: nvcc failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return name, time.perf_counter() - began, target.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--arch", default="90", help="compute capability without the dot (H200: 90)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--defines", default="", help="a whole-run build, as WORKBENCH_KERNEL_DEFINES")
    args = parser.parse_args()
    nvcc = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None)
    if nvcc is None:
        print("prebuild_kernels: nvcc not found (the CUDA toolkit is needed here)", file=sys.stderr)
        return 2
    try:
        run_defines = kernels.parse_defines(args.defines, "--defines")
        names = args.modules or default_modules()
        for name in names:
            kernels.split_name(name)
    except ValueError as err:
        print(f"prebuild_kernels: {err}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    failed = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(build, n, args.out, args.arch, run_defines, nvcc) for n in names]
        for future in futures:
            try:
                name, seconds, size = future.result()
                print(f"{name:48s} {seconds:7.1f} s {size / 1e6:7.2f} MB", flush=True)
            except (RuntimeError, FileNotFoundError) as err:
                failed += 1
                print(f"prebuild_kernels: {err}", file=sys.stderr)
    total = sum(p.stat().st_size for p in args.out.glob("*.cubin"))
    print(f"{len(names) - failed} of {len(names)} modules in {time.perf_counter() - began:.1f} s; "
          f"{total / 1e6:.1f} MB in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
