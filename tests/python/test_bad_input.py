# SPDX-License-Identifier: Apache-2.0
"""Bad shapes, sizes, priorities and devices: a clear dlstream error of the built-in class NumPy would raise
(ValueError for values, TypeError for types), naming the call, the argument and the value, and nothing left
behind."""
import os

import numpy as np
import pytest

import dlstream
from conftest import CPU


@pytest.mark.parametrize("shape, text", [
    ((-1, 3), r"empty\(shape=\(-1, 3\)\): extent 0 is -1; .*negative dimensions are not allowed"),
    (-2, r"empty\(shape=-2\): extent 0 is -2"),
    ((3, -1), r"extent 1 is -1"),
    ((np.int64(-4),), r"extent 0 is .*-4"),
    (10**30, r"extents are 0 to 2\*\*63 - 1"),
    ((2, 2**64), r"extent 1 is 18446744073709551616"),
    (2**62, r"more than 2\*\*63 - 1 bytes"),
    ((2**40, 2**40), r"more than 2\*\*63 - 1 bytes"),
    ((0, 2**62, 2**62), r"more than 2\*\*63 - 1 bytes"),
    (tuple([1] * 33), r"33 dimensions; at most 32"),
])
def test_empty_refuses_bad_shapes_as_numpy_does(shape, text, no_leaks):
    with pytest.raises(dlstream.InvalidArgumentError, match=text) as ei:
        dlstream.empty(shape, "float64", device=CPU)
    assert isinstance(ei.value, ValueError)
    if not (isinstance(shape, tuple) and len(shape) > 32):  # NumPy 2 takes up to 64 dimensions
        with pytest.raises(ValueError):
            np.empty(shape, np.float64)


@pytest.mark.parametrize("shape", ["ab", 3.0, (3.0,), None, ([2],), object()])
def test_empty_refuses_shapes_of_the_wrong_type(shape, no_leaks):
    with pytest.raises(dlstream.ArgumentTypeError, match=r"empty\(shape="):
        dlstream.empty(shape, device=CPU)


@pytest.mark.parametrize("shape, want", [
    (np.int64(3), (3,)), ((np.int32(2), 3), (2, 3)), ((), ()), ((0, 5), (0, 5)), ([4], (4,)), (0, (0,)),
])
def test_empty_takes_what_numpy_takes(shape, want, no_leaks):
    with dlstream.empty(shape, "float32", device=CPU) as t:
        assert t.shape == want == np.empty(shape, np.float32).shape


@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", "") or "tsan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer and ThreadSanitizer abort on a 256 TiB malloc (allocator_may_return_null=0)")
def test_too_large_for_memory_is_a_memory_error(no_leaks):
    with pytest.raises(MemoryError, match="out of host memory"):
        dlstream.empty(2**45, "float64", device=CPU)


@pytest.mark.parametrize("priority", [2**40, -2**40, 2**70])
def test_stream_priority_out_of_range(priority, no_leaks):
    with pytest.raises(dlstream.InvalidArgumentError, match=rf"Stream\(priority={priority}\)"):
        dlstream.Stream(CPU, priority=priority)
    with pytest.raises(dlstream.ArgumentTypeError, match="expected an int"):
        dlstream.Stream(CPU, priority="high")


@pytest.mark.parametrize("device", [2**70, -1, 65536, (0, -1), ("cuda", 2**70), "cuda:-1", "cuda:x", "cuda:99999"])
def test_device_numbers_out_of_range(device):
    with pytest.raises(dlstream.InvalidDeviceError, match="device="):
        dlstream.Stream(device)


@pytest.mark.parametrize("grid", [0, -1, 2**32, (1, 0), (1, 1, 1, 1), 2**70])
def test_launch_dimensions(grid, no_leaks):
    f = dlstream.builtin_function("dls_spin", CPU)
    with pytest.raises((dlstream.InvalidArgumentError, dlstream.ArgumentTypeError), match="grid"):
        f.launch(grid, 1, 0)
    with pytest.raises(dlstream.InvalidArgumentError, match="shared_mem"):
        f.launch(1, 1, 0, shared_mem=-1)
