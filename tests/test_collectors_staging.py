"""The staging wrapper's spans, against a stand-in for CuPy (no GPU)."""

from types import SimpleNamespace

import numpy as np

from workbench.collectors.staging import staged_asarray, staged_set
from workbench.trace.recorder import Recorder
from workbench.trace.scope import Scope


class FakeDeviceArray:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype
        self.received = None

    def set(self, host, stream=None):
        self.received = (host.copy(), host.ctypes.data, stream)


class FakeCupy:
    ndarray = FakeDeviceArray

    def __init__(self):
        self.pinned_pointers = set()
        self.synchronized = 0
        stream = SimpleNamespace(synchronize=self._synchronize)
        self.cuda = SimpleNamespace(
            runtime=SimpleNamespace(pointerGetAttributes=self._attributes),
            alloc_pinned_memory=self._alloc_pinned, get_current_stream=lambda: stream,
        )

    def _synchronize(self):
        self.synchronized += 1

    def _attributes(self, pointer):
        return SimpleNamespace(type=1 if pointer in self.pinned_pointers else 0)

    def _alloc_pinned(self, nbytes):
        memory = bytearray(nbytes)
        self.pinned_pointers.add(np.frombuffer(memory, dtype=np.uint8).ctypes.data)
        return memory

    def empty(self, shape, dtype):
        return FakeDeviceArray(shape, dtype)


def spans(recorder):
    return [(s[1], s[6]) for s in recorder.spans]


def test_a_pageable_source_shows_its_hidden_staging():
    xp, recorder = FakeCupy(), Recorder(nvtx=False)
    host = np.arange(1024, dtype=np.uint64)
    out = staged_asarray(host, Scope(recorder, "worker/0", partition=2, worker=0), xp=xp)
    assert (out.received[0] == host).all() and out.received[1] != host.ctypes.data
    assert spans(recorder) == [
        ("staging_copy", {"hidden": True, "bytes": 8192}),
        ("h2d_copy", {"bytes": 8192, "source": "pinned", "staged": True}),
    ]
    assert all(s[4] == 2 and s[0] == "worker/0" for s in recorder.spans)
    assert xp.synchronized == 1


def test_a_pinned_source_needs_no_staging():
    xp, recorder = FakeCupy(), Recorder(nvtx=False)
    memory = xp.cuda.alloc_pinned_memory(4096)
    host = np.frombuffer(memory, dtype=np.uint64)
    device = xp.empty(host.shape, host.dtype)
    staged_set(device, host, Scope(recorder, "worker/0"), xp=xp)
    assert device.received[1] == host.ctypes.data
    assert spans(recorder) == [("h2d_copy", {"bytes": 4096, "source": "pinned", "staged": False})]


def test_a_device_array_passes_through():
    xp, recorder = FakeCupy(), Recorder(nvtx=False)
    device = xp.empty((4,), np.uint64)
    assert staged_asarray(device, Scope(recorder, "worker/0"), xp=xp) is device
    assert recorder.spans == []
