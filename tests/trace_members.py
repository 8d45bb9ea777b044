"""A .wbtrace file's members as bytes, and an array as the bytes of an .npy member: what the
crafted-file attacks (benchmarks/attack_cases.py) and the mutated-file tests both edit."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()
