# SPDX-License-Identifier: Apache-2.0
"""A launch with many tensor arguments of another framework on a stream that is not the framework's: each argument
is kept until the stream passes (a post) and is a use of its record of foreign memory (the record's quick list or a
use post), so a call holds up to twice as many entries as arguments. With one room of DLS_MAX_ARGS for both, 33 CuPy
arrays were refused as "more than 64 tensor arguments". Here, without a GPU (the null CUDA driver and
tests/python/fake_cupy, as test_cupy_path.py): 64 arrays launch, the first time (the records made) and again (their
uses taken the quick way, in flight until the work is marked), the same array 64 times too; a later use of the last
array on another stream waits for the launch's stream (the uses were noted); and arrays that each span two records
(a use of each: past what a call notes) are refused by name, with nothing left in flight (a later call runs)."""
import pytest

test_cupy_path = pytest.importorskip("test_cupy_path")
pytestmark = test_cupy_path.pytestmark

BODY = '''
s, s2 = dlstream.Stream("cuda:0"), dlstream.Stream("cuda:0")
mod = dlstream.Module(PTX, device="cuda:0")
k64, k1 = mod.function("axpy", ",".join(["p"] * 64)), mod.function("axpy", "p")
arrs = [cupy.ndarray(0x7f1000000000 + i * 0x10000, (1024,), f32) for i in range(64)]
res = []
for rep in range(2):
    try:
        k64.launch(1, 1, *arrs, stream=s)
        res.append("ok")
    except Exception as e:
        res.append(str(e))
try:
    k64.launch(1, 1, *([arrs[0]] * 64), stream=s)
    res.append("ok")
except Exception as e:
    res.append(str(e))
out["launches"] = res
waits = stats()[2]
k1.launch(1, 1, arrs[63], stream=s2)
out["waits"] = stats()[2] - waits
# arrays over two records each: their halves used first, then the whole arrays (a use of each record)
halves = [cupy.ndarray(0x7f2000000000 + i * 0x10000 + h * 2048, (512,), f32) for i in range(40) for h in range(2)]
for h in halves:
    k1.launch(1, 1, h, stream=s2)
whole = [cupy.ndarray(0x7f2000000000 + i * 0x10000, (1024,), f32) for i in range(40)]
try:
    k64.launch(1, 1, *(whole + whole[:24]), stream=s)
    out["merged"] = "ok"
except dlstream.InvalidArgumentError as e:
    out["merged"] = str(e)
k64.launch(1, 1, *arrs, stream=s)
s.synchronize()
s2.synchronize()
'''


def test_64_arrays_of_another_framework_launch_and_are_ordered():
    got = test_cupy_path.run(BODY, True)
    assert got["launches"] == ["ok", "ok", "ok"], got["launches"]
    assert got["waits"] >= 1, "the later use on another stream must wait for the 64-argument launch's stream"
    assert "more than 64 tensor arguments (or uses of recorded memory" in got["merged"], got["merged"]
