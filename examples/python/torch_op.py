# SPDX-License-Identifier: Apache-2.0
"""dlstream kernels as torch operators (dlstream.torch): a built-in and a kernel compiled from source become
operators of torch.ops, which eager code, torch.compile(fullgraph=True), CUDA graphs and autograd use like torch's
own. Runs on CUDA when there is a device, else on dlstream's CPU backend (the built-ins only)."""
import sys

import dlstream

try:
    import torch
except ImportError:
    print("skipped: torch is not installed")
    sys.exit(0)
import dlstream.torch as dt  # noqa: E402 - needs torch

cuda = torch.cuda.is_available() and dlstream.device_count("cuda") > 0
dev = "cuda:0" if cuda else "cpu"
axpy_kernel = dlstream.builtin_function("dls_axpy_f32", dev)  # y[i] += a * x[i]; signature u64,f32,cp,p

# y += a * x in place. The kernel's arguments are named; n is computed from x, so the operator takes (a, x, y):
# its schema, from the signature, is axpy_(float a, Tensor x, Tensor(a!) y) -> ().
axpy_ = dt.op("example::axpy_", axpy_kernel, params="n, a, x, y", compute={"n": dt.numel("x")},
              grid=dt.cdiv("n", 256), block=256, dtypes={"x": torch.float32, "y": torch.float32})
print(axpy_._schema)


# a * x into a new tensor (zeros, then the same kernel), differentiable: its backward is the operator itself.
def scale_backward(ctx, grad):
    return None, scale(ctx.a, grad)


def scale_setup(ctx, inputs, output):
    ctx.a = inputs[0]


scale = dt.op("example::scale", axpy_kernel, params="n, a, x, out", compute={"n": dt.numel("x")},
              outputs={"out": dt.output("x", zeros=True)}, grid=dt.cdiv("n", 256), block=256,
              dtypes={"x": torch.float32}, backward=scale_backward, setup_context=scale_setup)
print(scale._schema)

# A kernel from source (NVRTC), on CUDA.
GELU = r'''
extern "C" __global__ void gelu(const float *x, float *out, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}
'''
gelu = None
if cuda:
    try:
        mod = dlstream.Module.from_source(GELU, device=dev)
        gelu = dt.op("example::gelu", mod.function("gelu", "cp,p,u64"), params="x, out, n",
                     compute={"n": dt.numel("x")}, outputs={"out": dt.output("x")}, grid=dt.cdiv("n", 256),
                     block=256, dtypes={"x": torch.float32})
    except dlstream.UnavailableError as e:
        print("no kernels from source:", e)


def step(x, y):
    """dlstream operators between torch operators."""
    z = y * 2
    axpy_(0.5, x, z)
    h = gelu(z) if gelu is not None else torch.nn.functional.gelu(z, approximate="tanh")
    return scale(3.0, h)


x = torch.randn(1 << 16, device=dev)
y = torch.randn(1 << 16, device=dev)
eager = step(x, y)
# fullgraph=True: a graph break would be an error. On the CPU the example uses aot_eager (Inductor's CPU code
# needs a C++ compiler and compiles for a while); on CUDA, Inductor.
compiled = torch.compile(step, fullgraph=True, backend="inductor" if cuda else "aot_eager")
torch.testing.assert_close(compiled(x, y), eager)
print("torch.compile(fullgraph=True) == eager, sum:", float(eager.sum()))

if cuda:
    g = torch.cuda.CUDAGraph()  # captured on torch's capturing stream, as any torch operator
    with torch.cuda.graph(g):
        out = step(x, y)
    g.replay()
    torch.testing.assert_close(out, eager)
    print("torch.cuda.graph replay == eager")

xg = x[:8].clone().requires_grad_()
scale(3.0, xg).sum().backward()
print("d/dx sum(scale(3, x)) =", xg.grad[:4].tolist())
torch.library.opcheck(axpy_, (2.0, x, y.clone()))
torch.library.opcheck(scale, (2.0, x[:64].clone().requires_grad_()))
print("torch_op example: ok on", dev)
