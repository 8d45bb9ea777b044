"""The Groth16 key of a circuit, cached in memory and on disk.

A file is named by what picks the circuit (size, terms, share of booleans, seed) and holds a
fingerprint of the constraint matrices themselves, so a key made for a circuit the code no
longer builds is noticed (said in one line, then made anew) rather than used: its proofs
would fail for a reason no MSM is to blame for. An unreadable file is said in one line too.
Failing to write the file is not an error: the cache is only an optimisation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
from py_arkworks_bls12381 import G2Point

from workbench.prover import srs as srs_module
from workbench.prover.circuit import R1cs, SyntheticCircuit
from workbench.prover.curve import G1Points, point_from_bytes, point_to_bytes
from workbench.prover.srs import Srs, Trapdoor
from workbench.prover.trusted_setup import setup

__all__ = ["FORMAT_VERSION", "cache_path", "clear_memory_cache", "fingerprint", "load_or_setup"]

FORMAT_VERSION = 2
"""Bump whenever the setup, the fingerprint or the file layout changes: older files are then stale."""

Notice = Callable[[str], None]
Setup = Callable[[SyntheticCircuit], Srs]

_memory: dict[str, Srs] = {}
_locks: dict[str, threading.Lock] = {}
_guard = threading.Lock()


def cache_path(circuit: SyntheticCircuit, cache_dir: str | Path | None = None) -> Path:
    directory = Path(cache_dir) if cache_dir is not None else srs_module.default_cache_dir()
    return directory / (f"groth16-k{circuit.log2}-t{circuit.terms}-b{circuit.bool_fraction:g}"
                        f"-s{circuit.seed}.npz")


def clear_memory_cache() -> None:
    with _guard:
        _memory.clear()


def fingerprint(system: R1cs) -> str:
    """A digest of the matrices (and of the public inputs' count): equal circuits, equal keys."""
    digest = hashlib.sha256(f"{FORMAT_VERSION} {system.n} {system.m} {system.public}".encode())
    for matrix in (system.a, system.b, system.c):
        digest.update(matrix.rows.tobytes())
        digest.update(matrix.cols.tobytes())
        digest.update(matrix.forms.tobytes())
    return digest.hexdigest()


def load_or_setup(
    circuit: SyntheticCircuit, cache_dir: str | Path | None = None, notice: Notice | None = None,
    make: Setup | None = None,
) -> Srs:
    """The circuit's key from memory, else from its file, else from the setup (then stored):
    `make(circuit)`, the CPU's `trusted_setup.setup` by default (the GPU backend passes its
    own, which gives the same bytes). `notice(line)` hears why a file there was not used."""
    path = cache_path(circuit, cache_dir)
    say = notice or (lambda line: None)
    # In one process the name's parameters fix the circuit: the fingerprint (0.3 s at 2^20 on
    # the 2-core box, a pass of SHA-256 over the matrices) is only needed against files.
    key = str(path)
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        hit = _memory.get(key)
        if hit is not None:
            return hit
        stamp = fingerprint(circuit.r1cs())
        srs, why = _read(path, stamp, circuit)
        if srs is None:
            if why:
                say(f"proving key cache {path} is {why}; made a new key")
            srs = (make or setup)(circuit)
            _write(path, srs, stamp)
        _memory[key] = srs
        return srs


def _read(path: Path, stamp: str, circuit: SyntheticCircuit) -> tuple[Srs | None, str]:
    """The key, or None and why not ("" when there is no file)."""
    if not path.is_file():
        return None, ""
    try:
        with path.open("rb") as f, np.load(f, allow_pickle=False) as z:
            version = int(z["groth16_version"])
            if version != FORMAT_VERSION:
                return None, f"stale (format {version}, this code writes {FORMAT_VERSION})"
            if str(z["fingerprint"]) != stamp:
                return None, "stale (made for another circuit than the one this code builds)"
            arrays = {name: np.array(z[name]) for name in z.files}
        params = (circuit.log2, circuit.m, circuit.seed)
        base = srs_module.from_arrays(params, arrays)
        if base is None:
            return None, "corrupt (queries of the wrong size)"
        gamma = point_from_bytes(arrays["gamma_g2"].tobytes())
        if not isinstance(gamma, G2Point):
            return None, "corrupt (gamma is not a G2 point)"
        ic = G1Points(arrays["ic"])
        if len(ic) != circuit.public + 1:
            return None, f"corrupt ({len(ic)} IC points for {circuit.public} public inputs)"
        return dataclasses.replace(base, gamma_g2=gamma, ic=ic,
                                   trapdoor=Trapdoor.from_array(arrays["trapdoor"])), ""
    except Exception as err:  # zip, npy-header, shape and point errors: all mean "not usable"
        return None, f"corrupt ({type(err).__name__}: {err})"


def _write(path: Path, srs: Srs, stamp: str) -> None:
    assert srs.ic is not None and srs.gamma_g2 is not None and srs.trapdoor is not None
    arrays = srs_module.to_arrays(srs)
    arrays.update(
        groth16_version=np.array(FORMAT_VERSION, np.int64), fingerprint=np.array(stamp),
        gamma_g2=np.frombuffer(point_to_bytes(srs.gamma_g2), np.uint8), ic=srs.ic.xy,
        trapdoor=srs.trapdoor.to_array(),
    )
    srs_module.write_arrays(path, arrays)
