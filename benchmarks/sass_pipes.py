"""SASS instructions of the Fr product and butterfly per pipe, for each build option (no GPU).

    python benchmarks/sass_pipes.py [--defines ,FR_MUL_CIOS,FR_MUL_FP64] [--nvdisasm PATH]

Compiles two one-shot kernels (one fr_mul; one Cooley-Tukey butterfly: product, sum,
difference) with `nvcc -arch=sm_90 -cubin` and each option's define, disassembles them with
nvdisasm, and counts instructions by the pipe that runs them. The cycles are per warp on one
SM sub-partition, 16 lanes a clock for each pipe (kernels/NOTES_ntt.md): 2 per instruction,
4 for IMAD.HI and IMAD.WIDE; the issue port takes one instruction a clock. The largest of the
four is the bound this model predicts. Loads, stores and control are counted apart.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
SOURCE = r"""
#include "fr.cuh"
extern "C" __global__ void one_mul(uint4* o, const uint4* a)
{
    const unsigned int i = threadIdx.x;
    fr_store(o, i, fr_mul(fr_load(a, i), fr_load(a, i + 1)));
}
extern "C" __global__ void one_butterfly(uint4* o, const uint4* a)
{
    const unsigned int i = threadIdx.x;
    const fr_t x0 = fr_load(a, i), x1 = fr_load(a, i + 1), w = fr_load(a, i + 2);
    const fr_t v = fr_mul(x1, w);
    fr_store(o, i, fr_add(x0, v));
    fr_store(o, i + 1, fr_sub(x0, v));
}
"""
FP64 = {"DFMA", "DADD", "DMUL"}
ALU = {"IADD3", "LOP3", "SHF", "SEL", "ISETP", "LEA", "PLOP3", "PRMT", "MOV", "IABS", "VIADD", "SGXT"}
OTHER = {"LDG", "STG", "LDC", "ULDC", "S2R", "S2UR", "EXIT", "BRA", "NOP", "LDS", "STS", "BAR", "UMOV"}
_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_FUNC = re.compile(r"\.text\.(\w+):")


def pipe(op: str) -> tuple[str, int]:
    base = op.split(".")[0]
    if base in FP64:
        return "fp64", 2
    if base == "IMAD":
        return "fma", 4 if op.startswith(("IMAD.HI", "IMAD.WIDE")) else 2
    if base in ALU:
        return "alu", 2
    if base in OTHER:
        return "other", 0
    return "unknown:" + op, 0


def counts(sass: str) -> dict[str, collections.Counter[str]]:
    out: dict[str, collections.Counter[str]] = {}
    current = None
    for line in sass.splitlines():
        head = _FUNC.search(line)
        if head:
            current = out.setdefault(head.group(1), collections.Counter())
            continue
        m = _INSN.search(line)
        if m and current is not None:
            current[m.group(1)] += 1
    return out


def summary(ops: collections.Counter[str]) -> dict[str, int]:
    row = collections.Counter({"issue": 0, "fp64": 0, "fma": 0, "alu": 0})
    for op, n in ops.items():
        kind, cycles = pipe(op)
        if kind == "other":
            continue
        row["issue"] += n
        row[kind] += n * cycles
        row[kind.split(":")[0] + "_insns"] += n
    return dict(row)


def find_nvdisasm(given: str | None) -> str:
    for cand in (given, shutil.which("nvdisasm"), "/tmp/nvdis/nvidia/cu13/bin/nvdisasm"):
        if cand and Path(cand).exists():
            return cand
    sys.exit("sass_pipes: nvdisasm not found (pip install nvidia-cuda-nvdisasm, or --nvdisasm PATH)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--defines", default=",FR_MUL_CIOS,FR_MUL_FP64",
                        help="comma-separated build options; empty for the default")
    parser.add_argument("--nvdisasm", default=None)
    args = parser.parse_args(argv)
    nvcc = shutil.which("nvcc") or sys.exit("sass_pipes: nvcc not found")
    nvdisasm = find_nvdisasm(args.nvdisasm)
    print(f"{'build':<14}{'kernel':<15}{'issue':>6}{'fp64':>6}{'fma':>6}{'alu':>6}{'bound':>7}  top")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.cu"
        src.write_text(SOURCE)
        for define in args.defines.split(","):
            cubin = Path(tmp) / f"k{define}.cubin"
            flags = [f"-D{define}"] if define else []
            subprocess.run([nvcc, "-arch=sm_90", "-cubin", "-std=c++17", f"-I{KERNELS}", *flags,
                            str(src), "-o", str(cubin)], check=True)
            sass = subprocess.run([nvdisasm, str(cubin)], check=True, capture_output=True,
                                  text=True).stdout
            for kernel, ops in sorted(counts(sass).items()):
                s = summary(ops)
                bound = max(s["issue"], s["fp64"], s["fma"], s["alu"])
                top = " ".join(f"{k}:{v}" for k, v in ops.most_common(8))
                print(f"{define or 'default':<14}{kernel:<15}{s['issue']:>6}{s['fp64']:>6}"
                      f"{s['fma']:>6}{s['alu']:>6}{bound:>7}  {top}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
