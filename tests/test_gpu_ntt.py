"""The GPU kernels against plain Python integers and the CPU reference. Run on a machine
with a CUDA device: python -m pytest -m gpu tests/test_gpu_ntt.py

Every test draws fresh random inputs (the seed is printed, so a failure can be replayed
through SEED=... in the environment) and poisons outputs and scratch with 0xFF bytes, a value
no kernel produces (it is >= r), so an element nobody wrote cannot pass."""

from __future__ import annotations

import os
import secrets
from typing import Any

import numpy as np
import pytest
from conftest import require_cuda_device

cupy = require_cuda_device()

from workbench.gpu import kernels
from workbench.gpu.ntt import STAGES, GpuDomain, durations_ms
from workbench.prover import field
from workbench.prover import ntt as cpu

pytestmark = pytest.mark.gpu

R = field.MODULUS
R_MONT = (1 << 256) % R
R_INV = pow(1 << 256, -1, R)
G = field.GENERATOR
POISON = np.uint64(2**64 - 1)



@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("SEED", secrets.randbits(63)))
    print(f"SEED={seed}")
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- helpers

def to_limbs(values: list[int]) -> np.ndarray:
    """Raw 256-bit integers as (n, 4) uint64 limbs (no Montgomery factor applied)."""
    raw = b"".join(v.to_bytes(32, "little") for v in values)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(len(values), 4)


def to_ints(limbs: np.ndarray) -> list[int]:
    raw = np.ascontiguousarray(limbs).astype("<u8").tobytes()
    return [int.from_bytes(raw[i : i + 32], "little") for i in range(0, len(raw), 32)]


def poisoned(n: int) -> Any:
    out = cupy.empty((n, 4), dtype=cupy.uint64)
    out.fill(POISON)
    return out


def random_reduced(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random elements < r, fast enough for 2^24 (not exactly uniform: rows that would
    reach r get their top limb cut to 62 bits)."""
    x = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    x[:, 3] &= np.uint64(2**63 - 1)
    high = x[:, 3] >= np.uint64(R >> 192)
    x[high, 3] &= np.uint64(2**62 - 1)
    return x


def random_inputs(rng: np.random.Generator, n: int) -> np.ndarray:
    return field.random_elements(rng, n) if n <= 1 << 16 else random_reduced(rng, n)


def domain(log2: int) -> GpuDomain:
    d = GpuDomain(log2)
    d.prepare()
    d._scratch_buffer().fill(POISON)
    return d


def evaluate(values: list[int], z: int, block: int = 1 << 11) -> int:
    """sum(values[j] * z^j) mod r with Python ints, in blocks of one dot product each."""
    block = min(block, len(values))
    powers = [1]
    for _ in range(block - 1):
        powers.append(powers[-1] * z % R)
    pw = np.array(powers, dtype=object)
    partial = np.array(values, dtype=object).reshape(-1, block).dot(pw).tolist()
    zb, acc = pow(z, block, R), 0
    for v in reversed(partial):
        acc = (acc * zb + v) % R
    return acc


# ---------------------------------------------------------------- field arithmetic

EDGES = [0, 1, 2, R - 1, R - 2, R_MONT, (R - 1) // 2, (R + 1) // 2, 2**32 - 1, 2**64 - 1,
         2**128 + 1, R - 2**32]


def test_field_kernels_match_python_ints(rng):
    pairs = [(x, y) for x in EDGES for y in EDGES]
    pairs += [(int(v) % R, int(w) % R) for v, w in
              zip(to_ints(random_reduced(rng, 2000)), to_ints(random_reduced(rng, 2000)), strict=True)]
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    c = to_ints(random_reduced(rng, len(pairs)))
    s = int(to_ints(random_reduced(rng, 1))[0])
    n = len(pairs)
    dev = {name: cupy.asarray(to_limbs(v)) for name, v in (("a", a), ("b", b), ("c", c))}
    s_dev = cupy.asarray(to_limbs([s]))
    expect = {
        "fr_add_kernel": ([dev["a"], dev["b"]], [(x + y) % R for x, y in zip(a, b, strict=True)]),
        "fr_sub_kernel": ([dev["a"], dev["b"]], [(x - y) % R for x, y in zip(a, b, strict=True)]),
        "fr_mul_kernel": ([dev["a"], dev["b"]], [x * y * R_INV % R for x, y in zip(a, b, strict=True)]),
        "fr_mul_sub_kernel": ([dev["a"], dev["b"], dev["c"]],
                              [(x * y * R_INV - z) % R for x, y, z in zip(a, b, c, strict=True)]),
        "fr_scale_kernel": ([dev["a"], s_dev], [x * s * R_INV % R for x in a]),
        "fr_from_mont_kernel": ([dev["a"]], [x * R_INV % R for x in a]),
    }
    for kernel, (inputs, want) in expect.items():
        out = poisoned(n)
        kernels.launch_elementwise(kernel, out, *inputs)
        got = to_ints(cupy.asnumpy(out))
        bad = [i for i in range(n) if got[i] != want[i]]
        assert not bad, f"{kernel}: {len(bad)} wrong, first a={a[bad[0]]:#x} b={b[bad[0]]:#x}"


def test_to_mont_reduces_any_256_bit_input(rng):
    """Policy: canonical inputs are reduced mod r, including r .. 2^256 - 1."""
    canon = [*EDGES, R, R + 1, 2 * R - 1, 2 * R, 2**255, 2**255 + 7, 2**256 - 1,
             *(int(v) for v in rng.integers(0, 2**63, size=8)),
             *(int.from_bytes(rng.bytes(32), "little") for _ in range(4000))]
    out = poisoned(len(canon))
    kernels.launch_elementwise("fr_to_mont_kernel", out, cupy.asarray(to_limbs(canon)))
    got = to_ints(cupy.asnumpy(out))
    want = [v % R * R_MONT % R for v in canon]
    bad = [hex(v) for v, g, w in zip(canon, got, want, strict=True) if g != w]
    assert not bad, f"{len(bad)} wrong, first inputs {bad[:3]}"
    back = poisoned(len(canon))
    kernels.launch_elementwise("fr_from_mont_kernel", back, out)
    assert to_ints(cupy.asnumpy(back)) == [v % R for v in canon]


# ---------------------------------------------------------------- transforms

@pytest.mark.parametrize("log2", range(1, 7))
def test_small_transforms_match_python_int_sums(log2, rng):
    n = 1 << log2
    w = pow(G, (R - 1) >> log2, R)
    w_inv, n_inv, g_inv = pow(w, -1, R), pow(n, -1, R), pow(G, -1, R)
    x = to_ints(field.random_elements(rng, n))  # Montgomery forms; every transform is linear
    dft = [sum(v * pow(w, i * j, R) for j, v in enumerate(x)) % R for i in range(n)]
    idft = [n_inv * sum(v * pow(w_inv, i * j, R) for j, v in enumerate(x)) % R for i in range(n)]
    coset = [sum(v * pow(G, j, R) * pow(w, i * j, R) for j, v in enumerate(x)) % R
             for i in range(n)]
    icoset = [pow(g_inv, i, R) * v % R for i, v in enumerate(idft)]
    d = domain(log2)
    for name, want in (("ntt", dft), ("intt", idft), ("coset_ntt", coset),
                       ("coset_intt", icoset)):
        y = cupy.asarray(to_limbs(x))
        getattr(d, name)(y)
        assert to_ints(cupy.asnumpy(y)) == want, name
    abc = [to_ints(field.random_elements(rng, n)) for _ in range(3)]
    canon = [[v * R_INV % R for v in vec] for vec in abc]
    want_h = cpu.h_reference(canon[0], canon[1], canon[2], log2)
    out = poisoned(n)
    a_dev, b_dev, c_dev = (cupy.asarray(to_limbs(v)) for v in abc)
    d.compute_h(a_dev, b_dev, c_dev, out=out)
    assert [v * R_INV % R for v in to_ints(cupy.asnumpy(out))] == want_h


@pytest.mark.parametrize("log2", range(10, 17))
def test_transforms_and_h_equal_cpu_reference(log2, rng):
    n = 1 << log2
    d, ref = domain(log2), cpu.Domain(log2)
    x = random_inputs(rng, n)
    for name in ("ntt", "intt", "coset_ntt", "coset_intt"):
        d._scratch_buffer().fill(POISON)
        y = cupy.asarray(x)
        getattr(d, name)(y)
        np.testing.assert_array_equal(cupy.asnumpy(y), getattr(cpu, name)(x, ref), err_msg=name)
    a, b, c = (random_inputs(rng, n) for _ in range(3))
    want = cpu.compute_h(a, b, c, ref)
    out = poisoned(n)
    d.compute_h(cupy.asarray(a), cupy.asarray(b), cupy.asarray(c), out=out)
    np.testing.assert_array_equal(cupy.asnumpy(out), want)
    owned = d.compute_h(cupy.asarray(a), cupy.asarray(b), cupy.asarray(c))
    np.testing.assert_array_equal(cupy.asnumpy(owned), want)
    b_dev = cupy.asarray(b)  # b is read by the last transform's first pass only
    d.compute_h(cupy.asarray(a), b_dev, cupy.asarray(c), out=b_dev)
    np.testing.assert_array_equal(cupy.asnumpy(b_dev), want)


@pytest.mark.parametrize("log2", range(17, 25))
def test_large_transforms_invariants(log2, rng):
    """Above 2^16: a few NTT outputs against Python-int sums, round trips, and h[n-1] = 0
    when a·b = c on H."""
    n = 1 << log2
    d = domain(log2)
    x = random_reduced(rng, n)
    x_dev = cupy.asarray(x)
    y = x_dev.copy()
    d.ntt(y)
    got = cupy.asnumpy(y)
    values = to_ints(x)
    w = pow(G, (R - 1) >> log2, R)
    spots = [n - 1, *(int(v) for v in rng.integers(1, n - 1, size=1 if log2 > 21 else 3))]
    for i in spots:
        assert to_ints(got[i : i + 1])[0] == evaluate(values, pow(w, i, R)), f"X[{i}]"
    d._scratch_buffer().fill(POISON)
    d.intt(y)
    assert bool((y == x_dev).all()), "intt(ntt(x)) != x"
    d.coset_ntt(y)
    d.coset_intt(y)
    assert bool((y == x_dev).all()), "coset_intt(coset_ntt(x)) != x"

    a = cupy.asarray(random_reduced(rng, n))
    b = cupy.asarray(random_reduced(rng, n))
    c = poisoned(n)
    kernels.launch_elementwise("fr_mul_kernel", c, a, b)
    out = poisoned(n)
    d.compute_h(a, b, c, out=out)
    h = cupy.asnumpy(out)
    assert not (h == POISON).all(axis=1).any(), "unwritten h coefficients"
    assert (h[n - 1] == 0).all(), "h[n-1] != 0 although a·b = c on H"
    assert bool(field.is_reduced(h).all())
    assert (h != 0).any()


# ---------------------------------------------------------------- the FP64 and integer products

FP64 = ("FR_MUL_FP64",)  # the NTT's and fr_vector's default; named so that the test says so
INTEGER = ("FR_MUL_INTEGER",)  # the Karatsuba product, the MSM files' default


def _limb_edges() -> list[int]:
    """Both sides of each 52-bit limb boundary of x and of 16 x (kernels/fr_fp64.cuh)."""
    near = {2**e + d for e in [*range(52, 256, 52), *range(48, 256, 52)] for d in (-1, 0, 1)}
    return sorted({*EDGES, *(v % R for v in near)})


@pytest.mark.parametrize("defines", [(), FP64, INTEGER], ids=["default", "fp64", "integer"])
def test_products_match_python_ints(rng, defines):
    edges = _limb_edges()
    pairs = [(x, y) for x in edges for y in edges]
    pairs += [(int(v) % R, int(w) % R) for v, w in
              zip(to_ints(random_reduced(rng, 4000)), to_ints(random_reduced(rng, 4000)), strict=True)]
    a, b = ([p[k] for p in pairs] for k in (0, 1))
    out = poisoned(len(pairs))
    with kernels.built_with(*defines):
        kernels.launch_elementwise("fr_mul_kernel", out, cupy.asarray(to_limbs(a)),
                                   cupy.asarray(to_limbs(b)))
    got = to_ints(cupy.asnumpy(out))
    bad = [i for i, (x, y) in enumerate(pairs) if got[i] != x * y * R_INV % R]
    assert not bad, f"{len(bad)} wrong, first a={a[bad[0]]:#x} b={b[bad[0]]:#x}"


@pytest.mark.parametrize("log2", [1, 6, 11, 16, 20])
def test_integer_product_build_gives_the_default_transforms_and_h(log2, rng):
    """Bit for bit: the four transforms and compute_h of the FR_MUL_INTEGER build against the
    default (FP64) build on the same inputs, every output poisoned first."""
    n = 1 << log2
    x = random_inputs(rng, n)
    abc = [random_inputs(rng, n) for _ in range(3)]
    names = ("ntt", "intt", "coset_ntt", "coset_intt", "compute_h")
    results = {}
    for defines in ((), INTEGER):
        with kernels.built_with(*defines):
            d = domain(log2)
            got = []
            for name in names[:4]:
                y = cupy.asarray(x)
                getattr(d, name)(y)
                got.append(cupy.asnumpy(y))
            out = poisoned(n)
            d.compute_h(*(cupy.asarray(v) for v in abc), out=out)
            got.append(cupy.asnumpy(out))
        results[defines] = got
    for name, want, got in zip(names, results[INTEGER], results[()], strict=True):
        assert not (want == POISON).all(axis=1).any(), f"{name}: unwritten outputs"
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_compute_h_on_a_stream_records_stage_events(rng):
    log2 = 12
    n = 1 << log2
    stream = cupy.cuda.Stream(non_blocking=True)
    d = GpuDomain(log2, stream=stream)
    a, b, c = (random_inputs(rng, n) for _ in range(3))
    with stream:
        a_dev, b_dev, c_dev = (cupy.asarray(v) for v in (a, b, c))
        out = poisoned(n)
    events: dict = {}
    d.compute_h(a_dev, b_dev, c_dev, out=out, events=events)
    times = durations_ms(events)
    stream.synchronize()
    assert set(times) == set(STAGES) and all(t > 0 for t in times.values())
    np.testing.assert_array_equal(cupy.asnumpy(out), cpu.compute_h(a, b, c, cpu.Domain(log2)))


def test_bad_arguments_are_refused():
    d = GpuDomain(4)
    with pytest.raises(ValueError, match="shape"):
        d.ntt(cupy.zeros((8, 4), dtype=cupy.uint64))
    with pytest.raises(ValueError, match="uint64"):
        d.ntt(cupy.zeros((16, 4), dtype=cupy.int64))
    a = cupy.zeros((16, 4), dtype=cupy.uint64)
    with pytest.raises(ValueError, match="out must not be a or c"):
        d.compute_h(a, a.copy(), a.copy(), out=a)
    c = a.copy()
    with pytest.raises(ValueError, match="out must not be a or c"):
        d.compute_h(a.copy(), a.copy(), c, out=c)
    with pytest.raises(ValueError, match="log2"):
        GpuDomain(0)
