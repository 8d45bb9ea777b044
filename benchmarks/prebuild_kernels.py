"""Build the kernel modules with nvcc here, for a GPU machine to load instead of compiling.

    python benchmarks/prebuild_kernels.py --out .cubins [--arch 90] [--jobs 2] [--defines A,B=1]
                                          [--keep] [MODULE ...]

A fresh GPU machine compiles every module with NVRTC on first use, minutes of its time
(msm.cu and batch_add.cu the longest). This compiles them on this machine instead, with the
same expanded source and defines, into files named by what they were built from
(workbench/gpu/prebuilt.py); carry the folder and set WORKBENCH_KERNEL_CUBINS to it there.
A module whose source or defines differ from what was built is compiled there as before.

MODULE names are as workbench.gpu.kernels.module takes them ("affine_round+BA_PRODUCTS_CALLED");
by default every kernels/*.cu with its default build, and the affine-round builds that
workbench/gpu/affine_rounds.py's options name (option_builds). --defines adds a whole-run
build (WORKBENCH_KERNEL_DEFINES) to each; --keep leaves a binary the folder already holds for
exactly that build (its file name digests the source, defines and architecture). Prints each
module's compile time and size.
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
    return sorted(p.stem for p in kernels.KERNELS_DIR.glob("*.cu")) + affine_rounds.option_builds() + integer


def target_of(name: str, out: Path, arch: str, run_defines: tuple[str, ...] = ()) -> Path:
    """Where module `name`'s binary for this build goes (its name digests what it is built from)."""
    file, own = kernels.split_name(name)
    defines = (*run_defines, *own)
    return out / prebuilt.file_name(file, kernels.source(file), defines, arch)


def compile_cubin(name: str, out: Path, arch: str, run_defines: tuple[str, ...], nvcc: str,
                  extra: tuple[str, ...] = ()) -> tuple[Path, str]:
    """nvcc's build of module `name` into `out`, and its log; `extra` options that leave the
    binary as it is (benchmarks/xyzz_code_size.py passes -Xptxas -v)."""
    file, own = kernels.split_name(name)
    defines = (*run_defines, *own)
    target = target_of(name, out, arch, run_defines)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{file}.cu"
        src.write_text(kernels.source(file))
        cmd = [nvcc, "-cubin", prebuilt.STD, f"-arch=sm_{arch}", *(f"-D{d}" for d in defines), *extra,
               "-o", str(target), str(src)]
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: nvcc failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return target, done.stderr


def build(name: str, out: Path, arch: str, run_defines: tuple[str, ...], nvcc: str,
          keep: bool = False) -> tuple[str, float, int]:
    """One module's binary (kept as it is with `keep` when the folder holds this exact build)."""
    began = time.perf_counter()
    target = target_of(name, out, arch, run_defines)
    if not (keep and target.is_file()):
        target, _ = compile_cubin(name, out, arch, run_defines, nvcc)
    return name, time.perf_counter() - began, target.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--arch", default="90", help="compute capability without the dot (H200: 90)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--defines", default="", help="a whole-run build, as WORKBENCH_KERNEL_DEFINES")
    parser.add_argument("--keep", action="store_true",
                        help="skip modules whose exact build (source, defines, arch) is already in --out")
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
        futures = [pool.submit(build, n, args.out, args.arch, run_defines, nvcc, args.keep) for n in names]
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
