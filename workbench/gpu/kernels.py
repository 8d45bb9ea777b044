"""The CUDA sources in the repository's kernels/ folder, compiled once per process.

Each .cu file becomes one CuPy RawModule built by NVRTC for the current device's
architecture (sm_90 on the H200). CuPy keys its on-disk binary cache by the source text, so
the local headers are inlined here rather than passed as include paths: an edit to fr.cuh
then changes the key instead of loading a stale binary.

Build options of the kernels (preprocessor defines such as fr.cuh's FR_MUL_FP64) are chosen
with built_with(...): inside it, every module and kernel comes from that build, cached apart
from the default one. The environment variable WORKBENCH_KERNEL_DEFINES (comma-separated,
"NAME" or "NAME=VALUE") sets the build used outside any built_with, for a whole test or
benchmark run.

A module built ahead of time for exactly its source, defines and architecture
(benchmarks/prebuild_kernels.py, workbench/gpu/prebuilt.py) is loaded from the folder
WORKBENCH_KERNEL_CUBINS names instead of compiled: a GPU machine that starts bare then skips
minutes of NVRTC.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.gpu import prebuilt

KERNELS_DIR = Path(__file__).resolve().parents[2] / "kernels"
GPU_EXTRA_HINT = "pip install 'workbench[gpu]'"

_INCLUDE = re.compile(r'^#include "([^"]+)"\s*$', re.MULTILINE)
_lock = threading.Lock()
_modules: dict[tuple[str, int, tuple[str, ...]], Any] = {}
_functions: dict[tuple[str, str, int, tuple[str, ...]], Any] = {}
loaded: list[str] = []  # binaries loaded from prebuilt's folder instead of compiled, in order
DEFINES_ENV = "WORKBENCH_KERNEL_DEFINES"
_DEFINE = re.compile(r"[A-Z_][A-Z0-9_]*(=\w+)?")  # a module name's (split_name) too


def parse_defines(text: str, source: str = DEFINES_ENV) -> tuple[str, ...]:
    """ "A,B=1" -> ("A", "B=1"); a malformed entry is refused with a message naming source."""
    out = tuple(d.strip() for d in text.split(",") if d.strip())
    for d in out:
        if not _DEFINE.fullmatch(d):
            raise ValueError(f"{source}: {d!r} is not a preprocessor define (NAME or NAME=VALUE)")
    return out


# the build that module() and function() hand out now
_defines: tuple[str, ...] = parse_defines(os.environ.get(DEFINES_ENV, ""))


def require_cupy() -> Any:
    """The cupy module, or an error that says how to get it."""
    try:
        import cupy
    except ImportError as exc:  # cupy absent or its CUDA libraries missing
        raise ModuleNotFoundError(
            f"the GPU backend needs CuPy ({exc}); install the gpu extra: {GPU_EXTRA_HINT}"
        ) from exc
    return cupy


def expand_includes(text: str) -> str:
    """CUDA source with its #include "kernels/..." lines replaced by the headers' text, each
    header once (runtime compilation sees no include path)."""
    seen: set[str] = set()

    def expand(text: str) -> str:
        def include(match: re.Match[str]) -> str:
            header = match.group(1)
            if header in seen:
                return ""
            seen.add(header)
            return expand((KERNELS_DIR / header).read_text())
        return _INCLUDE.sub(include, text)

    return expand(text)


def source(name: str) -> str:
    """kernels/<name>.cu with its local #include lines replaced by the headers' text."""
    path = KERNELS_DIR / f"{name}.cu"
    if not path.exists():
        raise FileNotFoundError(f"kernel source {path} not found")
    return expand_includes(path.read_text())


@contextlib.contextmanager
def built_with(*defines: str) -> Iterator[None]:
    """Within the block, module() and function() (and so GpuDomain, built inside it) use the
    kernels compiled with these defines ("NAME" or "NAME=VALUE"). Process-wide, not per
    thread: for benchmarks and tests that compare builds."""
    global _defines
    saved = _defines
    _defines = parse_defines(",".join(defines), "built_with")
    try:
        yield
    finally:
        _defines = saved


def split_name(name: str) -> tuple[str, tuple[str, ...]]:
    """A module name's source file and preprocessor defines: "affine_round+BA_PRODUCTS_CALLED"
    is kernels/affine_round.cu built with -DBA_PRODUCTS_CALLED (a kernel build option that a
    variant switches on; see affine_rounds.round_module)."""
    file, *defines = name.split("+")
    bad = [d for d in defines if not _DEFINE.fullmatch(d)]
    if not file or bad:
        raise ValueError(f"bad kernel module name {name!r}")
    return file, tuple(defines)


def _compile(cupy: Any, code: str, probe: str, defines: tuple[str, ...] = (), file: str = "") -> Any:
    cc = cupy.cuda.Device().compute_capability
    built = prebuilt.find(file, code, defines, str(cc)) if file else None
    if built is not None:
        try:
            module = cupy.RawModule(path=str(built))
            module.get_function(probe)
            loaded.append(built.name)
            return module
        except Exception:  # a binary this driver cannot load (older driver, other GPU): compile
            pass
    base = (prebuilt.STD, *(f"-D{d}" for d in defines))
    try:
        module = cupy.RawModule(code=code, options=(*base, f"-arch=sm_{cc}"))
        module.get_function(probe)  # compiles now, so a bad option shows up here
        return module
    except cupy.cuda.compiler.CompileException as exc:
        # CuPy appends its own -arch for the current device; some NVRTC versions refuse a
        # second one. The target is the same either way.
        if "arch" not in str(exc):
            raise
    module = cupy.RawModule(code=code, options=base)
    module.get_function(probe)
    return module


# A kernel's name, also where a macro pastes a group's suffix onto it (name##suffix).
_KERNEL_NAME = re.compile(
    r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)(?:##\w+)?\s*\(')


def module(name: str) -> Any:
    """The compiled RawModule of kernels/<name>.cu for the current device, with the defines
    of the build in force (built_with) and those the name carries (split_name)."""
    cupy = require_cupy()
    key = (name, cupy.cuda.Device().id, _defines)
    with _lock:
        mod = _modules.get(key)
        if mod is None:
            file, defines = split_name(name)
            code = source(file)
            first = _KERNEL_NAME.search(code)
            if first is None:
                raise ValueError(f"kernels/{file}.cu defines no extern \"C\" kernel")
            mod = _modules[key] = _compile(cupy, code, first.group(1), (*_defines, *defines), file)
        return mod


def function(module_name: str, kernel: str) -> Any:
    """One kernel of a module; the same object every time, so attributes set on it stay."""
    cupy = require_cupy()
    key = (module_name, kernel, cupy.cuda.Device().id, _defines)
    fn = _functions.get(key)
    if fn is None:
        mod = module(module_name)
        with _lock:
            fn = _functions.get(key)
            if fn is None:
                fn = _functions[key] = mod.get_function(kernel)
    return fn


def launch_elementwise(kernel: str, out: Any, *inputs: Any, threads: int = 256) -> None:
    """Run one of fr_vector.cu's element-wise kernels over every element of out, on the
    current stream. Operands are C-contiguous (n, 4) uint64 device arrays (or, for
    fr_scale_kernel, a (1, 4) constant)."""
    import numpy as np

    n = out.shape[0]
    blocks = max(1, min(-(-n // threads), 1 << 20))
    function("fr_vector", kernel)((blocks,), (threads,), (out, *inputs, np.uint64(n)))
