# SPDX-License-Identifier: Apache-2.0
"""dlstream.copy into a destination two of whose elements are one memory (NumPy's as_strided with steps that are not
0, so not a broadcast, yet overlap): each such element would be written from several sources at once, a race on a
GPU (NumPy writes them in order; a kernel in no order). Refused by name, as a broadcast destination (stride 0) is,
the memory as it was; destinations whose elements are apart (transposed, reversed, interleaved steps) are copied,
NumPy's answer. Before the fix the overlapping ones were queued."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import dlstream

OVERLAP = [((2, 2), (4, 4)), ((3, 4), (8, 4)), ((4, 3), (8, 12)), ((2, 2, 3), (16, 8, 4))]
APART = [((2, 3), (12, 8)), ((2, 2), (4, 8)), ((4, 1), (4, 4)), ((3, 3), (-12, 4))]


@pytest.mark.parametrize("shape, strides", OVERLAP, ids=str)
@pytest.mark.parametrize("src_type", ["float32", "int16"])
def test_a_destination_whose_elements_overlap_is_refused(shape, strides, src_type, no_leaks):
    buf = np.zeros(64, np.float32)
    dst = as_strided(buf[16:], shape, strides)
    src = np.arange(np.prod(shape)).astype(src_type).reshape(shape)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"the destination's elements overlap"):
        dlstream.copy(dst, src)
    dlstream.current_stream("cpu").synchronize()
    assert (buf == 0).all()


@pytest.mark.parametrize("shape, strides", APART, ids=str)
def test_a_destination_whose_elements_are_apart_is_copied(shape, strides, no_leaks):
    buf, want = np.zeros(64, np.float32), np.zeros(64, np.float32)
    src = np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)
    np.copyto(as_strided(want[32:], shape, strides), src)
    dlstream.copy(as_strided(buf[32:], shape, strides), src)
    dlstream.current_stream("cpu").synchronize()
    assert np.array_equal(buf, want)
