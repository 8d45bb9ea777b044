"""Code size of msm.cu's and batch_add.cu's kernels with the curve code's products unrolled
or rolled (affine_rounds.XYZZ_PRODUCTS), without a GPU (needs nvcc).

    python benchmarks/xyzz_code_size.py [--modules msm batch_add] [--variants inline rolled]
                                        [--cubins DIR] [--out sizes.json]

Builds each module for sm_90 as benchmarks/prebuild_kernels.py does (the same source, defines
and file name, with ptxas -v beside), so that --cubins can be the folder the prebuild then
completes with --keep; reads from each cubin's symbol table the bytes of SASS of every
kernel's own body (all it inlines: its hot loop) and of each function it calls, with ptxas's
registers, stack frame and spills (benchmarks/round_code_size.py's readings). The XYZZ
kernels inline the mixed addition's ten products, so these bytes are what the option changes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prebuild_kernels import compile_cubin
from round_code_size import ptxas_report, symbols

from workbench.gpu import affine_rounds

_MANGLED = re.compile(r"_Z\d+(\w+?)I")  # a template function's name in its mangled symbol


def module_of(module: str, variant: str) -> str:
    saved = affine_rounds.XYZZ_PRODUCTS
    affine_rounds.XYZZ_PRODUCTS = variant
    try:
        return affine_rounds.curve_module(module)
    finally:
        affine_rounds.XYZZ_PRODUCTS = saved


def short(symbol: str) -> str:
    """ec_dbl for _Z6ec_dblI4fp_tE...; plain names (fp2_mul's, extern "C") as they are."""
    m = _MANGLED.match(symbol)
    if m:
        group = "g2" if "fp2_t" in symbol else "g1"
        return f"{m.group(1)}<{group}>"
    m = re.match(r"_Z\d+(\w+?)R", symbol)
    return m.group(1) if m else symbol


def build(nvcc: str, module: str, variant: str, cubins: Path) -> dict[str, Any]:
    name = module_of(module, variant)
    t0 = time.perf_counter()
    cubin, log = compile_cubin(name, cubins, "90", (), nvcc, ("-Xptxas", "-v"))
    regs = ptxas_report(log)
    found = symbols(cubin)
    for k in found.values():
        k["callees_bytes"] = {short(c): s for c, s in k["callees_bytes"].items()}
    return {"module": module, "variant": variant, "name": name, "cubin": cubin.name,
            "build_s": time.perf_counter() - t0,
            "kernels": {k: {**v, **regs.get(k, {})} for k, v in found.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="+", default=list(affine_rounds.CURVE_MODULES),
                        choices=list(affine_rounds.CURVE_MODULES))
    parser.add_argument("--variants", nargs="+", default=["inline", "rolled"], choices=["inline", "rolled"])
    parser.add_argument("--cubins", type=Path, help="keep the binaries here (prebuild_kernels.py's names)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    nvcc = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None)
    if nvcc is None:
        raise SystemExit("nvcc not found")
    with tempfile.TemporaryDirectory() as tmp:
        cubins = args.cubins or Path(tmp)
        cubins.mkdir(parents=True, exist_ok=True)
        results = [build(nvcc, m, v, cubins) for m in args.modules for v in args.variants]
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    print(f"{'module':9} {'variant':7} {'kernel':22} {'body B':>8} {'callees B':>10} {'regs':>5} "
          f"{'stack':>6} {'spills':>7}  callees")
    for r in results:
        for name, k in sorted(r["kernels"].items()):
            callees = " ".join(f"{c}={s}" for c, s in k["callees_bytes"].items())
            print(f"{r['module']:9} {r['variant']:7} {name:22} {k['body_bytes']:>8} "
                  f"{sum(k['callees_bytes'].values()):>10} {k.get('registers', 0):>5} "
                  f"{k.get('stack_bytes', 0):>6} {k.get('spill_stores', 0) + k.get('spill_loads', 0):>7}  "
                  f"{callees}")
        print(f"{r['module']:9} {r['variant']:7} built in {r['build_s']:.0f} s")


if __name__ == "__main__":
    main()
