"""The GPU backend's host-side plumbing, checked without a GPU."""

from contextlib import contextmanager
from types import SimpleNamespace

from workbench.gpu.backend import GpuBackend, on_device_of_buffers
from workbench.prover.backend import DeviceBuffers


def fake_cupy(log):
    @contextmanager
    def device(index):
        log.append(("enter", index))
        yield
        log.append(("exit", index))

    return SimpleNamespace(cuda=SimpleNamespace(Device=device))


def test_calls_for_a_worker_run_on_that_workers_gpu():
    log = []

    class Stub:
        _cp = fake_cupy(log)

        @on_device_of_buffers
        def work(self, buffers, value):
            log.append(("work", value))
            return value * 2

    buffers = DeviceBuffers(None, None, None, gpu=3)
    assert Stub().work(buffers, 21) == 42
    assert log == [("enter", 3), ("work", 21), ("exit", 3)]


def test_every_per_worker_method_of_the_gpu_backend_enters_the_device():
    for name in ("copy_to_device", "ntt_msm_h", "h_vector", "batch_add", "tail_msm"):
        assert hasattr(getattr(GpuBackend, name), "__wrapped__"), name
