"""The compiled host code of synthesis and witness preparation (synthesis.c), through ctypes.

The library is built on first use with the system C compiler, for this machine's CPU, and
cached (workbench/compiled.py: an edit rebuilds it, concurrent processes share one build).
ctypes releases the interpreter lock during each call, so synthesis threads run the compiled
loops truly in parallel.

Without a compiler (or with WORKBENCH_NATIVE=0) `library()` returns None and callers use the
numpy code, which computes the same bytes. WORKBENCH_NATIVE_LIB names a library built
elsewhere, for machines without a compiler.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from pathlib import Path

from workbench import compiled

__all__ = ["NativeUnavailable", "library", "status"]

SOURCE = Path(__file__).with_name("synthesis.c")
FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=c11")

_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None
_why_not: str | None = None


class NativeUnavailable(RuntimeError):
    """The compiled code was asked for explicitly and could not be built or loaded."""


def _build() -> Path:
    explicit = os.environ.get("WORKBENCH_NATIVE_LIB")
    if explicit:
        if not Path(explicit).is_file():
            raise NativeUnavailable(f"WORKBENCH_NATIVE_LIB={explicit} is not a file")
        return Path(explicit)
    try:
        # -march=native: a build is only good for this kind of CPU.
        return compiled.build("synthesis", [SOURCE], FLAGS, native_cpu=True)
    except compiled.BuildError as err:
        raise NativeUnavailable(str(err)) from None


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    u64, ptr = ctypes.c_uint64, ctypes.c_void_p
    lib.wb_synthesize.argtypes = [u64, u64, u64, u64, u64, ptr, ptr, ctypes.c_int, ptr, u64, u64,
                                  ptr, ptr, ptr, ptr, ptr]
    lib.wb_synthesize.restype = ctypes.c_int
    lib.wb_classify.argtypes = [ptr, u64, ptr, ptr, ptr]
    lib.wb_classify.restype = None
    lib.wb_tail.argtypes = [ptr, u64, ptr, ctypes.c_int, ptr, ptr]
    lib.wb_tail.restype = u64
    lib.wb_stream.argtypes = [ptr, ptr, u64]
    lib.wb_stream.restype = u64
    return lib


def library() -> ctypes.CDLL | None:
    """The loaded library, building it the first time; None when it cannot be had (see
    `status()` for why) or WORKBENCH_NATIVE=0."""
    global _loaded, _why_not
    if os.environ.get("WORKBENCH_NATIVE", "1") == "0":
        return None
    with _lock:
        if _loaded is None and _why_not is None:
            try:
                _loaded = _declare(ctypes.CDLL(str(_build())))
            except (NativeUnavailable, OSError, subprocess.SubprocessError) as exc:
                _why_not = str(exc)
        return _loaded


def status() -> str:
    """One line for run metadata and notices: which synthesis code runs, and why."""
    if os.environ.get("WORKBENCH_NATIVE", "1") == "0":
        return "numpy (WORKBENCH_NATIVE=0)"
    if library() is not None:
        return "native"
    return f"numpy (compiled code unavailable: {_why_not})"
