"""Kernel binaries built ahead of time, so that a fresh GPU machine loads them instead of
compiling (NVRTC takes minutes for msm.cu and batch_add.cu on a machine that starts bare).

`benchmarks/prebuild_kernels.py` compiles each module with nvcc into a folder; pointing
WORKBENCH_KERNEL_CUBINS at that folder makes workbench.gpu.kernels load a module's binary when
one was built from exactly its source text, defines and architecture (the file's name carries
a digest of the three), and compile it as before otherwise. Pure: no CUDA needed here.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CUBINS_ENV = "WORKBENCH_KERNEL_CUBINS"
STD = "-std=c++17"


def digest(code: str, defines: tuple[str, ...], arch: str) -> str:
    """What a binary was built from: the expanded source, the defines in order, sm_<arch>."""
    h = hashlib.sha256()
    for part in (code, STD, *(f"-D{d}" for d in defines), f"sm_{arch}"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def file_name(file: str, code: str, defines: tuple[str, ...], arch: str) -> str:
    return f"{file}-sm{arch}-{digest(code, defines, arch)}.cubin"


def folder() -> Path | None:
    where = os.environ.get(CUBINS_ENV, "").strip()
    return Path(where) if where else None


def find(file: str, code: str, defines: tuple[str, ...], arch: str) -> Path | None:
    """The binary built ahead for this exact build, if the folder holds one."""
    where = folder()
    if where is None:
        return None
    path = where / file_name(file, code, defines, arch)
    return path if path.is_file() else None
