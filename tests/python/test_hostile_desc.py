# SPDX-License-Identifier: Apache-2.0
"""A copy descriptor from Python whose view reaches past 128 bits once multiplied by its element size
(dls_copy_strided launched with a bytes descriptor, on int64 arrays): refused by name, the arrays as they were. Its span, computed in
128 bits, wrapped to a few bytes; the check let it through and the kernel wrote past the destination's end (the
process crashed: each case runs in a fresh interpreter)."""
import pytest

from conftest import run_python

CHILD = r"""
import numpy as np, struct, dlstream
copy = dlstream.builtin_function("dls_copy_strided", "cpu")
dst = np.full(256, 7, np.int64)
src = np.full(256, 9, np.int64)
ndim, elem, shape, stride = {case}
pad = [0] * (8 - ndim)
desc = struct.pack("<II8q8q8q", ndim, elem, *shape, *pad, *stride, *pad, *([0] * 8))
try:
    copy.launch(1, 1, dst, src, desc, stream=dlstream.current_stream("cpu"))
    dlstream.synchronize()
    print("queued")
except dlstream.InvalidArgumentError as e:
    dlstream.synchronize()
    print("refused:", e)
print("same" if (dst == 7).all() and (src == 9).all() else "changed")
"""

CASES = {
    "one dimension": (1, 8, [(1 << 61) + (1 << 60)], [(1 << 63) - 1]),
    "negative stride": (1, 8, [(1 << 61) + (1 << 60)], [-(1 << 63) + 1]),
    "two dimensions": (2, 8, [1 << 62, 1], [(1 << 63) - 1, 1]),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_descriptor_whose_reach_overflows_is_refused(case):
    r = run_python(CHILD.replace("{case}", repr(case)), timeout=30)
    assert r.returncode == 0, f"the process died ({r.returncode}): {r.stderr[-2000:]}"
    lines = r.stdout.split("\n")
    assert lines[0].startswith("refused:") and "the dst view's extent overflows" in lines[0], r.stdout
    assert lines[1] == "same", r.stdout
