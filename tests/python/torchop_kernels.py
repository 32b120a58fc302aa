# SPDX-License-Identifier: Apache-2.0
"""The operators the torch-operator tests share (test_torch_op.py on the CPU backend, test_torch_op_gpu.py on CUDA):
built-ins and, on CUDA, a kernel from source, made into torch operators with dlstream.torch.op."""
import dlstream
import dlstream.torch as dt
import torch

MUL_SRC = r'''
extern "C" __global__ void mul(const float *x, const float *y, float *out, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    out[i] = x[i] * y[i];
}
'''


class Ops:
    """axpy_(a, x, y): y += a * x, the axpy built-in (writes y); scale(a, x) -> a * x, the same built-in into a
    zeroed output, with autograd whose backward is scale itself; fill_(dst, pattern): the fill built-in with its
    element size computed; on CUDA mul(x, y) -> x * y, compiled from source (None without NVRTC: no_mul says why)."""

    def __init__(self, ns, device):
        self.ns = ns
        axpy_k = dlstream.builtin_function("dls_axpy_f32", device)
        f32 = {"x": torch.float32}
        self.axpy_ = dt.op(f"{ns}::axpy_", axpy_k, params="n, a, x, y", compute={"n": dt.numel("x")},
                           grid=dt.cdiv("n", 256), block=256, dtypes=dict(f32, y=torch.float32))

        def backward(ctx, grad):
            return None, self.scale(ctx.a, grad)

        def setup_context(ctx, inputs, output):
            ctx.a = inputs[0]

        self.scale = dt.op(f"{ns}::scale", axpy_k, params="n, a, x, out", compute={"n": dt.numel("x")},
                           outputs={"out": dt.output("x", zeros=True)}, grid=lambda n: max(1, min(n // 256, 64)),
                           block=256, dtypes=f32, backward=backward, setup_context=setup_context)
        self.fill_ = dt.op(f"{ns}::fill_", dlstream.builtin_function("dls_fill", device),
                           params="dst, count, elem_size, pattern",
                           compute={"count": dt.numel("dst"), "elem_size": lambda dst: dst.element_size()},
                           grid=dt.cdiv("count", 256), block=256)
        self.names = ["axpy_", "scale", "fill_"]
        self.mul = None
        if device.startswith("cuda"):
            try:
                mod = dlstream.Module.from_source(MUL_SRC, device=device)
            except dlstream.UnavailableError as e:  # no NVRTC: the tests that need mul say so
                self.no_mul = str(e)
                return
            self.mul = dt.op(f"{ns}::mul", mod.function("mul", "cp,cp,p,u64"), params="x, y, out, n",
                             compute={"n": dt.numel("x")}, outputs={"out": dt.output("x")},
                             grid=dt.cdiv("n", 128), block=128, dtypes={"x": torch.float32, "y": torch.float32})
            self.names.append("mul")

    def remove(self):
        for n in self.names:
            dt.remove(f"{self.ns}::{n}")


def bits(value, dtype):
    """The bit pattern of `value` as one element of `dtype`: fill_'s pattern."""
    return int.from_bytes(torch.tensor([value], dtype=dtype).numpy().tobytes(), "little")
