# SPDX-License-Identifier: Apache-2.0
"""The same RawKernel-style kernel on CuPy arrays: dlstream.Module.from_source, launched inside
`with cupy.cuda.Stream()`. Needs CuPy with CUDA and NVRTC (the CUDA toolkit or `pip install nvidia-cuda-nvrtc`)."""
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
"""

axpy = dlstream.Module.from_source(SOURCE, device="cuda:0").function("axpy", "f32,cp,p,i32")
n = 1 << 20
x = cupy.arange(n, dtype=cupy.float32)
y = cupy.ones(n, dtype=cupy.float32)
with cupy.cuda.Stream(non_blocking=True) as s:
    # CuPy streams implement __cuda_stream__, so stream=s is taken as is; the arrays come through DLPack.
    axpy.launch((n + 255) // 256, 256, 3.0, x, y, n, stream=s)
    total = float(y.sum())  # a CuPy op on the same stream sees the result
expected = float((3 * cupy.arange(n, dtype=cupy.float64) + 1).sum())
print(f"sum {total:.6g}, expected {expected:.6g}, correct: {abs(total - expected) <= 1e-6 * expected}")

# Compile without a GPU, for shipping: a cubin for sm_90 and PTX for any newer GPU.
cubin = dlstream.compile(SOURCE, "sm_90")
ptx = dlstream.compile(SOURCE, "compute_90")
print(f"cubin {len(cubin)} bytes, PTX {len(ptx)} bytes; dlstream.Module(cubin) loads either")
