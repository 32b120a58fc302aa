# SPDX-License-Identifier: Apache-2.0
"""dlstream with CuPy: CuPy arrays as kernel arguments, CuPy's current stream, streams shared both ways, our tensors
in CuPy."""
import sys

import dlstream

try:
    import cupy
except ImportError:
    print("skipped: CuPy is not installed")
    sys.exit(0)
if dlstream.device_count("cuda") == 0:
    print("skipped: no CUDA device")
    sys.exit(0)

s = dlstream.Stream("cuda:0")
with cupy.cuda.ExternalStream(s.ptr):  # CuPy works on our stream
    x = cupy.arange(1024, dtype=cupy.float32)
    y = cupy.zeros(1024, dtype=cupy.float32)
axpy = dlstream.builtin_function("dls_axpy_f32", "cuda:0")
axpy.launch(4, 256, 1024, 2.0, x, y, stream=s)  # explicit stream: CuPy's work on x and y is ordered before s

with cupy.cuda.Stream(non_blocking=True) as cur:  # CuPy's current stream: launches without stream= run on it
    cur.wait_event(cupy.cuda.ExternalStream(s.ptr).record())
    axpy.launch(4, 256, 1024, 1.0, x, y)  # y = 3 * x, on `cur`
    y *= 2  # CuPy work on `cur`, after the launch: y = 6 * x
cur.synchronize()
assert float(y[1]) == 6.0

cs = cupy.cuda.Stream(non_blocking=True)
w = dlstream.Stream.wrap(cs)  # we work on CuPy's stream
w.wait(s)
t = dlstream.empty(1024, "float32", device="cuda:0", stream=w)
dlstream.copy(t, y, stream=w)
with cs:
    a = cupy.from_dlpack(t)  # cs waits for our work on w (the same stream here)
    print("sum:", float(a.sum()), "(6 * the sum of 0..1023)")
cs.synchronize()
print("cupy example: ok")
