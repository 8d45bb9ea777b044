from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Spin until another thread reaches a known state (a sequencer, not a sleep-and-hope)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.0005)


@pytest.fixture(autouse=True)
def no_leftover_threads():
    """Every test must leave no pipeline thread running behind it."""
    before = {t.ident for t in threading.enumerate()}
    yield
    wait_until(lambda: not [t for t in threading.enumerate()
                            if t.ident not in before and t.is_alive() and t.daemon], timeout=20)


@pytest.fixture(autouse=True)
def srs_cache(tmp_path_factory, monkeypatch):
    """Keep proving-key files out of the user's cache directory."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "srs-cache"))


def require_cuda_device():
    """cupy, for a test module that needs a CUDA device; the whole module is skipped (with
    the reason) where there is none."""
    import warnings

    with warnings.catch_warnings():  # an environment warning at import is not a test failure
        warnings.simplefilter("ignore")
        cupy = pytest.importorskip("cupy")
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no driver, or no device
        count = 0
    if count == 0:
        pytest.skip("no CUDA device", allow_module_level=True)
    return cupy


# The MSM's paths, named in full so that the tests stay right when the defaults change: the
# default for bases without a window table (scan reduction, windows per scalar), the pending
# reduction down to one point a row (the scan's long-row levels alone), and the precomputed
# window multiples of the bases (one set of buckets for all windows; its tables built on first
# use). The MSM tests on the CPU
# build and on the GPU both run over them.
MSM_PATHS = {"default": {"REDUCE": "scan", "PRECOMPUTED": "off"},
             "pending": {"REDUCE": "pending", "PRECOMPUTED": "off"},
             "fixed": {"REDUCE": "scan", "PRECOMPUTED": "always"}}


@pytest.fixture(params=sorted(MSM_PATHS))
def msm_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    from workbench.gpu import msm as gpu_msm

    for name, value in MSM_PATHS[request.param].items():
        monkeypatch.setattr(gpu_msm, name, value)
    return str(request.param)
