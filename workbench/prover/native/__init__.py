"""The compiled host code of synthesis and witness preparation (synthesis.c), through ctypes.

The library is built on first use with the system C compiler, for this machine's CPU, into a
cache named after the source's hash, so an edit rebuilds it and concurrent processes share one
build. ctypes releases the interpreter lock during each call, so synthesis threads run the
compiled loops truly in parallel.

Without a compiler (or with WORKBENCH_NATIVE=0) `library()` returns None and callers use the
numpy code, which computes the same bytes. WORKBENCH_NATIVE_LIB names a library built
elsewhere, for machines without a compiler.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

__all__ = ["NativeUnavailable", "library", "status"]

SOURCE = Path(__file__).with_name("synthesis.c")
FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=c11")

_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None
_why_not: str | None = None


class NativeUnavailable(RuntimeError):
    """The compiled code was asked for explicitly and could not be built or loaded."""


def _cache_dir() -> Path:
    root = os.environ.get("WORKBENCH_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return Path(root or Path.home() / ".cache") / "workbench"


def _build() -> Path:
    explicit = os.environ.get("WORKBENCH_NATIVE_LIB")
    if explicit:
        if not Path(explicit).is_file():
            raise NativeUnavailable(f"WORKBENCH_NATIVE_LIB={explicit} is not a file")
        return Path(explicit)
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        raise NativeUnavailable("no C compiler (cc or gcc) on PATH")
    source = SOURCE.read_bytes()
    # -march=native: a build is only good for this kind of CPU (a cache in a shared home
    # directory must not hand it to an older one).
    key = source + " ".join(FLAGS).encode() + compiler.encode() + _cpu_fingerprint()
    digest = hashlib.sha256(key).hexdigest()[:16]
    target = _cache_dir() / f"synthesis-{digest}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed: processes starting together never load half a file.
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([compiler, *FLAGS, "-o", tmp, str(SOURCE)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise NativeUnavailable(f"{compiler} failed on {SOURCE.name}: {done.stderr.strip()[:500]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _cpu_fingerprint() -> bytes:
    """The first processor's model and feature flags, or the machine name where /proc has none."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.machine().encode()
    first = text.split("\n\n", 1)[0]
    wanted = [line for line in first.splitlines() if line.split(":")[0].strip() in ("model name", "flags")]
    return "\n".join(wanted).encode() or platform.machine().encode()


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
