"""Synthetic SRS generation and its on-disk / in-process cache."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point

from workbench.prover import srs as srs_mod
from workbench.prover.curve import point_from_bytes
from workbench.prover.srs import (
    FORMAT_VERSION,
    Srs,
    cache_path,
    clear_memory_cache,
    default_cache_dir,
    load_or_generate,
)


@pytest.fixture(autouse=True)
def _fresh_memory_cache() -> Iterator[None]:
    clear_memory_cache()
    yield
    clear_memory_cache()


@pytest.fixture
def gen_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    calls: list[tuple[int, int, int]] = []
    original = Srs.generate

    def counting(log2_size: int, m: int, seed: int) -> Srs:
        calls.append((log2_size, m, seed))
        return original(log2_size, m, seed)

    monkeypatch.setattr(Srs, "generate", counting)
    return calls


def same_srs(x: Srs, y: Srs) -> bool:
    return x == y


def test_shapes_and_validity() -> None:
    s = Srs.generate(4, 21, seed=3)
    assert (s.n, s.m) == (16, 21)
    assert s.h.xy.shape == (16, 96)
    for q in (s.l, s.a, s.b_g1):
        assert q.xy.shape == (21, 96)
    assert s.b_g2.xy.shape == (21, 192)
    for query in (s.h, s.l, s.a, s.b_g1, s.b_g2):
        rows = {bytes(r) for r in query.xy}
        assert len(rows) == len(query), "query points must be distinct"
        assert bytes(query.xy.shape[1]) not in rows, "no identity points"
        # Checked parsing verifies curve and subgroup membership.
        for i in (0, len(query) // 2, len(query) - 1):
            point_from_bytes(query.xy[i].tobytes(), check=True)
    all_g1 = {bytes(r) for q in (s.h, s.l, s.a, s.b_g1) for r in q.xy}
    assert len(all_g1) == 16 + 3 * 21, "queries must not share points"
    assert isinstance(s.alpha_g1, G1Point) and isinstance(s.delta_g2, G2Point)
    assert s.alpha_g1 != s.beta_g1 != s.delta_g1
    assert s.nbytes == 16 * 96 + 3 * 21 * 96 + 21 * 192


def test_generation_is_deterministic() -> None:
    a = Srs.generate(3, 5, seed=1)
    assert same_srs(a, Srs.generate(3, 5, seed=1))
    b = Srs.generate(3, 5, seed=2)
    assert a.h != b.h and a.l != b.l and a.b_g2 != b.b_g2
    assert a.alpha_g1 != b.alpha_g1
    # H depends only on the domain and the seed.
    assert Srs.generate(3, 9, seed=1).h == a.h


def test_degenerate_sizes() -> None:
    s = Srs.generate(0, 0, seed=0)
    assert len(s.h) == 1 and len(s.l) == 0 and len(s.b_g2) == 0
    with pytest.raises(ValueError):
        Srs.generate(-1, 4, seed=0)
    with pytest.raises(ValueError):
        Srs.generate(3, -1, seed=0)


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "srs"
    monkeypatch.delenv("WORKBENCH_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "workbench" / "srs"
    name = cache_path(5, 7, 9, tmp_path).name
    assert name == f"srs-v{FORMAT_VERSION}-k5-m7-s9.npz"


def test_second_load_reads_file(tmp_path: Path, gen_calls: list[tuple[int, int, int]]) -> None:
    first = load_or_generate(3, 10, 4, cache_dir=tmp_path)
    assert gen_calls == [(3, 10, 4)]
    path = cache_path(3, 10, 4, tmp_path)
    assert path.is_file()
    assert list(tmp_path.iterdir()) == [path], "no temp files left behind"
    clear_memory_cache()
    second = load_or_generate(3, 10, 4, cache_dir=tmp_path)
    assert gen_calls == [(3, 10, 4)]
    assert second is not first
    assert same_srs(first, second)


def test_memory_cache_skips_the_file(tmp_path: Path, gen_calls: list[tuple[int, int, int]]) -> None:
    first = load_or_generate(3, 10, 4, cache_dir=tmp_path)
    cache_path(3, 10, 4, tmp_path).unlink()
    assert load_or_generate(3, 10, 4, cache_dir=tmp_path) is first
    assert len(gen_calls) == 1


def _regenerates(tmp_path: Path, gen_calls: list[tuple[int, int, int]]) -> None:
    """Load once over a damaged file: must regenerate and repair the file."""
    reference = Srs.generate(3, 10, 4)
    gen_calls.clear()
    got = load_or_generate(3, 10, 4, cache_dir=tmp_path)
    assert gen_calls == [(3, 10, 4)]
    assert same_srs(got, reference)
    clear_memory_cache()
    again = load_or_generate(3, 10, 4, cache_dir=tmp_path)
    assert gen_calls == [(3, 10, 4)], "the repaired file must be readable"
    assert same_srs(again, reference)


def test_version_mismatch_is_regenerated(
    tmp_path: Path, gen_calls: list[tuple[int, int, int]]
) -> None:
    load_or_generate(3, 10, 4, cache_dir=tmp_path)
    clear_memory_cache()
    path = cache_path(3, 10, 4, tmp_path)
    with np.load(path, allow_pickle=False) as z:
        arrays: dict[str, Any] = {k: np.array(z[k]) for k in z.files}
    arrays["version"] = np.array(FORMAT_VERSION + 1, dtype=np.int64)
    with path.open("wb") as f:
        np.savez(f, **arrays)
    _regenerates(tmp_path, gen_calls)
    with np.load(path, allow_pickle=False) as z:
        assert int(z["version"]) == FORMAT_VERSION


def test_truncated_file_is_regenerated(
    tmp_path: Path, gen_calls: list[tuple[int, int, int]]
) -> None:
    load_or_generate(3, 10, 4, cache_dir=tmp_path)
    clear_memory_cache()
    path = cache_path(3, 10, 4, tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _regenerates(tmp_path, gen_calls)


@pytest.mark.parametrize("content", [b"", b"not a zip file at all", b"PK\x03\x04" + bytes(64)])
def test_garbage_file_is_regenerated(
    tmp_path: Path, gen_calls: list[tuple[int, int, int]], content: bytes
) -> None:
    cache_path(3, 10, 4, tmp_path).write_bytes(content)
    _regenerates(tmp_path, gen_calls)


def test_flipped_point_bytes_are_detected(
    tmp_path: Path, gen_calls: list[tuple[int, int, int]]
) -> None:
    load_or_generate(3, 10, 4, cache_dir=tmp_path)
    clear_memory_cache()
    path = cache_path(3, 10, 4, tmp_path)
    # Uncompressed npz: the H array's bytes sit verbatim in the file.
    h_row = bytes(Srs.generate(3, 10, 4).h.xy[2])
    data = bytearray(path.read_bytes())
    pos = data.find(h_row)
    assert pos > 0
    data[pos + 5] ^= 0x40
    path.write_bytes(bytes(data))
    _regenerates(tmp_path, gen_calls)


def test_file_for_other_parameters_is_regenerated(
    tmp_path: Path, gen_calls: list[tuple[int, int, int]]
) -> None:
    load_or_generate(3, 11, 4, cache_dir=tmp_path)
    clear_memory_cache()
    cache_path(3, 11, 4, tmp_path).rename(cache_path(3, 10, 4, tmp_path))
    _regenerates(tmp_path, gen_calls)


def test_concurrent_callers_generate_once(
    tmp_path: Path, gen_calls: list[tuple[int, int, int]]
) -> None:
    barrier = threading.Barrier(5)
    results: list[Srs] = []

    def worker() -> None:
        barrier.wait()
        results.append(load_or_generate(4, 12, 8, cache_dir=tmp_path))

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 5
    assert all(r is results[0] for r in results)
    assert gen_calls == [(4, 12, 8)]


def test_module_has_no_pickle_path(tmp_path: Path) -> None:
    load_or_generate(2, 3, 1, cache_dir=tmp_path)
    with np.load(cache_path(2, 3, 1, tmp_path), allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files)
    assert srs_mod.FORMAT_VERSION == FORMAT_VERSION


def test_a_g1_generator_replaces_the_grid_and_is_cached_under_its_method(tmp_path):
    from workbench.prover import srs as srs_module

    calls = []

    def generator(count, rng):
        calls.append(count)
        return srs_module.G1Points.from_objects(srs_module._grid(srs_module.G1Point(), count, rng))

    srs_module.clear_memory_cache()
    key = srs_module.load_or_generate(3, 5, 2, tmp_path, g1_generator=generator, method="alt")
    assert calls == [8, 5, 5, 5]  # h, l, a, b_g1: G2 stays on the host's grid
    assert cache_path(3, 5, 2, tmp_path, "alt").name.endswith("-alt.npz")
    assert cache_path(3, 5, 2, tmp_path, "alt").exists()
    assert not cache_path(3, 5, 2, tmp_path).exists()
    srs_module.clear_memory_cache()
    again = srs_module.load_or_generate(3, 5, 2, tmp_path, g1_generator=generator, method="alt")
    assert calls == [8, 5, 5, 5] and again.h == key.h


def test_grid_encoded_in_parallel_processes_equals_the_serial_one(monkeypatch):
    from workbench.prover import srs as srs_module

    rng_seed = int(np.random.default_rng().integers(2**32))
    for cls, generator in ((srs_module.G1Points, srs_module.G1Point()),
                           (srs_module.G2Points, srs_module.G2Point())):
        serial = srs_module._grid_points(cls, generator, 50, np.random.default_rng(rng_seed))
        with monkeypatch.context() as patch:
            patch.setattr(srs_module, "PARALLEL_FROM", 10)
            patch.setattr(srs_module.os, "cpu_count", lambda: 2)
            parallel = srs_module._grid_points(cls, generator, 50, np.random.default_rng(rng_seed))
        assert parallel == serial, f"seed {rng_seed}"
