# SPDX-License-Identifier: Apache-2.0
"""dlstream.torch on torch's CPU tensors and dlstream's CPU backend: eager calls, outputs, errors naming the operator
and the argument, opcheck, torch.compile(fullgraph=True) (the aot_eager backend: no C++ compiler needed), autograd
with a backward kernel, the stream the operator runs on, and registration. The same behaviour on CUDA, with
Inductor and CUDA graphs, is in test_torch_op_gpu.py."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (dlstream.torch's CPU tests need it)")

import dlstream  # noqa: E402
import dlstream.torch as dt  # noqa: E402
from conftest import CPU, held  # noqa: E402
from torchop_kernels import Ops, bits  # noqa: E402

N = 1000


@pytest.fixture(scope="module")
def ops():
    o = Ops("dls_test_cpu", CPU)
    yield o
    o.remove()


def test_eager_calls_compute_like_torch(ops):
    x = torch.arange(N, dtype=torch.float32)
    y = torch.ones(N)
    assert ops.axpy_(2.0, x, y) is None
    assert torch.equal(y, 2 * x + 1), "a CPU operator's result is there when it returns"
    torch.ops.dls_test_cpu.axpy_(0.5, x, y)  # the packet, as torch.ops spells it
    assert torch.equal(y, 2.5 * x + 1)
    out = ops.scale(3.0, x)
    assert out.dtype == torch.float32 and out.shape == x.shape and torch.equal(out, 3 * x)
    ints = torch.zeros(5, dtype=torch.int16)
    ops.fill_(ints, 7)
    assert torch.equal(ints, torch.full((5,), 7, dtype=torch.int16))
    halves = torch.zeros(3, dtype=torch.float64)
    ops.fill_(halves, bits(1.5, torch.float64))
    assert torch.equal(halves, torch.full((3,), 1.5, dtype=torch.float64))


def test_empty_tensors_launch_nothing(ops):
    e = torch.empty(0)
    ops.axpy_(1.0, e, torch.empty(0))  # grid cdiv(0, 256) = 0: nothing to do, not an error
    assert ops.scale(2.0, e).shape == (0,)


def test_read_only_arguments_of_any_layout_written_ones_contiguous(ops):
    x = torch.arange(2 * N, dtype=torch.float32)
    y = torch.zeros(N)
    ops.axpy_(1.0, x[::2], y)  # a strided read-only argument: a contiguous copy is passed
    assert torch.equal(y, x[::2])
    with pytest.raises(dlstream.InvalidTensorError, match=r"dls_test_cpu::axpy_\(y=a tensor of shape \(1000,\) "
                                                          r"and strides \(2,\)\): the kernel writes it"):
        ops.axpy_(1.0, y, x[::2])
    grad = ops.scale(2.0, torch.ones(1).expand(N))  # a stride-0 view
    assert torch.equal(grad, torch.full((N,), 2.0))


def test_errors_name_the_operator_and_the_argument(ops):
    x, y = torch.ones(4), torch.ones(4)
    with pytest.raises(dlstream.ArgumentTypeError,
                       match=r"dls_test_cpu::axpy_\(x=a torch.float64 tensor\): expected torch.float32"):
        ops.axpy_(1.0, x.double(), y)
    with pytest.raises(dlstream.InvalidArgumentError,
                       match=r"dls_test_cpu::fill_\(pattern=-1\): out of range for a u64 argument"):
        ops.fill_(torch.zeros(4, dtype=torch.int32), -1)
    with pytest.raises(RuntimeError, match="axpy_"):  # torch's own schema check names the operator
        ops.axpy_("one", x, y)
    assert torch.equal(y, torch.ones(4)), "nothing was written"


def test_inside_use_stream_the_operator_runs_on_torchs_stream(ops):
    """A torch operator runs on torch's current stream, not on use_stream()'s: with that stream held by a latch,
    the operator still finishes; the negative control, the kernel launched directly in the same block, waits."""
    s = dlstream.Stream(CPU)
    latch = held(s, timeout=20.0)
    kernel = dlstream.builtin_function("dls_axpy_f32", CPU)
    x, y, z = torch.ones(N), torch.zeros(N), torch.zeros(N)
    with dlstream.use_stream(s):
        ops.axpy_(1.0, x, y)
        kernel.launch(4, 256, N, 1.0, x, z)
    assert torch.equal(y, x), "the operator ran on torch's stream"
    assert torch.equal(z, torch.zeros(N)), "negative control: the direct launch waits behind the latch on s"
    latch.open()
    s.synchronize()
    latch.check()
    latch.close()
    assert torch.equal(z, x)
    s.close()


def test_opcheck(ops):
    x = torch.randn(N)
    torch.library.opcheck(ops.axpy_, (1.5, x, torch.randn(N)))
    torch.library.opcheck(ops.scale, (2.0, torch.randn(N, requires_grad=True)))
    torch.library.opcheck(ops.fill_, (torch.zeros(N, dtype=torch.int32), 3))


def test_fake_tensors_give_the_outputs_shape_and_dtype(ops):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(7, 3)
        out = ops.scale(2.0, x)
        assert out.shape == (7, 3) and out.dtype == torch.float32
        with pytest.raises(dlstream.ArgumentTypeError, match=r"scale\(x=a torch.float16 tensor\)"):
            ops.scale(2.0, x.half())


def mixed(ops, x, y, quarter=bits(0.25, torch.float32)):
    """Three dlstream operators between torch operators."""
    z = y * 2
    ops.axpy_(1.5, x, z)
    w = ops.scale(0.5, torch.relu(z - 3))
    t = torch.empty_like(w)
    ops.fill_(t, quarter)
    return (w * t * 3 + w).relu()  # elementwise: no reduction whose order could differ


def test_compiled_with_fullgraph_equals_eager(ops):
    x = torch.randn(N)
    y = torch.randn(N)
    eager = mixed(ops, x, y)
    compiled = torch.compile(lambda a, b: mixed(ops, a, b), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, y), eager)

    def writes_an_input(a, b):
        ops.axpy_(2.0, a, b)
        return b * 2

    b1, b2 = y.clone(), y.clone()
    r1 = writes_an_input(x, b1)
    r2 = torch.compile(writes_an_input, fullgraph=True, backend="aot_eager")(x, b2)
    assert torch.equal(r1, r2) and torch.equal(b1, b2), "the mutation of the input is kept"


def test_autograd_through_the_backward_kernel(ops):
    x = torch.randn(N, requires_grad=True)
    ops.scale(3.0, x).pow(2).sum().backward()
    ref = x.detach().clone().requires_grad_()
    (3.0 * ref).pow(2).sum().backward()
    torch.testing.assert_close(x.grad, ref.grad)
    with torch.no_grad():
        assert not ops.scale(3.0, x).requires_grad


def test_registration_refusals_and_remove():
    k = dlstream.builtin_function("dls_axpy_f32", CPU)
    decl = dict(params="n, a, x, y", compute={"n": dt.numel("x")}, grid=1, block=64)
    op = dt.op("dls_test_reg::axpy_", k, **decl)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"already made here; dlstream.torch.remove"):
        dt.op("dls_test_reg::axpy_", k, **decl)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"backward= needs an operator that writes none of its "
                                                            r"arguments, and y is a p argument"):
        dt.op("dls_test_reg::other", k, backward=lambda ctx, g: g, **decl)
    with pytest.raises(dlstream.InvalidArgumentError, match="signature= is needed"):
        dt.op("dls_test_reg::fac", {"cpu": lambda d: k}, **decl)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"kernel=3: expected a dlstream Function"):
        dt.op("dls_test_reg::three", 3, **decl)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"kernel\['gpu'\]: the keys are 'cuda'"):
        dt.op("dls_test_reg::gpu", {"gpu": k}, **decl)
    x, y = torch.ones(8), torch.zeros(8)
    op(1.0, x, y)
    dt.remove("dls_test_reg::axpy_")
    with pytest.raises(dlstream.InvalidArgumentError, match="no operator of that name"):
        dt.remove("dls_test_reg::axpy_")
    again = dt.op("dls_test_reg::axpy_", k, **decl)  # the name is free again
    again(1.0, x, y)
    assert torch.equal(y, 2 * x)
    dt.remove("dls_test_reg::axpy_")


def test_kernels_per_device_from_a_function_of_the_device():
    made = []

    def kernel_for(device):
        made.append(device)
        return dlstream.builtin_function("dls_axpy_f32", device)

    op = dt.op("dls_test_fac::axpy_", {"cpu": kernel_for}, signature="u64, float, cp, p", params="n, a, x, y",
               compute={"n": dt.numel("x")}, grid=1, block=64)
    x, y = torch.ones(8), torch.zeros(8)
    op(1.0, x, y)
    op(1.0, x, y)
    assert made == [torch.device("cpu")] and torch.equal(y, 2 * x)
    dt.remove("dls_test_fac::axpy_")
    bad = dt.op("dls_test_fac::bad", {"cpu": lambda d: dlstream.builtin_function("dls_fill", d)},
                signature="u64,f32,cp,p", params="n, a, x, y", compute={"n": dt.numel("x")}, grid=1, block=64)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"dls_test_fac::bad: the kernel function gave "
                                                            r".*expected a Function with signature 'u64,f32,cp,p'"):
        bad(1.0, x, y)
    dt.remove("dls_test_fac::bad")
