"""Host arrays a synthesis process can map: the same memory seen through another mapping,
descriptors released with the array, nothing for plain arrays."""

import gc
import os

import numpy as np

from workbench.prover.shared_arrays import map_shared, ref_of, shared_empty


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_another_mapping_sees_and_changes_the_same_memory():
    array = shared_empty((100, 4))
    array[...] = np.arange(400, dtype=np.uint64).reshape(100, 4)
    ref = ref_of(array)
    assert ref is not None and ref.nbytes == 3200 and ref.shape == (100, 4)
    block, view = map_shared(os.dup(ref.fd), ref.nbytes, ref.shape)
    np.testing.assert_array_equal(view, array)
    view[7] = 12345
    assert (array[7] == 12345).all()
    del view
    block.close()


def test_plain_arrays_have_no_reference_and_empty_arrays_work():
    assert ref_of(np.zeros((3, 4), np.uint64)) is None
    empty = shared_empty((0, 4))
    assert empty.shape == (0, 4) and ref_of(empty).nbytes == 0


def test_descriptors_go_with_their_arrays():
    gc.collect()
    before = open_fds()
    arrays = [shared_empty((1000, 4)) for _ in range(50)]
    assert open_fds() >= before + 50
    refs = {ref_of(a).fd for a in arrays}
    assert len(refs) == 50
    del arrays
    gc.collect()
    assert open_fds() <= before
