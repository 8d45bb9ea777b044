"""The CUDA sources in kernels/ build for the H200 (sm_90), and the Fr arithmetic in fr.cuh,
run on the host through its carry-flag emulation, matches Python integers. Needs nvcc, not
a GPU; skipped with a reason where nvcc is absent. Also the parts of workbench.gpu that need
neither: source loading, pass planning, and the error when CuPy is missing."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.gpu import kernels
from workbench.gpu.ntt import MAX_TILE_LOG2, MIN_RUN_LOG2, GpuDomain, plan_passes

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
SOURCES = sorted(KERNELS.glob("*.cu"))
# The front end and code generation to PTX, unoptimised: it finds every error in the sources
# at a tenth of a full build's time (39 s of CPU for batch_add.cu). The GPU tests build them
# fully, optimiser and assembler included, on the device.
CHECK = ["-arch=sm_90", "-std=c++17", "--ptx", "-Xcicc", "-O0"]
NVCC = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists()
                                else None)
R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
R_MONT = (1 << 256) % R
R_INV = pow(1 << 256, -1, R)

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit absent)")


def test_sources_present():
    assert {p.name for p in SOURCES} >= {"fr_vector.cu", "ntt.cu", "msm.cu", "batch_add.cu"}
    assert (KERNELS / "fr.cuh").exists()


@needs_nvcc
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_compiles_for_sm90(source: Path, tmp_path: Path):
    assert NVCC is not None
    out = tmp_path / (source.stem + ".ptx")
    proc = subprocess.run(
        [NVCC, *CHECK, str(source), "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0


@needs_nvcc
def test_benchmark_microkernels_compile_for_sm90(tmp_path: Path):
    """benchmarks/msm_gpu.py compiles its rate kernels against kernels/g1.cuh at run time:
    a renamed point function must break here, not on the GPU machine."""
    import importlib.util

    assert NVCC is not None
    spec = importlib.util.spec_from_file_location("msm_gpu", KERNELS.parent / "benchmarks" / "msm_gpu.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    src = tmp_path / "rates.cu"
    src.write_text(kernels.expand_includes(bench.RATE_HEADER + bench.RATE_KERNELS))
    proc = subprocess.run([NVCC, *CHECK, str(src), "-o", str(tmp_path / "r.ptx")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    madd = tmp_path / "madd.cu"  # the mixed additions over the rolled products
    madd.write_text(kernels.expand_includes(bench.MADD_HEADER + bench.MADD_KERNELS))
    proc = subprocess.run([NVCC, *CHECK, bench.MADD_ROLLED, str(madd), "-o", str(tmp_path / "m.ptx")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "fp_mul_rolled" in madd.read_text()


HARNESS = r"""
#include <cstdio>
#include <cstring>
#include "fr.cuh"

static fr_t parse(const char* hex) {
    fr_t x = fr_zero();
    int len = (int)strlen(hex);
    for (int k = 0; k < len; ++k) {
        char ch = hex[len - 1 - k];
        unsigned v = ch <= '9' ? ch - '0' : (ch | 32) - 'a' + 10;
        x.l[k / 8] |= v << (4 * (k % 8));
    }
    return x;
}

int main() {
    char op[16], a[80], b[80];
    while (scanf("%15s %79s %79s", op, a, b) == 3) {
        fr_t x = parse(a), y = parse(b), z;
        if (!strcmp(op, "add")) z = fr_add(x, y);
        else if (!strcmp(op, "sub")) z = fr_sub(x, y);
        else if (!strcmp(op, "sub_unreduced")) z = fr_sub_unreduced(x, y);
        else if (!strcmp(op, "mul")) z = fr_mul(x, y);
        else if (!strcmp(op, "to_mont")) z = fr_to_mont(x);
        else if (!strcmp(op, "from_mont")) z = fr_from_mont(x);
        else return 2;
        for (int j = 7; j >= 0; --j) printf("%08x", z.l[j]);
        printf("\n");
    }
    return 0;
}
"""


def _edge_values() -> list[int]:
    # Besides the field's own edges, both sides of every 32-bit word boundary and of every
    # 52-bit limb boundary of x and of 16 x (the FP64 product's limbs), all limbs full.
    near = {2**e + d for e in [*range(32, 256, 32), *range(52, 256, 52), *range(48, 256, 52)]
            for d in (-1, 0, 1)}
    full = [sum(((1 << 52) - 1) << (52 * k) for k in range(i)) for i in range(1, 5)]
    return [0, 1, 2, R - 1, R - 2, R_MONT, (R - 1) // 2, (R + 1) // 2, R - 2**32,
            *sorted(v % R for v in near), *full]


@needs_nvcc
@pytest.mark.parametrize("defines", [(), ("FR_MUL_CIOS",), ("FR_MUL_WIDE",), ("FR_MUL_FP64",)],
                         ids=["karatsuba", "cios", "wide", "fp64"])
def test_host_arithmetic_matches_python_ints(tmp_path: Path, defines: tuple[str, ...]):
    """Each multiplication build option of fr.cuh, run on the host (FR_MUL_FP64's products
    through std::fma, which IEEE 754 makes exact the same way as the GPU's DFMA)."""
    assert NVCC is not None
    src = tmp_path / "harness.cu"
    src.write_text(HARNESS)
    exe = tmp_path / "harness"
    build = subprocess.run(
        [NVCC, "-std=c++17", *(f"-D{d}" for d in defines), "-I", str(KERNELS), str(src),
         "-o", str(exe)],
        capture_output=True, text=True, timeout=600,
    )
    assert build.returncode == 0, build.stderr
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    reduced = _edge_values() + [rng.randrange(R) for _ in range(300)]
    canonical = [R, R + 1, 2 * R - 1, 2 * R, 2**255, 2**255 + 12345, 2**256 - 1, 3 * R - 2**256,
                 *(rng.randrange(2**256) for _ in range(100))]
    canonical = [v for v in canonical if v < 2**256]
    cases: list[tuple[str, int, int, int]] = []
    for x in reduced:
        y = rng.choice(reduced)
        cases += [("add", x, y, (x + y) % R), ("sub", x, y, (x - y) % R),
                  ("sub", y, x, (y - x) % R), ("mul", x, y, x * y * R_INV % R),
                  ("from_mont", x, 0, x * R_INV % R)]
    for e in _edge_values():
        for f in _edge_values():
            cases.append(("mul", e, f, e * f * R_INV % R))
    # An unreduced second operand in [r, 2r), as the NTT's butterflies pass one.
    for x in reduced:
        y = rng.choice(reduced)
        cases += [("sub_unreduced", x, y, x - y + R),
                  ("mul", x, y + R, x * y * R_INV % R), ("mul", x, 2 * R - 1, x * (R - 1) * R_INV % R),
                  ("mul", x, 2**256 - 1, x * (2**256 - 1) * R_INV % R)]
    cases += [("to_mont", v, 0, v % R * R_MONT % R) for v in reduced + canonical]
    stdin = "".join(f"{op} {x:x} {y:x}\n" for op, x, y, _ in cases)
    run = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = [int(line, 16) for line in run.stdout.split()]
    assert len(got) == len(cases)
    bad = [(op, hex(x), hex(y), hex(g), hex(w))
           for (op, x, y, w), g in zip(cases, got, strict=True) if g != w]
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first {bad[:3]}"


def test_sources_inline_local_headers_once():
    code = kernels.source("ntt")
    assert '#include "' not in code
    assert code.count("struct fr_t {") == 1
    assert "ntt_pass_kernel" in code


def test_module_names_carry_build_defines(monkeypatch: pytest.MonkeyPatch):
    """A round variant's module is kernels/affine_round.cu with its defines; the default build
    is the caller's own module."""
    from workbench.gpu import affine_rounds

    assert kernels.split_name("msm") == ("msm", ())
    assert kernels.split_name("affine_round+BA_PRODUCTS_CALLED+N=3") == ("affine_round",
                                                                         ("BA_PRODUCTS_CALLED", "N=3"))
    for bad in ("", "+X", "msm+x y", "msm+-DX"):
        with pytest.raises(ValueError, match="bad kernel module name"):
            kernels.split_name(bad)
    assert affine_rounds.round_module("msm") == "msm"
    monkeypatch.setattr(affine_rounds, "XYZZ_PRODUCTS", "inline")  # the round builds' own defines alone
    defines = {}
    for products in ("rolled", "inline", "called"):
        for square in ("product", "dedicated"):
            monkeypatch.setattr(affine_rounds, "PRODUCTS", products)
            monkeypatch.setattr(affine_rounds, "SQUARE", square)
            defines[products, square] = kernels.split_name(affine_rounds.round_module("batch_add"))
    assert defines["rolled", "product"] == ("batch_add", ())
    assert defines["inline", "dedicated"] == ("affine_round", ("BA_PRODUCTS_INLINE", "FP_SQR_DEDICATED"))
    assert len(set(defines.values())) == 6
    source = kernels.source("affine_round")
    assert all(d in (KERNELS / "batch_affine.cuh").read_text() + (KERNELS / "fp.cuh").read_text()
               for _, ds in defines.values() for d in ds)
    assert "affine_round##suffix" in source
    monkeypatch.setattr(affine_rounds, "PRODUCTS", "unrolled")
    with pytest.raises(ValueError, match="PRODUCTS must be one of"):
        affine_rounds.round_module("msm")


def test_curve_module_names_carry_the_xyzz_build(monkeypatch: pytest.MonkeyPatch):
    """XYZZ_PRODUCTS picks the build of msm.cu and batch_add.cu ("inline": their plain
    names), which rounds in the callers' own modules follow, and the other rounds' builds
    carry too; a value it does not know is one ValueError naming the switch."""
    from workbench.gpu import affine_rounds

    monkeypatch.setattr(affine_rounds, "XYZZ_PRODUCTS", "inline")
    assert [affine_rounds.curve_module(m) for m in ("msm", "batch_add")] == ["msm", "batch_add"]
    monkeypatch.setattr(affine_rounds, "XYZZ_PRODUCTS", "rolled")
    rolled = affine_rounds.curve_module("batch_add")
    assert kernels.split_name(rolled) == ("batch_add", ("EC_PRODUCTS_ROLLED",))
    assert affine_rounds.round_module(rolled) == rolled
    monkeypatch.setattr(affine_rounds, "PRODUCTS", "inline")
    assert kernels.split_name(affine_rounds.round_module(rolled)) == (
        "affine_round", ("BA_PRODUCTS_INLINE", "EC_PRODUCTS_ROLLED"))
    builds = affine_rounds.option_builds()
    assert {"msm+EC_PRODUCTS_ROLLED", "batch_add+EC_PRODUCTS_ROLLED"} <= set(builds)
    assert len(set(builds)) == len(builds) == 7
    assert "#if defined(EC_PRODUCTS_ROLLED)" in kernels.source("msm")
    message = r"^XYZZ_PRODUCTS must be one of \['inline', 'rolled'\], got "
    for bad in ("unrolled", "", None):
        monkeypatch.setattr(affine_rounds, "XYZZ_PRODUCTS", bad)
        for call in (lambda: affine_rounds.curve_module("msm"), lambda: affine_rounds.round_module("msm")):
            with pytest.raises(ValueError, match=message):
                call()


def test_pass_plans_cover_every_stage_once():
    for log2 in range(1, 29):
        passes = plan_passes(log2)
        assert [s for p in passes for s in range(p.lo, p.lo + p.bits)] == list(range(log2))
        for p in passes:
            assert p.tile_log2 <= MAX_TILE_LOG2 and p.log_cols <= p.lo
            assert p.lo == 0 or p.log_cols >= MIN_RUN_LOG2  # whole 128-byte lines


def test_missing_cupy_names_the_gpu_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'workbench\[gpu\]'"):
        kernels.require_cupy()
    with pytest.raises(ModuleNotFoundError, match="gpu"):
        GpuDomain(10)


def test_kernel_build_options_from_the_environment_are_checked():
    assert kernels.parse_defines(" FR_MUL_FP64, NTT_MIN_BLOCKS=3 ,") == ("FR_MUL_FP64",
                                                                        "NTT_MIN_BLOCKS=3")
    assert kernels.parse_defines("") == ()
    for bad in ("FR MUL", "-DFR_MUL_FP64", "X=1;rm", "1ABC"):
        with pytest.raises(ValueError, match=f"{kernels.DEFINES_ENV}: .* is not a preprocessor"):
            kernels.parse_defines(bad)
    code = "import workbench.gpu.kernels as k; print(k._defines)"
    env = {**os.environ, kernels.DEFINES_ENV: "FR_MUL_FP64"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.stdout.strip() == "('FR_MUL_FP64',)", proc.stderr


def test_importing_the_gpu_package_does_not_import_cupy():
    code = ("import sys, workbench, workbench.gpu.kernels, workbench.gpu.ntt; "
            "assert 'cupy' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
