"""Kernel binaries built ahead (benchmarks/prebuild_kernels.py) are loaded for exactly the
build they were made from, and anything else is compiled as before. No GPU: CuPy is stood in
for by an object that records how each module was made."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.gpu import kernels, prebuilt

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "prebuild_kernels.py")
NVCC = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None)


class FakeModule:
    def __init__(self, made, code=None, options=None, path=None):
        if path is not None and Path(path).read_bytes() == b"unloadable":
            raise RuntimeError("CUDA_ERROR_INVALID_IMAGE")
        made.append({"path": path, "options": options, "code": code})

    def get_function(self, name):
        return name


class FakeCupy:
    def __init__(self):
        self.made = []
        made = self.made

        class Device:
            id = 0
            compute_capability = "90"

        class Cuda:
            pass

        Cuda.Device = Device
        self.cuda = Cuda
        self.RawModule = lambda **kw: FakeModule(made, **kw)


@pytest.fixture
def cupy(monkeypatch):
    fake = FakeCupy()
    monkeypatch.setattr(kernels, "require_cupy", lambda: fake)
    monkeypatch.setattr(kernels, "_modules", {})
    return fake


def test_the_name_changes_with_the_source_the_defines_and_the_architecture():
    base = prebuilt.file_name("msm", "code", ("A",), "90")
    assert base.startswith("msm-sm90-") and base.endswith(".cubin")
    builds = [("code ", ("A",), "90"), ("code", ("B",), "90"), ("code", ("A",), "100"), ("code", (), "90"),
              ("code", ("A", "B"), "90")]
    others = {prebuilt.file_name("msm", *build) for build in builds}
    assert base not in others and len(others) == 5


def test_a_binary_built_for_this_build_is_loaded_and_others_compiled(cupy, tmp_path, monkeypatch):
    monkeypatch.setenv(prebuilt.CUBINS_ENV, str(tmp_path))
    code = kernels.source("fr_vector")
    built = tmp_path / prebuilt.file_name("fr_vector", code, (), "90")
    built.write_bytes(b"cubin")
    kernels.module("fr_vector")
    with kernels.built_with("FR_MUL_FP64"):
        kernels.module("fr_vector")  # no binary for this build: compiled
    assert cupy.made[0]["path"] == str(built)
    assert cupy.made[1]["path"] is None and "-DFR_MUL_FP64" in cupy.made[1]["options"]
    assert kernels.loaded[-1] == built.name


def test_a_binary_that_does_not_load_is_compiled_instead(cupy, tmp_path, monkeypatch):
    monkeypatch.setenv(prebuilt.CUBINS_ENV, str(tmp_path))
    (tmp_path / prebuilt.file_name("ntt", kernels.source("ntt"), (), "90")).write_bytes(b"unloadable")
    kernels.module("ntt")
    assert [m["path"] for m in cupy.made] == [None] and cupy.made[0]["code"] == kernels.source("ntt")


def test_without_the_folder_every_module_is_compiled(cupy, monkeypatch):
    monkeypatch.delenv(prebuilt.CUBINS_ENV, raising=False)
    kernels.module("fr_vector")
    assert cupy.made[0]["path"] is None


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit absent)")
def test_the_script_writes_what_the_loader_looks_for(cupy, tmp_path, monkeypatch):
    out = tmp_path / "cubins"
    done = subprocess.run([sys.executable, SCRIPT, "--out", str(out), "fr_vector", "fr_vector+FR_MUL_FP64"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "2 of 2 modules" in done.stdout
    monkeypatch.setenv(prebuilt.CUBINS_ENV, str(out))
    kernels.module("fr_vector")
    with kernels.built_with("FR_MUL_FP64"):
        kernels.module("fr_vector")
    paths = [m["path"] for m in cupy.made]
    assert all(p is not None for p in paths) and len(set(paths)) == 2
    assert all(Path(p).read_bytes()[:4] == b"\x7fELF" for p in paths)  # a cubin is an ELF image


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit absent)")
def test_keep_leaves_a_binary_of_the_same_build(tmp_path):
    """--keep: a binary named for exactly this build is not rebuilt (its name digests the
    source, defines and architecture, so it is this build's)."""
    kept = tmp_path / prebuilt.file_name("fr_vector", kernels.source("fr_vector"), (), "90")
    kept.write_bytes(b"built before")
    done = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path), "--keep", "fr_vector"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 of 1 modules" in done.stdout and kept.read_bytes() == b"built before"


def test_a_bad_module_name_or_define_is_refused_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path), "--defines", "bad define"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "not a preprocessor define" in done.stderr
