"""C libraries built on first use with the system compiler and cached by content.

One place for it: the synthesis code (prover/native) and the recording shim (attach/) are
both built here, into `$WORKBENCH_CACHE` (else `$XDG_CACHE_HOME/workbench`, else
`~/.cache/workbench`), under a name made from the sources, the flags, the compiler and, for
code built for this CPU, the CPU's model and features. An edit rebuilds; processes starting
together share one build (built beside the target and renamed: none loads half a file).

Contract: `build(name, sources, flags, ...) -> Path` or `BuildError` naming what failed.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["BuildError", "build", "cache_dir", "compiler"]


class BuildError(RuntimeError):
    """No compiler, or the compiler refused the sources (the message says which and why)."""


def cache_dir() -> Path:
    root = os.environ.get("WORKBENCH_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return Path(root or Path.home() / ".cache") / "workbench"


def compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def build(name: str, sources: Sequence[Path], flags: Sequence[str], *, depends: Sequence[Path] = (),
          libraries: Sequence[str] = (), native_cpu: bool = False, timeout_s: float = 120) -> Path:
    """The shared library `name` built from `sources` (and headers `depends` that go into its
    key), cached; `libraries` are linker arguments placed after the sources."""
    cc = compiler()
    if not cc:
        raise BuildError("no C compiler (cc or gcc) on PATH")
    key = b"".join(p.read_bytes() for p in (*sources, *depends))
    key += " ".join([*flags, "|", *libraries]).encode() + cc.encode()
    if native_cpu:  # a build for this CPU must not be handed to an older one sharing the cache
        key += _cpu_fingerprint()
    digest = hashlib.sha256(key).hexdigest()[:16]
    target = cache_dir() / f"{name}-{digest}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([cc, *flags, "-o", tmp, *map(str, sources), *libraries],
                              capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            names = ", ".join(p.name for p in sources)
            raise BuildError(f"{cc} failed on {names}: {done.stderr.strip()[:500]}")
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
