# SPDX-License-Identifier: Apache-2.0
"""A CuPy RawKernel-style kernel written as a source string, compiled with NVRTC and launched on torch tensors, on
torch's current stream: dlstream.Module.from_source, a template kernel through a name expression, the compile
cache. Needs torch with CUDA and NVRTC (the CUDA toolkit or `pip install nvidia-cuda-nvrtc`)."""
import sys
import time

import dlstream

try:
    import torch
except ImportError:
    print("skipped: torch is not installed")
    sys.exit(0)
if not torch.cuda.is_available() or dlstream.device_count("cuda") == 0:
    print("skipped: no CUDA device")
    sys.exit(0)
try:
    print("NVRTC %d.%d" % dlstream.compiler_version("cuda"))
except dlstream.UnavailableError as e:
    print(f"skipped: {e}")
    sys.exit(0)

SOURCE = r"""
extern "C" __global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template <typename T> __global__ void scale(T *p, T s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= s;
}
"""

t0 = time.perf_counter()
mod = dlstream.Module.from_source(SOURCE, name_expressions=["scale<float>"], device="cuda:0")
t1 = time.perf_counter()
again = dlstream.Module.from_source(SOURCE, name_expressions=["scale<float>"], device="cuda:0")
t2 = time.perf_counter()
print(f"first from_source {1e3 * (t1 - t0):.1f} ms (a compile, or the disk cache); "
      f"second {1e6 * (t2 - t1):.1f} µs (a Module of its own on the image loaded first: closing one leaves the "
      f"other working: {again is not mod})")

# Signatures turn Python floats and ints into the C types the kernels take; tensors go through DLPack.
axpy = mod.function("axpy", "f32,cp,p,i32")
scale = mod.function("scale<float>", "p,f32,i32")  # the name expression; dlstream looks up the lowered name

n = 1 << 20
x = torch.arange(n, dtype=torch.float32, device="cuda")
y = torch.ones(n, device="cuda")
side = torch.cuda.Stream()
with torch.cuda.stream(side):  # no stream=: the launches run on torch's current stream, like torch ops
    axpy.launch((n + 255) // 256, 256, 2.0, x, y, n)
    scale.launch((n + 255) // 256, 256, y, 0.5, n)
    z = y.clone()  # ordered after both kernels on the same stream
side.synchronize()
expected = (2 * x + 1) * 0.5
print("y[:4] =", z[:4].tolist(), "correct:", bool(torch.allclose(z, expected)))

try:
    mod.function("axpyy")
except dlstream.NotFoundError as e:
    print("NotFoundError:", e)
try:
    dlstream.Module.from_source("__global__ void k(float *p) {\n  *p = oops;\n}\n", device="cuda:0")
except dlstream.InvalidArgumentError as e:
    print("compile error, first line of the log:", e.log.splitlines()[0])
