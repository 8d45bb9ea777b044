"""The recording shims, built on first use with the system compiler (workbench/compiled.py).

- `shim.c` (+ `nvtx_injection.c` when the NVTX headers are found): preloaded into the program
  and named as its NVTX injection library.
- `cupti_injection.c` (+ `launches.h`, the launch callbacks and the sampling duty cycle):
  named as the program's CUDA injection library, built only where the CUPTI headers and
  library are found (a CUDA toolkit, or the nvidia-cuda-cupti package).

Headers come from packages, none are vendored: NVTX from the `nvidia-nvtx-cu12` package (the
`dev` extra), a CUDA toolkit's include folder, or WORKBENCH_NVTX_INCLUDE; CUPTI from
CUDA_HOME, /usr/local/cuda*, the nvidia-cuda-cupti package, or WORKBENCH_CUPTI_ROOT. What is
not found is absent from the recording, and `Shims.notes` says why.
"""

from __future__ import annotations

import glob
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from workbench import compiled

HERE = Path(__file__).parent
SHIM, NVTX, CUPTI, RING, LAUNCHES = (HERE / n for n in ("shim.c", "nvtx_injection.c", "cupti_injection.c",
                                                        "ring.h", "launches.h"))
FLAGS = ("-O2", "-fPIC", "-shared", "-std=gnu11", "-fvisibility=hidden", "-Wall", f"-I{HERE}")


@dataclass
class Shims:
    locks: Path  # LD_PRELOAD (and NVTX_INJECTION64_PATH when `nvtx`)
    nvtx: bool
    cupti: Path | None  # CUDA_INJECTION64_PATH
    notes: list[str] = field(default_factory=list)


def _cuda_roots() -> list[Path]:
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    found = [Path(r) for r in roots if r]
    found += [Path(p) for p in ["/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]]
    return [p for p in found if p.is_dir()]


def _package_dirs(name: str) -> list[Path]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


def nvtx_include() -> Path | None:
    """A folder holding nvtx3/nvToolsExt.h, or None."""
    explicit = os.environ.get("WORKBENCH_NVTX_INCLUDE")
    candidates = [Path(explicit)] if explicit else []
    candidates += [d / "include" for d in _package_dirs("nvidia.nvtx")]
    candidates += [r / "include" for r in _cuda_roots()]
    return next((c for c in candidates if (c / "nvtx3" / "nvToolsExt.h").is_file()), None)


def cupti_paths() -> tuple[list[Path], Path] | None:
    """(include folders for cupti.h and cuda.h, the folder of libcupti.so), or None."""
    explicit = os.environ.get("WORKBENCH_CUPTI_ROOT")
    roots = [Path(explicit)] if explicit else []
    roots += _cuda_roots() + _package_dirs("nvidia.cuda_cupti") + _package_dirs("nvidia.cu13")
    cuda_h = next((r / "include" for r in _cuda_roots() if (r / "include" / "cuda.h").is_file()), None)
    for root in roots:
        for include, libs in ((root / "include", root / "lib64"), (root / "include", root / "lib"),
                              (root / "extras/CUPTI/include", root / "extras/CUPTI/lib64")):
            if (include / "cupti.h").is_file() and any(libs.glob("libcupti.so*")):
                return [include, *([cuda_h] if cuda_h and cuda_h != include else [])], libs
    return None


def build_shims(cuda: bool = True) -> Shims:
    """The shims for this machine (BuildError when even the lock shim cannot be built)."""
    notes = []
    include = nvtx_include()
    flags = list(FLAGS)
    if include is not None:
        flags += ["-DWB_NVTX", f"-I{include}"]
    else:
        notes.append("NVTX ranges not recorded: no NVTX headers found (install the nvidia-nvtx-cu12 "
                     "package, or set WORKBENCH_NVTX_INCLUDE)")
    depends = [RING, NVTX, *(sorted((include / "nvtx3").rglob("*.h")) if include else [])]
    locks = compiled.build("record-shim", [SHIM], flags, depends=depends, libraries=("-ldl", "-lpthread"))
    cupti = None
    if cuda:
        cupti, note = _cupti_shim()
        if note:
            notes.append(note)
    return Shims(locks, include is not None, cupti, notes)


def _cupti_shim() -> tuple[Path | None, str]:
    found = cupti_paths()
    if found is None:
        return None, ("CUDA activity not recorded: no CUPTI headers and library found (a CUDA toolkit, or "
                      "set WORKBENCH_CUPTI_ROOT)")
    includes, libs = found
    layouts = _record_layouts(includes[0] / "cupti_activity.h")
    if isinstance(layouts, str):
        return None, f"CUDA activity not recorded: {layouts}"
    flags = [*FLAGS, *(f"-I{i}" for i in includes), *layouts]
    try:
        path = compiled.build("record-cupti", [CUPTI], flags, depends=[RING, LAUNCHES],
                              libraries=(f"-L{libs}", "-lcupti", f"-Wl,-rpath,{libs}", "-lpthread"))
    except compiled.BuildError as err:
        return None, f"CUDA activity not recorded: the CUPTI shim did not build ({err})"
    return path, ""


# The activity records the shim reads, by the struct names this toolkit's headers give them.
RECORDS = {"WB_KERNEL_T": "CUpti_ActivityKernel", "WB_MEMCPY_T": "CUpti_ActivityMemcpy",
           "WB_MEMSET_T": "CUpti_ActivityMemset", "WB_SYNC_T": "CUpti_ActivitySynchronization"}
OPTIONAL = {"WB_OVERHEAD_T": "CUpti_ActivityOverhead"}  # CUPTI's own overhead (the `overhead` kind)


def _record_layouts(header: Path) -> list[str] | str:
    """-D flags naming the newest version of each record struct in the header (CUPTI fills
    records in the layout of the library beside these headers), and its number (`_V`); and
    whether the header knows the per-thread buffer attribute."""
    import re

    try:
        text = header.read_text(errors="replace")
    except OSError as err:
        return f"cannot read {header} ({err.strerror})"
    flags = []
    for macro, struct in {**RECORDS, **OPTIONAL}.items():
        versions = [int(v or 0) for v in re.findall(rf"}}\s*{struct}(\d*)\s*;", text)]
        if not versions:
            if macro in OPTIONAL:
                continue
            return f"{header} defines no {struct}"
        newest = max(versions)
        flags += [f"-D{macro}={struct}{newest if newest else ''}", f"-D{macro}_V={max(newest, 1)}"]
    if "CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER" in text:  # an attribute of newer toolkits only
        flags.append("-DWB_PER_THREAD_ATTR")
    return flags
