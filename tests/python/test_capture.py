# SPDX-License-Identifier: Apache-2.0
"""Graph capture from Python: dlstream.capture on the CPU backend (here and in CI) and on CUDA, and dlstream's
work inside torch.cuda.graph and torch.compile(mode="reduce-overhead") on the GPU."""
import numpy as np
import pytest

import dlstream
from conftest import TORCH_CUDA, needs_torch_cuda, torch

N = 1024
BACKENDS = ["cpu:0", pytest.param("cuda:0", marks=pytest.mark.skipif(
    dlstream.device_count("cuda") == 0, reason="no CUDA device: " + dlstream.backend_available("cuda")[1]))]


def tensor(dev, value, stream):
    t = dlstream.empty(N, "float32", device=dev, stream=stream)
    dlstream.fill(t, value, stream=stream)
    return t


def host(t, stream):
    stream.synchronize()
    if t.device.startswith("cpu"):
        return np.from_dlpack(t).copy()
    return torch.from_dlpack(t).cpu().numpy()


@pytest.mark.parametrize("dev", BACKENDS)
def test_launches_and_builtins_replay(dev, no_leaks):
    s = dlstream.Stream(dev)
    x, y = tensor(dev, 1.0, s), tensor(dev, 0.0, s)
    with dlstream.capture(s) as g:
        dlstream.axpy(2.0, x, y)                       # no stream=: the capture's stream
        dlstream.fill(x, 1.0)
    assert dlstream.capture_status(s) == "none"
    assert (host(y, s) == 0.0).all(), "captured work ran before any replay"
    for i in range(1, 4):
        g.replay()
        assert (host(y, s) == 2.0 * i).all()
    assert g.replays == 3
    g.close()
    x.close(), y.close(), s.close()


@pytest.mark.parametrize("dev", BACKENDS)
def test_owned_capture_stream_and_replay_elsewhere(dev, no_leaks):
    s = dlstream.Stream(dev)
    x, y = tensor(dev, 1.0, s), tensor(dev, 0.0, s)
    s.synchronize()
    with dlstream.capture(device=dev) as g:
        assert dlstream.capture_status(g.stream) == "active"
        assert dlstream.current_stream(dev) == g.stream
        dlstream.axpy(1.0, x, y)
    g.replay(stream=s)
    g.replay(stream=s)
    assert (host(y, s) == 2.0).all()
    g.close()
    x.close(), y.close(), s.close()


@pytest.mark.parametrize("dev", BACKENDS)
def test_empty_and_close_temporaries_inside_a_capture(dev, no_leaks):
    s = dlstream.Stream(dev)
    y = tensor(dev, 0.0, s)
    with dlstream.capture(s) as g:
        for _ in range(2):
            t = dlstream.empty(N, "float32", device=dev)   # allocated on the capture's stream
            dlstream.fill(t, 5.0)
            dlstream.axpy(1.0, t, y)
            t.close()
    for _ in range(3):
        g.replay()
    assert (host(y, s) == 30.0).all()
    g.close()
    y.close(), s.close()


@pytest.mark.parametrize("dev", BACKENDS)
def test_stream_parallel_with_a_nested_group(dev, no_leaks):
    if dev.startswith("cuda") and TORCH_CUDA:
        torch.cuda.init()  # the branches carry torch's (eager) current stream whatever ran before in this process
    s = dlstream.Stream(dev)
    x, a, b, c = tensor(dev, 1.0, s), tensor(dev, 0.0, s), tensor(dev, 0.0, s), tensor(dev, 0.0, s)
    s.synchronize()
    with dlstream.capture(s) as g:
        with dlstream.stream_parallel():
            with dlstream.branch():
                dlstream.axpy(1.0, x, a)
            with dlstream.branch():
                dlstream.axpy(2.0, x, b)
                with dlstream.stream_parallel():
                    with dlstream.branch():
                        dlstream.axpy(3.0, x, c)
        dlstream.axpy(1.0, c, a)
    for _ in range(3):
        g.replay()
    assert (host(b, s) == 6.0).all()
    assert (host(c, s) == 9.0).all()
    assert (host(a, s) == 21.0).all()
    g.close()
    for t in (x, a, b, c):
        t.close()
    s.close()


def test_blocks_in_a_capture_carry_a_framework_without_tying_its_eager_stream(carried, no_leaks):
    """Branches and use_stream blocks inside dlstream.capture carry the framework's current stream (the fake
    framework's, eager: the legacy default stream) but tie nothing to it: a capture is never tied to eager work. It
    failed with StateError ("never tied") at the branch's fork when blocks carried torch (run D-3)."""
    dev = "cpu:0"
    s = dlstream.Stream(dev)
    x, a = tensor(dev, 1.0, s), tensor(dev, 0.0, s)
    s.synchronize()
    seen = []
    with dlstream.capture(s) as g:
        with dlstream.stream_parallel():
            with dlstream.branch() as b:
                seen.append(carried.current_stream() == b.ptr)
                dlstream.axpy(1.0, x, a)
        with dlstream.use_stream(s):
            seen.append(carried.current_stream() == s.ptr)
            dlstream.axpy(1.0, x, a)
    assert seen == [True, True] and carried.current_stream() == 0
    assert (host(a, s) == 0.0).all(), "captured work ran before any replay"
    for i in range(1, 3):
        g.replay()
        assert (host(a, s) == 2.0 * i).all()
    g.close()
    x.close(), a.close(), s.close()


@pytest.mark.parametrize("dev", BACKENDS)
def test_hundred_launches_in_one_capture(dev, no_leaks):
    s = dlstream.Stream(dev)
    x, y = tensor(dev, 1.0, s), tensor(dev, 0.0, s)
    with dlstream.capture(s) as g:
        for _ in range(100):
            dlstream.axpy(1.0, x, y)
    g.replay()
    g.replay()
    assert (host(y, s) == 200.0).all()
    g.close()
    x.close(), y.close(), s.close()


@pytest.mark.parametrize("dev", BACKENDS)
def test_deferred_release_pending_when_the_capture_starts(dev, no_leaks):
    """A borrowed array used on a held stream is released only after that stream passes; a capture begun
    meanwhile never polls for it (on a GPU that would invalidate a global capture). The held stream only reads x
    through the view (an alias of x): a write there would race with the replay's read of x, as eager uses and
    captured ones are not ordered against each other (docs/semantics.md)."""
    s, held = dlstream.Stream(dev), dlstream.Stream(dev)
    x, y = tensor(dev, 1.0, s), tensor(dev, 0.0, s)
    z = tensor(dev, 0.0, held)
    s.synchronize()
    held.synchronize()
    latch = dlstream.Latch(dev)
    latch.wait(held, timeout=20.0)
    view = dlstream.from_dlpack(x)           # a borrowed view of x, read on the held stream
    dlstream.axpy(0.0, view, z, stream=held)
    view.close()
    assert dlstream._dlstream._deferred_pending() >= 1
    with dlstream.capture(s) as g:
        for _ in range(70):
            dlstream.axpy(1.0, x, y)
        latch.open()
    g.replay()
    held.synchronize()
    assert (host(y, s) == 70.0).all()
    latch.close()
    g.close()
    x.close(), y.close(), z.close(), held.close(), s.close()


@pytest.mark.parametrize("dev", BACKENDS)
def test_refusals_leave_the_capture_valid(dev, no_leaks):
    s = dlstream.Stream(dev)
    y = tensor(dev, 0.0, s)
    other = dlstream.Stream(dev)
    latch = dlstream.Latch(dev)
    with dlstream.capture(s) as g:
        with pytest.raises(dlstream.StateError, match="being recorded"):
            s.synchronize()
        with pytest.raises(dlstream.StateError, match="never tied"):
            other.wait(s)
        with pytest.raises(dlstream.StateError, match="latches are refused"):
            latch.wait(s, timeout=1.0)
        dlstream.fill(y, 3.0)
    g.replay()
    assert (host(y, s) == 3.0).all()
    with pytest.raises(dlstream.InvalidArgumentError, match="mode"):
        with dlstream.capture(s, mode="sometimes"):
            pass
    with pytest.raises(dlstream.ArgumentTypeError):
        with dlstream.capture(s, mode=1.5):
            pass
    with pytest.raises(dlstream.StateError, match="has not ended"):
        dlstream.capture(s).replay()
    with pytest.raises(ZeroDivisionError):       # the block's own error wins; the capture is dropped
        with dlstream.capture(s):
            dlstream.fill(y, 1.0)
            1 / 0
    assert dlstream.capture_status(s) == "none"
    latch.close()
    g.close()
    y.close(), other.close(), s.close()


# ---- torch.cuda.graph and torch.compile ----

@pytest.fixture
def torch_warm():
    x = torch.ones(N, device="cuda")
    (x * 2).sum()
    torch.cuda.synchronize()


@needs_torch_cuda
def test_under_torch_cuda_graph_launches_builtins_temporaries(torch_warm):
    x = torch.ones(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        dlstream.axpy(2.0, x, y)                                     # torch's capturing stream
        t = dlstream.empty(N, "float32", device="cuda:0", stream=torch.cuda.current_stream())
        dlstream.fill(t, 1.0)                                        # t's stream: the capture's
        dlstream.axpy(1.0, t, y)
        t.close()                                                    # freed inside the capture
    torch.cuda.synchronize()
    assert torch.equal(y, torch.zeros_like(y)), "captured work ran eagerly"
    for i in range(1, 4):
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, torch.full_like(y, 3.0 * i))


@needs_torch_cuda
def test_under_torch_cuda_graph_stream_parallel_and_hundred_launches(torch_warm):
    x = torch.ones(N, device="cuda")
    a, b, c = (torch.zeros(N, device="cuda") for _ in range(3))
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        with dlstream.stream_parallel():
            with dlstream.branch():
                dlstream.axpy(1.0, x, a)
            with dlstream.branch():
                dlstream.axpy(2.0, x, b)
                with dlstream.stream_parallel():
                    with dlstream.branch():
                        dlstream.axpy(3.0, x, c)
        for _ in range(100):
            dlstream.axpy(0.01, x, a)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert torch.allclose(b, torch.full_like(b, 6.0))
    assert torch.allclose(c, torch.full_like(c, 9.0))
    assert torch.allclose(a, torch.full_like(a, 6.0), atol=1e-3)


@needs_torch_cuda
def test_under_torch_cuda_graph_export_and_import(torch_warm):
    src = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.zeros(N, device="cuda")
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        view = dlstream.from_dlpack(src)                 # import from torch inside the capture
        t = dlstream.empty(N, "float32", device="cuda:0", stream=torch.cuda.current_stream())
        dlstream.copy(t, view)
        as_torch = torch.from_dlpack(t)                  # export to torch inside the capture
        out.add_(as_torch)
        del as_torch
        view.close()
        t.close()
    for _ in range(2):
        g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * src)


@needs_torch_cuda
def test_under_torch_cuda_graph_deferred_release_pending(torch_warm):
    held = dlstream.Stream("cuda:0")
    latch = dlstream.Latch("cuda:0")
    x = torch.ones(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    latch.wait(held, timeout=20.0)
    dlstream.axpy(0.0, x, x, stream=held)                # keeps x alive until held passes: a deferred release
    assert dlstream._dlstream._deferred_pending() >= 1
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(130):                             # launches poll now and then: never inside the capture
            dlstream.axpy(1.0, x, y)
    latch.open()
    g.replay()
    torch.cuda.synchronize()
    held.synchronize()
    assert torch.equal(y, torch.full_like(y, 130.0))
    latch.close()
    held.close()


@needs_torch_cuda
def test_torch_tensor_on_capturing_stream_with_a_non_capturing_dlstream_stream_is_refused(torch_warm):
    mine = dlstream.Stream("cuda:0")
    x = torch.ones(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        with pytest.raises(dlstream.StateError, match="never tied"):
            dlstream.axpy(1.0, x, y, stream=mine)
        dlstream.axpy(1.0, x, y)                         # the capture is still valid
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, torch.ones_like(y))
    mine.close()


@needs_torch_cuda
def test_dlstream_custom_op_under_torch_compile_reduce_overhead(torch_warm):
    @torch.library.custom_op("dlstream_test::axpy", mutates_args=("y",))
    def axpy_op(a: float, x: torch.Tensor, y: torch.Tensor) -> None:
        dlstream.axpy(a, x, y)

    @axpy_op.register_fake
    def _(a, x, y):
        return None

    def step(x, y):
        z = y.clone()
        axpy_op(2.0, x, z)
        return z * 1.5

    x = torch.arange(N, dtype=torch.float32, device="cuda")
    y = torch.ones(N, device="cuda")
    eager = step(x, y)
    compiled = torch.compile(step, mode="reduce-overhead")
    for _ in range(4):                                   # warm-up, record, then replays
        got = compiled(x, y)
    torch.cuda.synchronize()
    assert torch.equal(got, eager)


def test_the_capture_example_runs():
    import pathlib

    from conftest import run_python
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "capture.py"
    r = run_python(path.read_text(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "10 replays, y = 25.0" in r.stdout


@needs_torch_cuda
def test_after_a_torch_capture_the_legacy_stream_is_usable_again(torch_warm):
    """dlstream saw torch's capture (it launched on the capturing stream); once torch ended it, work on torch's
    default (legacy) stream is no longer refused."""
    x = torch.ones(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        dlstream.axpy(1.0, x, y)
    assert torch.cuda.current_stream().cuda_stream == 0
    dlstream.axpy(1.0, x, y)                             # torch's default stream is the legacy stream
    torch.cuda.synchronize()
    assert torch.equal(y, torch.ones_like(y))


# The capture's dependency sets and a node's parents, read through the driver (a latch cannot be captured, so the
# ordering inside a graph is checked on the graph itself).
CAPTURE_EDGE = """
import ctypes, torch, dlstream
cu = ctypes.CDLL("libcuda.so.1")
P = ctypes.c_void_p

def last_nodes(stream):
    status, cid, graph, nodes, edges, n = ctypes.c_int(), ctypes.c_uint64(), P(), ctypes.POINTER(P)(), P(), ctypes.c_size_t()
    r = cu.cuStreamGetCaptureInfo_v3(P(stream.cuda_stream), ctypes.byref(status), ctypes.byref(cid), ctypes.byref(graph),
                                     ctypes.byref(nodes), ctypes.byref(edges), ctypes.byref(n))
    assert r == 0 and status.value == 1, (r, status.value)
    return [nodes[i] for i in range(n.value)]

def parents(node):
    # cuGraphNodeGetDependencies (node, deps, count); CUDA 13's takes edge data too: the first that answers
    for get, extra in ((getattr(cu, "cuGraphNodeGetDependencies_v2", None), (None,)), (cu.cuGraphNodeGetDependencies, ())):
        n = ctypes.c_size_t(0)
        if get is None or get(P(node), None, *extra, ctypes.byref(n)) != 0:
            continue
        if n.value == 0:
            return []
        got = (P * n.value)()
        r = get(P(node), got, *extra, ctypes.byref(n))
        assert r == 0, r
        return [got[i] for i in range(n.value)]
    raise AssertionError("the driver gave no node's dependencies")

def ancestors(nodes):
    seen, todo = set(), list(nodes)
    while todo:
        for p in parents(todo.pop()):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen

cap, side = torch.cuda.Stream(), torch.cuda.Stream()
t = dlstream.empty(1024, "float32", device="cuda:0", stream=cap)    # eager memory of torch's capture stream
out = dlstream.empty(1024, "float32", device="cuda:0", stream=side)
dlstream.fill(t, 1.0)
dlstream.fill(out, 0.0)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=cap):
    side.wait_stream(cap)                  # the side stream joins the capture before the write
    dlstream.fill(t, 7.0, stream=cap)      # t on its own stream, used there alone so far
    written = last_nodes(cap)
    dlstream.copy(out, t, stream=side)     # must follow the write in the graph
    read = last_nodes(side)
    ordered = set(written) <= ancestors(read)   # while the capture's graph exists (torch drops it at the end)
    cap.wait_stream(side)
g.replay()
torch.cuda.synchronize()
print(ordered, torch.from_dlpack(out)[-1].item())
"""


@needs_torch_cuda
@pytest.mark.parametrize("rule_off", [False, True], ids=["rule", "negative-control"])
def test_in_torch_cuda_graph_a_side_stream_read_follows_the_capture_streams_write(rule_off):
    """Memory dlstream allocated eagerly on torch's capture stream, written in a torch.cuda.graph capture on that
    stream while no other stream used it (dlstream then does not ask the driver whether the stream captures), then
    read on a side stream forked into the capture: in the graph the read must depend on the write. With the rule
    off (DLSTREAM_TEST_NO_HAZARDS=1, the negative control) nothing orders them."""
    from conftest import RULE_OFF, run_python
    r = run_python(CAPTURE_EDGE, env=RULE_OFF if rule_off else None, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    ordered, value = r.stdout.strip().splitlines()[-1].split()
    assert ordered == ("False" if rule_off else "True"), f"rule {'off' if rule_off else 'on'}: ordered={ordered}"
    if not rule_off:
        assert float(value) == 7.0, f"the replay's read saw {value}"
