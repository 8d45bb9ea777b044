"""kernels/ntt.cu compiled for the host, once per product build (the FP64 default and
FR_MUL_INTEGER): whole NTTs through the real pass kernel against the CPU prover's NTT, and every
pass flag (the coset, scaling, product and subtraction folded into the first and last passes)
bit for bit between the two builds. The pass kernel runs block by block with one thread each,
its tile a plain array; the FP64 build's products use the host's std::fma, exact as on the
GPU. Needs a host C++ compiler and the CUDA headers; skipped with a reason otherwise."""

from __future__ import annotations

import ctypes
import os
import secrets

import numpy as np
import pytest
from test_msm_kernels_compile import CUDA_INCLUDE, CXX, _compile_host

from workbench.gpu.ntt import (
    DIT,
    GENERATOR,
    IN_SCALE,
    MODULUS,
    OUT_SCALAR,
    OUT_SCALE_REV,
    OUT_SCATTER_REV,
    OUT_SUB,
    mont_limbs,
    plan_passes,
)
from workbench.prover import field
from workbench.prover import ntt as cpu

BUILDS = {"integer": ("FR_MUL_INTEGER",), "fp64": ()}  # ntt.cu builds the FP64 product by default

# A kernel grid of blocks run one after another, each of one thread: ntt_pass_kernel loops
# over its tile with blockDim's stride, so one thread does a block's work; barriers are void.
PRELUDE = r"""
#include <vector_types.h>
#include <vector_functions.h>
struct emu_dim3 { unsigned int x, y, z; };
static emu_dim3 blockIdx = {0, 0, 0};
static const emu_dim3 threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#define __global__
#define __launch_bounds__(...)
#define __shared__
inline void __syncthreads() {}
inline unsigned int __brev(unsigned int x)
{
    unsigned int r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned int __clz(unsigned int x) { return x ? __builtin_clz(x) : 32; }
uint4 tile[1 << 12];  // the kernel's extern shared tile: 2^10 elements, two halves
"""
DRIVER = r"""
#include "ntt.cu"
extern "C" void run_pass(const uint4* src, uint4* dst, const uint4* tw, const uint4* in_scale,
                         const uint4* out_scale, const uint4* sub, unsigned int log_n,
                         unsigned int lo, unsigned int bits, unsigned int log_cols,
                         unsigned int flags, unsigned int blocks)
{
    for (unsigned int b = 0; b < blocks; ++b) {
        blockIdx.x = b;
        ntt_pass_kernel(src, dst, tw, in_scale, out_scale, sub, log_n, lo, bits, log_cols, flags);
    }
}
"""


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    if CXX is None or CUDA_INCLUDE is None:
        pytest.skip("host C++ compiler or CUDA headers (vector_types.h) not found")
    tmp = tmp_path_factory.mktemp("ntt_host")
    (tmp / "driver.cpp").write_text(DRIVER)
    out = {}
    for name, defines in BUILDS.items():
        so = _compile_host(tmp, f"ntt_{name}.so", tmp / "driver.cpp", shared=True, defines=defines,
                           prelude_text=PRELUDE, opt="-O1")
        lib = ctypes.CDLL(str(so))
        lib.run_pass.restype = None
        lib.run_pass.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_uint] * 6
        out[name] = lib
    return out


@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("SEED", secrets.randbits(63)))
    print(f"SEED={seed}")
    return np.random.default_rng(seed)


def stage_twiddles(log2: int) -> np.ndarray:
    """tw[2^s + j] = w_(2^(s+1))^j, tw[0] = 1, in Montgomery form: the GPU domain's layout."""
    w = pow(GENERATOR, (MODULUS - 1) >> log2, MODULUS)
    values = [1]
    for s in range(log2):
        root = pow(w, 1 << (log2 - 1 - s), MODULUS)
        acc = 1
        for _ in range(1 << s):
            values.append(acc)
            acc = acc * root % MODULUS
    return mont_limbs(values)


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


def run_pass(lib: ctypes.CDLL, log2: int, index: int, src: np.ndarray, dst: np.ndarray,
             tw: np.ndarray, flags: int, in_scale: np.ndarray | None = None,
             out_scale: np.ndarray | None = None, sub: np.ndarray | None = None) -> None:
    p = plan_passes(log2)[index]
    lib.run_pass(_ptr(src), _ptr(dst), _ptr(tw), _ptr(in_scale), _ptr(out_scale), _ptr(sub),
                 log2, p.lo, p.bits, p.log_cols, flags, (1 << log2) >> p.tile_log2)


def host_ntt(lib: ctypes.CDLL, x: np.ndarray, log2: int) -> np.ndarray:
    """GpuDomain.ntt's passes: Gentleman-Sande, highest stages first, the last one scattering
    to bit-reversed positions (out of place: it writes other tiles' elements)."""
    tw = stage_twiddles(log2)
    work, out = x.copy(), np.full_like(x, 2**64 - 1)
    count = len(plan_passes(log2))
    for k, index in enumerate(reversed(range(count))):
        last = k == count - 1
        run_pass(lib, log2, index, work, out if last else work, tw,
                 OUT_SCATTER_REV if last else 0)
    return out


@pytest.mark.parametrize("log2", [10, 12])
def test_whole_ntt_equals_the_cpu_prover_in_both_builds(libs, rng, log2):
    x = field.random_elements(rng, 1 << log2)
    want = cpu.ntt(x, cpu.Domain(log2))
    for name, lib in libs.items():
        np.testing.assert_array_equal(host_ntt(lib, x, log2), want, err_msg=name)


@pytest.mark.parametrize("dit", [False, True], ids=["dif", "dit"])
def test_every_pass_flag_is_bit_identical_across_builds(libs, rng, dit):
    """The first pass with a pointwise product on load, the last with a bit-reversed scale,
    a scalar, a subtraction and the scatter: every fr_mul call site of the kernel."""
    log2 = 12
    n = 1 << log2
    tw = stage_twiddles(log2)
    x, scale, rev_scale, sub = (field.random_elements(rng, n) for _ in range(4))
    scalar = field.random_elements(rng, 1)
    last = len(plan_passes(log2)) - 1
    got = {}
    for name, lib in libs.items():
        first_out = np.full_like(x, 2**64 - 1)
        run_pass(lib, log2, 0 if dit else last, x, first_out, tw,
                 (DIT if dit else 0) | IN_SCALE, in_scale=scale)
        out_a = np.full_like(x, 2**64 - 1)
        run_pass(lib, log2, last if dit else 0, first_out, out_a, tw,
                 (DIT if dit else 0) | OUT_SCALE_REV | OUT_SUB | OUT_SCATTER_REV,
                 out_scale=rev_scale, sub=sub)
        out_b = np.full_like(x, 2**64 - 1)
        run_pass(lib, log2, last if dit else 0, first_out, out_b, tw,
                 (DIT if dit else 0) | OUT_SCALAR, out_scale=scalar)
        for arr in (first_out, out_a, out_b):
            assert bool(field.is_reduced(arr).all()), f"{name}: unwritten or unreduced outputs"
        got[name] = (first_out, out_a, out_b)
    for a, b in zip(got["integer"], got["fp64"], strict=True):
        np.testing.assert_array_equal(b, a)
