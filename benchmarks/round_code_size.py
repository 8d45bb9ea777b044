"""Code size of the affine round kernels per build option, without a GPU (needs nvcc).

    python benchmarks/round_code_size.py [--variants rolled inline called ...] [--out sizes.json]

Builds kernels/affine_round.cu for sm_90 (nvcc -cubin, ptxas -v) once per variant of
workbench.gpu.affine_rounds' PRODUCTS and SQUARE, and reads from the cubin's symbol table
how many bytes of SASS each kernel's own body takes (everything inlined into it: the hot
loops) and each function it calls (one copy per kernel), with ptxas's registers, stack frame
and spills. The round kernels' warps wait on instruction fetch (kernels/NOTES_msm.md), so
the bytes a pass's loop runs through are what the variants change.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.gpu import affine_rounds, kernels

KERNELS = kernels.KERNELS_DIR
VARIANTS = {"rolled": ("rolled", "product"), "inline": ("inline", "product"),
            "called": ("called", "product"), "rolled_sqr": ("rolled", "dedicated"),
            "inline_sqr": ("inline", "dedicated"), "called_sqr": ("called", "dedicated")}
_SYMBOL = re.compile(r"^\s*\d+:\s+([0-9a-f]+)\s+(\S+)\s+FUNC\s+(\w+)\s+.*?\s(\S+)$")
_PTXAS_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")


def defines_of(products: str, square: str) -> tuple[str, ...]:
    saved = affine_rounds.PRODUCTS, affine_rounds.SQUARE
    affine_rounds.PRODUCTS, affine_rounds.SQUARE = products, square
    try:
        return kernels.split_name(affine_rounds.round_module("affine_round"))[1]
    finally:
        affine_rounds.PRODUCTS, affine_rounds.SQUARE = saved


def symbols(cubin: Path) -> dict[str, dict[str, Any]]:
    """Per kernel: its body's bytes (from its start to its first callee) and its callees'."""
    out = subprocess.run(["readelf", "-sW", str(cubin)], capture_output=True, text=True, check=True).stdout
    kernels_found: dict[str, int] = {}
    callees: dict[str, dict[str, tuple[int, int]]] = {}
    for line in out.splitlines():
        m = _SYMBOL.match(line)
        if not m:
            continue
        value, size, bind, name = int(m.group(1), 16), int(m.group(2), 0), m.group(3), m.group(4)
        if bind == "GLOBAL":
            kernels_found[name] = size
        elif name.startswith("$"):
            kernel, callee = name[1:].split("$", 1)
            callees.setdefault(kernel, {})[callee] = (value, size)
    result = {}
    for name, total in kernels_found.items():
        called = callees.get(name, {})
        body = min((v for v, _ in called.values()), default=total)
        result[name] = {"text_bytes": total, "body_bytes": body,
                        "callees_bytes": {c: s for c, (_, s) in sorted(called.items())}}
    return result


def ptxas_report(log: str) -> dict[str, dict[str, int]]:
    report: dict[str, dict[str, int]] = {}
    entry = None
    for line in log.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            entry = m.group(1)
            report[entry] = {}
        elif entry and not report[entry] and (m := _PTXAS_FRAME.search(line)):
            report[entry].update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)),
                                 spill_loads=int(m.group(3)))
        elif entry and (m := _PTXAS_REGS.search(line)):
            report[entry]["registers"] = int(m.group(1))
    return report


def build(nvcc: str, variant: str, tmp: Path) -> dict[str, Any]:
    defines = defines_of(*VARIANTS[variant])
    cubin = tmp / f"{variant}.cubin"
    t0 = time.perf_counter()
    cmd = [nvcc, "-cubin", "-arch=sm_90", "-std=c++17", *(f"-D{d}" for d in defines), "-Xptxas", "-v",
           "-I", str(KERNELS), str(KERNELS / "affine_round.cu"), "-o", str(cubin)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise SystemExit(f"{variant}: nvcc failed\n{proc.stderr}")
    regs = ptxas_report(proc.stderr)
    found = symbols(cubin)
    return {"variant": variant, "defines": list(defines), "build_s": time.perf_counter() - t0,
            "kernels": {k: {**v, **regs.get(k, {})} for k, v in found.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("nvcc not found")
    with tempfile.TemporaryDirectory() as tmp:
        results = [build(nvcc, v, Path(tmp)) for v in args.variants]
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    print(f"{'variant':11} {'kernel':16} {'body B':>8} {'callees B':>10} {'regs':>5} {'stack':>6} "
          f"{'spills':>7}  callees")
    for r in results:
        for name, k in sorted(r["kernels"].items()):
            callees = " ".join(f"{c}={s}" for c, s in k["callees_bytes"].items())
            print(f"{r['variant']:11} {name:16} {k['body_bytes']:>8} {sum(k['callees_bytes'].values()):>10} "
                  f"{k.get('registers', 0):>5} {k.get('stack_bytes', 0):>6} "
                  f"{k.get('spill_stores', 0) + k.get('spill_loads', 0):>7}  {callees}")


if __name__ == "__main__":
    main()
