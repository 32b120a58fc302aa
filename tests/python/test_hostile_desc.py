# SPDX-License-Identifier: Apache-2.0
"""A copy descriptor from Python whose view reaches past 128 bits once multiplied by its element size
(dls_copy_strided launched with a bytes descriptor, on int64 arrays): refused by name, the arrays as they were. Its
span, computed in 128 bits, wrapped to a few bytes or none; the check let it through and the kernel wrote past the
destination (the process crashed: the cases run in a fresh interpreter)."""
from conftest import run_python

CASES = {
    "one dimension": (1, 8, [(1 << 61) + (1 << 60)], [(1 << 63) - 1]),
    "negative stride": (1, 8, [(1 << 61) + (1 << 60)], [-(1 << 63) + 1]),
    "two dimensions": (2, 8, [1 << 62, 1], [(1 << 63) - 1, 1]),
}

CHILD = r"""
import numpy as np, struct, dlstream
copy = dlstream.builtin_function("dls_copy_strided", "cpu")
dst = np.full(256, 7, np.int64)
src = np.full(256, 9, np.int64)
for name, (ndim, elem, shape, stride) in {cases}.items():
    pad = [0] * (8 - ndim)
    desc = struct.pack("<II8q8q8q", ndim, elem, *shape, *pad, *stride, *pad, *([0] * 8))
    try:
        copy.launch(1, 1, dst, src, desc, stream=dlstream.current_stream("cpu"))
        said = "queued"
    except dlstream.InvalidArgumentError as e:
        said = "refused: " + str(e)
    dlstream.synchronize()
    print(name, "|", said, "|", "same" if (dst == 7).all() and (src == 9).all() else "changed", flush=True)
"""


def test_a_descriptor_whose_reach_overflows_is_refused():
    r = run_python(CHILD.replace("{cases}", repr(CASES)), timeout=60)
    assert r.returncode == 0, f"the process died ({r.returncode}): {r.stdout[-1000:]} {r.stderr[-2000:]}"
    lines = r.stdout.strip().split("\n")
    assert len(lines) == len(CASES), r.stdout
    for line in lines:
        name, said, after = line.split(" | ")
        assert said.startswith("refused:") and "the dst view's extent overflows" in said, line
        assert after == "same", line
