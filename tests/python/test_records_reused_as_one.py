# SPDX-License-Identifier: Apache-2.0
"""Memory used in many small pieces and then handed out again as one array (a framework's memory pool does it all the
time): the small arrays' records of foreign memory (one each, made by their uses on a stream that is not their
framework's) overlap the large one, more of them than one use may join (32). With their uses over, they are swept and
the large array is used; before, every call with it was refused ("40 records and imports of foreign memory overlap
...: imports of overlapping memory that live at once"), on any stream. Without a GPU: the null CUDA driver and
tests/python/fake_cupy, as test_many_records.py."""
import pytest

test_cupy_path = pytest.importorskip("test_cupy_path")
pytestmark = test_cupy_path.pytestmark

BODY = '''
s, s2 = dlstream.Stream("cuda:0"), dlstream.Stream("cuda:0")
k1 = dlstream.Module(PTX, device="cuda:0").function("axpy", "p")
base = 0x790000000000
small = [cupy.ndarray(base + i * 256, (64,), f32) for i in range(40)]
for a in small:
    k1.launch(1, 1, a, stream=s)           # a record each: s is not CuPy's stream
s.synchronize()
big = cupy.ndarray(base, (40 * 64,), f32)  # the same memory, as one array
res = []
for where in ("dlstream stream", "framework stream", "another stream"):
    try:
        if where == "framework stream":
            k1.launch(1, 1, big)
        else:
            k1.launch(1, 1, big, stream=s if where == "dlstream stream" else s2)
        res.append("ok")
    except Exception as e:
        res.append(type(e).__name__ + ": " + str(e))
out["res"] = res
s.synchronize()
s2.synchronize()
'''


def test_an_array_over_many_finished_records_is_used():
    got = test_cupy_path.run(BODY, True)
    assert got["res"] == ["ok", "ok", "ok"], got["res"]
