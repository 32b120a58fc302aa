# SPDX-License-Identifier: Apache-2.0
"""A tour of dlstream from Python: streams, events, tensors through DLPack, built-ins, launches, use_stream.
Runs on the CPU backend anywhere and on CUDA when a GPU is there. `make demo` runs it."""
import sys

import dlstream

try:
    import numpy as np
except ImportError:
    print("skipped: NumPy is not installed")
    sys.exit(0)

dev = dlstream.default_device()
print(f"tour: dlstream {dlstream.__version__} on {dev} (CUDA devices: {dlstream.device_count('cuda')})")

# Streams: owned, default, and the legacy default stream as the fallback of every call.
s = dlstream.Stream(dev)
other = dlstream.Stream(dev)
print(f"tour: created {s!r}; the legacy default is {dlstream.Stream.legacy(dev)!r}")

# A tensor dlstream owns, filled in stream order on s, then shared with NumPy through DLPack.
t = dlstream.empty(8, "float32", device=dev, stream=s)
dlstream.fill(t, 1.5, stream=s)
host = np.zeros(8, np.float32)
dlstream.copy(host, t, stream=s)  # host memory for a device stream on a GPU: staged, and the call blocks
s.synchronize()
print(f"tour: fill on s, copied to NumPy: {host}")

# Events order two streams without blocking the host: other waits for s's work.
x = np.arange(8, dtype=np.float32)
dlstream.axpy(2.0, x, t, stream=s)  # x is host memory: on a GPU it is staged and the call blocks
e = s.record()
other.wait(e)
print(f"tour: recorded {e!r} on s; other waits for it (the host does not)")

# A latch makes ordering visible: other is held until the host opens it.
latch = dlstream.Latch(dev)
latch.wait(other, timeout=10)
dlstream.fill(t, 7.0, stream=other)
print(f"tour: other held by a latch, idle = {other.query()}")
latch.open()
other.synchronize()
latch.check()
print(f"tour: latch opened, other idle = {other.query()}")

# A built-in launched like any kernel: the signature turns Python ints and floats into C types.
axpy = dlstream.builtin_function("dls_axpy_f32", dev)
y = np.ones(8, np.float32)
if dev.startswith("cpu"):
    with dlstream.use_stream(s):  # the stream of every call in the block that names none
        axpy.launch(1, 8, 8, 3.0, x, y)
    s.synchronize()
else:
    axpy.launch(1, 8, 8, 3.0, x, y, stream=s)  # host arrays for a GPU kernel: staged, blocking
print(f"tour: {axpy!r} launched: y = 3 * x + 1 = {y}")

# Any DLPack producer becomes a dlstream view; our tensors go to NumPy (and torch, CuPy) the same way.
v = dlstream.from_dlpack(np.arange(4, dtype=np.int64))
print(f"tour: from_dlpack(numpy) -> {v!r}")
if dev.startswith("cpu"):
    print(f"tour: numpy.from_dlpack(t) -> {np.from_dlpack(t)}")

# Errors name the call, the argument and the value, and derive from dlstream.Error and the built-in.
try:
    dlstream.Stream("tpu:0")
except ValueError as err:
    print(f"tour: {type(err).__name__} (a ValueError and a dlstream.Error): {err}")

for obj in (v, t, latch, e, other, s):
    obj.close()
print("tour: every handle closed:", all(n == 0 for n in dlstream._dlstream._live_handles().values()))
print("tour: ok")
