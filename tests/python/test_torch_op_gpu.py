# SPDX-License-Identifier: Apache-2.0
"""dlstream.torch on CUDA (skipped, with the reason, without torch or a CUDA device): opcheck,
torch.compile(fullgraph=True) with Inductor, mode="reduce-overhead" and torch.cuda.graph capturing the operators,
autograd with a backward kernel, a function mixing dlstream operators (built-ins and a kernel from source) with
torch's, all compared with eager results; and the stream the operators run on (torch's current one), shown with the
latch and negative controls."""
import pytest

import dlstream
from conftest import TORCH_CUDA, needs_torch_cuda, passes, torch

pytestmark = needs_torch_cuda

DEV = "cuda:0"
N = 1 << 16
TIMEOUT = 20.0

if TORCH_CUDA:
    import dlstream.torch as dt
    from torchop_kernels import Ops, bits
    QUARTER = bits(0.25, torch.float32)


@pytest.fixture(scope="module")
def ops():
    x = torch.ones(1024, device="cuda")  # torch's kernels loaded before any latch holds a stream
    (x * 2).relu().sum().item()
    o = Ops("dls_test_cuda", DEV)
    yield o
    o.remove()


@pytest.fixture
def need_mul(ops):
    if ops.mul is None:
        pytest.skip("no kernels from source: " + ops.no_mul)


def mixed(ops, x, y):
    """Three or four dlstream operators (a mutating built-in, an output with a computed element count, a built-in
    with a computed element size, a kernel from source) between torch operators; no input is written."""
    z = y * 2
    ops.axpy_(1.5, x, z)
    w = ops.scale(0.5, torch.relu(z - 3))
    t = torch.empty_like(w)
    ops.fill_(t, QUARTER)
    m = ops.mul(w, t) if ops.mul is not None else w * t
    return (m * 3 + w).relu()  # elementwise: no reduction whose order could differ


def inputs():
    g = torch.Generator(device="cuda").manual_seed(7)
    return torch.randn(N, device="cuda", generator=g), torch.randn(N, device="cuda", generator=g)


def test_opcheck(ops, need_mul):
    x, y = inputs()
    torch.library.opcheck(ops.axpy_, (1.5, x, y.clone()))
    torch.library.opcheck(ops.scale, (2.0, x.clone().requires_grad_()))
    torch.library.opcheck(ops.fill_, (torch.zeros(N, dtype=torch.int32, device="cuda"), 3))
    torch.library.opcheck(ops.mul, (x, y))


def test_eager_results(ops, need_mul):
    x, y = inputs()
    y0 = y.clone()
    ops.axpy_(2.0, x, y)
    torch.testing.assert_close(y, y0 + 2 * x)
    torch.testing.assert_close(ops.scale(3.0, x), 3 * x)
    torch.testing.assert_close(ops.mul(x, y), x * y)
    assert ops.mul(x, y).device == x.device


def test_fullgraph_compile_equals_eager(ops):
    x, y = inputs()
    eager = mixed(ops, x, y)
    compiled = torch.compile(lambda a, b: mixed(ops, a, b), fullgraph=True)  # a graph break would raise
    for _ in range(2):
        torch.testing.assert_close(compiled(x, y), eager)

    def writes_an_input(a, b):
        ops.axpy_(2.0, a, b)
        return b.relu()

    b1, b2 = y.clone(), y.clone()
    r1 = writes_an_input(x, b1)
    r2 = torch.compile(writes_an_input, fullgraph=True)(x, b2)
    torch.testing.assert_close(r2, r1)
    torch.testing.assert_close(b2, b1)


def test_reduce_overhead_captures_the_operators(ops):
    from torch._dynamo.utils import counters
    counters.clear()
    x, y = inputs()
    eager = mixed(ops, x, y)
    compiled = torch.compile(lambda a, b: mixed(ops, a, b), mode="reduce-overhead", fullgraph=True)
    for _ in range(4):  # warm-up, record, replays
        got = compiled(x, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(got, eager)
    assert not counters["inductor"]["cudagraph_skips"], "CUDA graphs were skipped"
    x.mul_(-1)  # replays read the new inputs
    torch.testing.assert_close(compiled(x, y), mixed(ops, x, y))


def test_torch_cuda_graph_captures_the_operators(ops):
    x, y = inputs()
    mixed(ops, x, y)  # kernels loaded, torch's allocator warm
    static_y = y.clone()
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        out = mixed(ops, x, y)
        ops.axpy_(1.0, x, static_y)
    torch.cuda.synchronize()
    assert torch.equal(static_y, y), "captured, not run: the operators ran on the capturing stream"
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, mixed(ops, x, y))
    torch.testing.assert_close(static_y, y + x)
    x.mul_(2)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, mixed(ops, x, y))


def test_autograd_with_a_backward_kernel(ops):
    x, _ = inputs()

    def loss(v):
        return ops.scale(3.0, v).pow(2).sum()

    a = x.clone().requires_grad_()
    loss(a).backward()
    ref = x.clone().requires_grad_()
    (3.0 * ref).pow(2).sum().backward()
    torch.testing.assert_close(a.grad, ref.grad)
    b = x.clone().requires_grad_()
    torch.compile(loss, fullgraph=True)(b).backward()
    torch.testing.assert_close(b.grad, ref.grad)


def values_while_held(stream, queue, *tensors):
    """Holds `stream` (a dlstream Stream) with a latch, runs queue(), and returns each tensor's first element as
    torch's current stream sees it before the latch opens; then opens the latch and waits for `stream`."""
    latch = dlstream.Latch(DEV)
    latch.wait(stream, timeout=TIMEOUT)
    try:
        queue()
        torch.cuda.current_stream().synchronize()
        return [float(t[0].item()) for t in tensors]
    finally:
        latch.open()
        stream.synchronize()
        latch.check()
        latch.close()


@pytest.mark.parametrize("under_side", [True, False])
def test_the_operator_runs_on_torchs_current_stream(ops, under_side):
    """Under torch.cuda.stream(side), with side held by a latch, the operator waits; the negative control (no
    stream context) runs on the default stream at once."""
    side = torch.cuda.Stream()
    x = torch.ones(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    ops.axpy_(1.0, x, y)
    torch.cuda.synchronize()

    def queue():
        if under_side:
            with torch.cuda.stream(side):
                ops.axpy_(1.0, x, y)
        else:
            ops.axpy_(1.0, x, y)

    (early,) = values_while_held(dlstream.Stream.wrap(side), queue, y)
    assert early == (1.0 if under_side else 2.0), "held on side" if under_side else "ran on the default stream"
    assert torch.equal(y, torch.full_like(y, 2.0))


def _operator_in_use_stream(ops, carried, alive):
    """With a dlstream stream s held by a latch, ``ops.axpy_`` inside ``use_stream(s)``; returns (what y reads on a
    side stream ordered after torch's own stream as it was inside the block, while s is still held; whether an event
    torch's stream records after the block is held back by s). ``carried`` False takes torch out of the frameworks a
    block carries (the negative control). torch's stream here is the legacy default stream, whose query() answers
    for other streams' work too: the test asks events, never the stream."""
    keep = list(dlstream._carry._CARRIERS)
    if not carried:
        dlstream._carry._CARRIERS[:] = [c for c in keep if c.module != "torch"]
    s = dlstream.Stream(DEV)
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    x = torch.ones(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    alive += [x, y]  # alive until the test ends: the next call's tensors get memory with no record of this one's uses
    torch.cuda.synchronize()
    latch = dlstream.Latch(DEV)
    latch.wait(s, timeout=TIMEOUT)
    try:
        with dlstream.use_stream(s):
            ops.axpy_(1.0, x, y)
            inside = torch.cuda.Event()
            inside.record(cur)  # torch's own stream, as it is in the block: the operator's launch is before it or on s
        after = torch.cuda.Event()
        after.record(cur)
        joined = not passes(after.query, seconds=5.0)  # a bounded poll: the operator's own kernel takes a moment
        side.wait_event(inside)
        with torch.cuda.stream(side):
            early = float(y[0].item())  # side's copy and synchronize: s stays held
    finally:
        dlstream._carry._CARRIERS[:] = keep
        latch.open()
        s.synchronize()
        latch.check()
        latch.close()
    s.close()
    torch.cuda.synchronize()
    assert float(y[0].item()) == 1.0
    return early, joined


def test_inside_use_stream_the_operator_runs_on_the_blocks_stream(ops):
    """use_stream(s) makes s torch's current stream (blocks carry the frameworks), so a dlstream.torch operator in
    the block runs on s, as torch's own ops there do, and torch's stream waits for s at the block's exit: with s
    held, y still reads 0 and torch's stream is held after the block. The negative control, torch not carried, runs
    the operator on torch's own stream: y reads 1 while s is still held."""
    alive = []
    assert _operator_in_use_stream(ops, True, alive) == (0.0, True)
    # The control asks only where the operator ran: on an H200 (2026-11-29) torch's legacy stream was still held
    # after the block without the carrier too (an order this test does not pin down).
    assert _operator_in_use_stream(ops, False, alive)[0] == 1.0, "control: the operator on torch's stream"


def test_a_kernel_without_a_signature_is_refused():
    ptx = (".version 7.0\n.target sm_70\n.address_size 64\n"
           ".visible .entry touch(.param .u64 p0) {\n  ret;\n}\n")
    f = dlstream.Module(ptx.encode(), device=DEV).function("touch")
    with pytest.raises(dlstream.InvalidArgumentError, match=r"dlstream.torch.op\('dls_test_cuda::touch'\): the "
                                                            "kernel has no signature"):
        dt.op("dls_test_cuda::touch", f, grid=1, block=1)
    touch = dt.op("dls_test_cuda::touch", dlstream.Module(ptx.encode(), device=DEV).function("touch", "p"),
                  params="t", grid=1, block=1)
    touch(torch.zeros(1, device="cuda"))
    torch.cuda.synchronize()
    dt.remove("dls_test_cuda::touch")


def test_the_kernel_of_another_device_is_named(ops):
    if torch.cuda.device_count() < 2:
        pytest.skip("one CUDA device: the operator's kernels are all on cuda:0")
    x = torch.ones(8, device="cuda:1")
    with pytest.raises(dlstream.InvalidDeviceError, match=r"dls_test_cuda::axpy_.*give a function of the device"):
        ops.axpy_(1.0, x, x.clone())
