"""The trusted setup against plain integers and the library's own scalar multiplication, and
the key's disk cache."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from workbench.prover import field, key_cache, ntt, trusted_setup
from workbench.prover.circuit import PUBLIC, SyntheticCircuit
from workbench.prover.curve import G1Points, G2Points
from workbench.trace import output

R = field.MODULUS


@pytest.fixture(autouse=True)
def _fresh_memory_cache():
    key_cache.clear_memory_cache()
    yield
    key_cache.clear_memory_cache()


def test_the_comb_gives_the_librarys_products():
    rng = np.random.default_rng(4)
    scalars = [0, 1, 2, 255, 256, R - 1, R - 2]
    scalars += [int.from_bytes(rng.bytes(32), "little") % R for _ in range(9)]
    g1 = G1Points.from_objects([G1Point() * Scalar(k) for k in scalars])
    g2 = G2Points.from_objects([G2Point() * Scalar(k) for k in scalars])
    assert trusted_setup.fixed_base_g1(scalars) == g1
    assert trusted_setup.fixed_base_g2(scalars) == g2
    assert not trusted_setup.fixed_base_g1([0]).xy.any()  # the identity is all-zero bytes


def test_lagrange_basis_at_tau_by_its_definition():
    log2, tau = 3, 123456789
    n = 1 << log2
    omega = ntt.Domain(log2).omega
    points = [pow(omega, i, R) for i in range(n)]
    want = []
    for i, xi in enumerate(points):
        num = den = 1
        for k, xk in enumerate(points):
            if k != i:
                num, den = num * (tau - xk) % R, den * (xi - xk) % R
        want.append(num * pow(den, -1, R) % R)
    assert trusted_setup.lagrange_at(tau, log2) == want


def _quotient_at(h: list[int], tau: int) -> int:
    return sum(c * pow(tau, i, R) for i, c in enumerate(h)) % R


def test_qap_at_tau_agrees_with_the_ntt_quotient():
    """u, v, w at τ (the setup's route: Lagrange sums over the matrices) against h from the
    prover's NTTs (a, b, c on the domain): A(τ)·B(τ) − C(τ) = h(τ)·Z(τ) for the witness."""
    circuit = SyntheticCircuit(6, 0.5, 3, seed=9)
    vectors = {k: np.empty((circuit.n, 4), np.uint64) for k in ("witness", "a", "b", "c")}
    target = SimpleNamespace(**vectors)
    circuit.synthesize(2, target)
    t = trusted_setup.trapdoor(circuit.seed, circuit.log2)
    u, v, w = trusted_setup.qap_at(circuit.r1cs(), t.tau, circuit.log2)
    z = field.from_mont(target.witness)
    a, b, c = (sum(x * y for x, y in zip(z, col, strict=True)) % R for col in (u, v, w))
    h = field.from_mont(ntt.compute_h(target.a, target.b, target.c, ntt.Domain(circuit.log2)))
    assert h[-1] == 0
    assert (a * b - c) % R == _quotient_at(h, t.tau) * (pow(t.tau, circuit.n, R) - 1) % R
    z[5] = (z[5] + 1) % R  # another witness: the identity must fail, or the test proves nothing
    a, b, c = (sum(x * y for x, y in zip(z, col, strict=True)) % R for col in (u, v, w))
    assert (a * b - c) % R != _quotient_at(h, t.tau) * (pow(t.tau, circuit.n, R) - 1) % R


def test_the_key_is_the_trapdoors():
    circuit = SyntheticCircuit(5, 0.5, 2, seed=3)
    key = trusted_setup.setup(circuit)
    t = key.trapdoor
    assert t is not None and t == trusted_setup.trapdoor(3, 5)
    u, v, w = trusted_setup.qap_at(circuit.r1cs(), t.tau, circuit.log2)
    g1, g2 = G1Point(), G2Point()
    delta_inv, gamma_inv = pow(t.delta, -1, R), pow(t.gamma, -1, R)
    for j in (0, 1, PUBLIC + 1, 17, circuit.m - 1):
        assert key.a.objects()[j] == g1 * Scalar(u[j])
        assert key.b_g1.objects()[j] == g1 * Scalar(v[j])
        assert key.b_g2.objects()[j] == g2 * Scalar(v[j])
    for j in range(PUBLIC + 1):
        assert not key.l.xy[j].any()  # public variables have no L point
        assert key.ic is not None
        assert key.ic.objects()[j] == g1 * Scalar((t.beta * u[j] + t.alpha * v[j] + w[j]) * gamma_inv % R)
    j = circuit.m - 3
    assert key.l.objects()[j] == g1 * Scalar((t.beta * u[j] + t.alpha * v[j] + w[j]) * delta_inv % R)
    z_tau = pow(t.tau, circuit.n, R) - 1
    assert key.h.objects()[7] == g1 * Scalar(pow(t.tau, 7, R) * z_tau * delta_inv % R)
    assert (key.alpha_g1, key.beta_g2, key.delta_g1) == (g1 * Scalar(t.alpha), g2 * Scalar(t.beta),
                                                         g1 * Scalar(t.delta))
    assert key.gamma_g2 == g2 * Scalar(t.gamma) and len(key.ic) == PUBLIC + 1
    assert trusted_setup.trapdoor(4, 5) != t


def test_the_comb_tables_encoding_is_its_points():
    """comb_table_xy (the GPU kernels' table) encodes the CPU comb's own points."""
    rng = np.random.default_rng()
    for group, kind, width in (("g1", G1Point, 96), ("g2", G2Point, 192)):
        xy = trusted_setup.comb_table_xy(group)
        assert xy.shape == (32 * 256, width) and not xy.flags.writeable
        for w, d in [(0, 0), (0, 1), (31, 255), *(tuple(rng.integers((32, 256))) for _ in range(4))]:
            want = kind() * Scalar(int(d) * pow(2, 8 * int(w), R) % R)
            assert xy[256 * w + d].tobytes() == bytes(want.to_xy_bytes_le()), (group, w, d)


def test_a_setup_can_be_plugged_into_the_cache(tmp_path: Path):
    """load_or_setup's make(circuit) (the GPU backend's setup) makes the key that is stored."""
    circuit = SyntheticCircuit(3, 0.5, 1, seed=1)
    made = []

    def make(c: SyntheticCircuit):
        made.append(c.log2)
        return trusted_setup.setup(c)

    key = key_cache.load_or_setup(circuit, tmp_path, make=make)
    key_cache.clear_memory_cache()
    assert made == [3] and key_cache.load_or_setup(circuit, tmp_path, make=make) == key and made == [3]


def test_the_cache_reads_its_file_and_says_why_it_cannot(tmp_path: Path, monkeypatch):
    circuit = SyntheticCircuit(4, 0.9, 2, seed=5)
    calls, lines = [], []
    original = trusted_setup.setup

    def counting(c, **kw):
        calls.append(c.log2)
        return original(c, **kw)

    monkeypatch.setattr(key_cache, "setup", counting)
    first = key_cache.load_or_setup(circuit, tmp_path, lines.append)
    path = key_cache.cache_path(circuit, tmp_path)
    assert path.is_file() and calls == [4] and lines == []
    key_cache.clear_memory_cache()
    assert key_cache.load_or_setup(circuit, tmp_path, lines.append) == first
    assert calls == [4] and lines == []

    # Another circuit under the same name (here: the same file copied to another seed's name).
    other = SyntheticCircuit(4, 0.9, 2, seed=6)
    key_cache.cache_path(other, tmp_path).write_bytes(path.read_bytes())
    key_cache.load_or_setup(other, tmp_path, lines.append)
    assert calls == [4, 4]
    assert lines == [f"proving key cache {key_cache.cache_path(other, tmp_path)} is stale (made for "
                     "another circuit than the one this code builds); made a new key"]

    key_cache.clear_memory_cache()
    path.write_bytes(path.read_bytes()[:300])
    lines.clear()
    assert key_cache.load_or_setup(circuit, tmp_path, lines.append) == first
    assert len(lines) == 1 and lines[0].startswith(f"proving key cache {path} is corrupt (")
    key_cache.clear_memory_cache()
    lines.clear()
    assert key_cache.load_or_setup(circuit, tmp_path, lines.append) == first
    assert lines == [] and calls == [4, 4, 4]  # the repaired file is read


def test_an_old_format_is_stale(tmp_path: Path, monkeypatch):
    circuit = SyntheticCircuit(3, 0.9, 2, seed=5)
    key_cache.load_or_setup(circuit, tmp_path)
    key_cache.clear_memory_cache()
    monkeypatch.setattr(key_cache, "FORMAT_VERSION", key_cache.FORMAT_VERSION + 1)
    lines: list[str] = []
    key_cache.load_or_setup(circuit, tmp_path, lines.append)
    version = key_cache.FORMAT_VERSION
    assert lines and f"is stale (format {version - 1}, this code writes {version})" in lines[0]


def test_a_pool_of_processes_gives_the_same_points(monkeypatch):
    scalars = [(k * 0x9E3779B97F4A7C15) ** 3 % R for k in range(40)]
    serial = trusted_setup.fixed_base_g1(scalars)
    monkeypatch.setattr(trusted_setup, "PARALLEL_FROM", 8)
    assert trusted_setup.fixed_base_g1(scalars) == serial


def test_a_writer_killed_mid_save_leaves_nothing_the_next_one_keeps(tmp_path: Path):
    """A process SIGKILLed while it writes the key's cache file leaves a part file beside it;
    the next writer removes it, and leaves alone one whose writer still runs (this process)."""
    circuit = SyntheticCircuit(3, 0.5, 1, seed=1)
    path = key_cache.cache_path(circuit, tmp_path)
    killed = textwrap.dedent(f"""
        import os, signal
        import numpy as np
        from pathlib import Path
        from workbench.prover import srs

        def savez(handle, **arrays):
            handle.write(b"part of a key")
            handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        np.savez = savez
        srs.write_arrays(Path({str(path)!r}), {{"a": np.zeros(3)}})
    """)
    child = subprocess.run([sys.executable, "-c", killed], capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr
    left = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1 and left[0].read_bytes() == b"part of a key" and not path.exists()
    ours = path.parent / (output.temporary_prefix(path) + "x.tmp")
    ours.write_bytes(b"being written")
    key = key_cache.load_or_setup(circuit, tmp_path)
    assert path.exists() and not left[0].exists() and ours.exists()
    key_cache.clear_memory_cache()
    assert key_cache.load_or_setup(circuit, tmp_path) == key
