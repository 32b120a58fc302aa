# SPDX-License-Identifier: Apache-2.0
"""GPU tests with torch and CuPy (skipped, with the reason, where they or CUDA are missing). Ordering is shown with
the latch built-in and negative controls; nothing sleeps to synchronize."""
import numpy as np
import pytest

import dlstream
from conftest import CUPY_CUDA, TORCH_CUDA, cupy, needs_cuda, needs_cupy_cuda, needs_torch_cuda, torch

DEV = "cuda:0"
TIMEOUT = 20.0


@pytest.fixture(scope="module", autouse=True)
def _kernels_loaded():
    """CUDA lazy loading (the default since 12.2) loads a kernel at its first launch, and that load may wait
    for the whole device to go idle: a latch holding a stream would then hold the load until it times out.
    Every test here holds streams with latches, so load the torch kernels they use first."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        return
    x = torch.ones(1024, device="cuda")
    y = torch.zeros_like(x)
    y.add_(x * 2)
    torch.equal(y, torch.full_like(y, 2.0))
    y.copy_(x)
    torch.cuda.synchronize()


@pytest.fixture
def axpy():
    return dlstream.builtin_function("dls_axpy_f32", DEV)


@needs_torch_cuda
def test_launch_on_torch_current_stream_runs_on_side(axpy):
    """Under torch.cuda.stream(side) a launch with no stream= runs on side: hold side, nothing happens."""
    side = torch.cuda.Stream()
    x = torch.ones(1024, device="cuda")
    y = torch.zeros(1024, device="cuda")
    torch.cuda.synchronize()
    latch = dlstream.Latch(DEV)
    latch.wait(dlstream.Stream.wrap(side), timeout=TIMEOUT)
    with torch.cuda.stream(side):
        axpy.launch(4, 256, 1024, 2.0, x, y)
    torch.cuda.current_stream().synchronize()  # the default stream is free: the launch was not there
    assert not side.query(), "the launch sits on side, behind the latch"
    latch.open()
    side.synchronize()
    assert torch.equal(y, torch.full_like(y, 2.0))
    latch.check()
    latch.close()


@needs_torch_cuda
@pytest.mark.parametrize("under_side", [True, False])
def test_planned_launches_follow_torchs_current_stream(axpy, under_side):
    """Launches shaped like the last take the Function's plan, which still asks torch for its current stream at
    each call: the launch under torch.cuda.stream(side) sits behind side's latch; the negative control (no
    stream context) runs on the default stream at once."""
    side = torch.cuda.Stream()
    x = torch.ones(1024, device="cuda")
    y = torch.zeros(1024, device="cuda")
    for _ in range(3):
        axpy.launch(4, 256, 1024, 1.0, x, y)
    assert axpy._planned
    torch.cuda.synchronize()
    latch = dlstream.Latch(DEV)
    latch.wait(dlstream.Stream.wrap(side), timeout=TIMEOUT)
    if under_side:
        with torch.cuda.stream(side):
            axpy.launch(4, 256, 1024, 1.0, x, y)
    else:
        axpy.launch(4, 256, 1024, 1.0, x, y)
    torch.cuda.current_stream().synchronize()
    early = float(y[0].item())
    latch.open()
    side.synchronize()
    latch.check()
    latch.close()
    assert early == (3.0 if under_side else 4.0), "held on side" if under_side else "ran on the default stream"
    assert torch.equal(y, torch.full_like(y, 4.0))


def _producer_consumer(ordered_by_dlstream):
    """torch writes x on producer stream p (held by a latch); dlstream reads x on its own stream s."""
    p = torch.cuda.Stream()
    s = dlstream.Stream(DEV)
    copy = dlstream.builtin_function("dls_copy_strided", DEV)
    src = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    latch = dlstream.Latch(DEV)
    latch.wait(dlstream.Stream.wrap(p), timeout=TIMEOUT)
    with torch.cuda.stream(p):
        src.fill_(1)  # queued behind the latch
    desc = np.array([1, 4], np.uint32).tobytes() + np.array([1] + [0] * 7 + [1] + [0] * 7 + [1] + [0] * 7,
                                                            np.int64).tobytes()
    if ordered_by_dlstream:
        with torch.cuda.stream(p):  # the framework's current stream is p: dlstream makes s wait for it
            copy.launch(1, 1, out, src, desc, stream=s)
        assert not s.query()
    else:
        copy.launch(1, 1, out.data_ptr(), src.data_ptr(), desc, stream=s)  # raw pointers: no handshake
        s.synchronize()
    early = int(out.item()) if not ordered_by_dlstream else None
    latch.open()
    torch.cuda.synchronize()
    s.synchronize()
    late = int(out.item())
    latch.close()
    s.close()
    return early, late


@needs_torch_cuda
def test_torch_producer_dlstream_consumer_ordered():
    assert _producer_consumer(True)[1] == 1


@needs_torch_cuda
def test_torch_producer_negative_control():
    assert _producer_consumer(False)[0] == 0, "raw pointers on another stream read early: the check can fail"


@needs_torch_cuda
def test_our_tensor_consumed_by_torch_on_another_stream():
    """We fill t on s behind a latch; torch imports t with its current stream c: c must wait for s."""
    # CUDA lazy loading: the first launch of a kernel not loaded yet may wait for the whole device to go
    # idle, i.e. for the latch below to time out. Load torch's multiply kernel before holding a stream.
    (torch.ones(1024, device="cuda") * 2).sum().item()
    # torch's first stream of a process sets up its stream pool, which waited for the device (the latch's 20 s
    # timeout on the H200, torch 2.11, when this test ran first in its process): made before anything is held.
    c = torch.cuda.Stream()
    s = dlstream.Stream(DEV)
    t = dlstream.empty(1024, "float32", device=DEV, stream=s)
    latch = dlstream.Latch(DEV)
    latch.wait(s, timeout=TIMEOUT)
    dlstream.fill(t, 3.0, stream=s)

    class Spy:  # records how torch calls the producer side of the handshake
        calls = []

        def __dlpack_device__(self):
            return t.__dlpack_device__()

        def __dlpack__(self, *a, **k):
            Spy.calls.append((a, k))
            return t.__dlpack__(*a, **k)

    with torch.cuda.stream(c):
        tt = torch.from_dlpack(Spy())  # __dlpack__(stream=c): c waits for s
        out = tt * 2
    assert not s.query(), "our stream is held by the latch"
    assert not c.query(), (f"torch's stream waits for ours: torch called __dlpack__ with {Spy.calls}, "
                           f"c={c.cuda_stream:#x}, s={s.ptr:#x}")
    latch.open()
    c.synchronize()
    assert torch.equal(out, torch.full_like(out, 6.0))
    del tt, out
    t.close()
    latch.close()
    s.close()


@needs_torch_cuda
def test_temporary_on_side_stream_is_not_reused_early():
    """A tensor allocated on s and used on side stays allocated until side passes, though t is released at once."""
    s = dlstream.Stream(DEV)
    side = dlstream.Stream(DEV)
    t = dlstream.empty(1 << 20, "float32", device=DEV, stream=s)
    dlstream.fill(t, 1.0, stream=s)
    side.wait(s)
    latch = dlstream.Latch(DEV)
    latch.wait(side, timeout=TIMEOUT)
    y = torch.zeros(1 << 20, device="cuda")
    dlstream.axpy(1.0, t, y, stream=side)  # reads t on side, behind the latch
    t.close()  # freed in stream order: s waits for side before the memory is reused
    u = dlstream.empty(1 << 20, "float32", device=DEV, stream=s)
    dlstream.fill(u, 9.0, stream=s)  # would overwrite t's memory if it were reused early
    latch.open()
    side.synchronize()
    s.synchronize()
    assert torch.equal(y, torch.ones_like(y)), "side read memory that was reused before it passed"
    u.close()
    latch.close()
    side.close()
    s.close()


@needs_torch_cuda
def test_torch_wraps_our_streams_and_we_wrap_theirs():
    s = dlstream.Stream(DEV)
    ts = torch.cuda.ExternalStream(s.ptr)
    assert ts.cuda_stream == s.ptr
    tstream = torch.cuda.Stream()
    w = dlstream.Stream.wrap(tstream)
    assert w.ptr == tstream.cuda_stream and w.kind == "foreign" and w.device == "cuda:0"
    if hasattr(torch.cuda, "StreamContext"):
        with torch.cuda.stream(ts):
            x = torch.ones(4, device="cuda")
        s.synchronize()
        assert x.sum().item() == 4
    assert dlstream.Stream.wrap(torch.cuda.default_stream()).kind == "legacy"
    w.close()
    s.close()


@needs_torch_cuda
def test_torch_event_wrapped_and_waited_on():
    p = torch.cuda.Stream()
    s = dlstream.Stream(DEV)
    latch = dlstream.Latch(DEV)
    latch.wait(dlstream.Stream.wrap(p), timeout=TIMEOUT)
    ev = torch.cuda.Event()
    ev.record(p)
    e = dlstream.Event.wrap(ev.cuda_event, device=DEV)
    s.wait(e)
    dlstream.spin(0, stream=s)
    assert not s.query() and not e.query()
    latch.open()
    s.synchronize()
    assert e.query()
    e.close()
    latch.close()
    s.close()


@needs_torch_cuda
def test_exchange_api_fast_path_with_torch(axpy):
    assert hasattr(torch.Tensor, "__dlpack_c_exchange_api__") or hasattr(torch.Tensor, "__c_dlpack_exchange_api__")
    x = torch.ones(1024, device="cuda")
    y = torch.zeros(1024, device="cuda")
    axpy.launch(4, 256, 1024, 2.0, x, y)
    torch.cuda.current_stream().synchronize()
    assert torch.equal(y, torch.full_like(y, 2.0))
    assert dlstream._dlstream._cache_sizes()["exchange_types"] >= 1


@needs_torch_cuda
def test_host_arrays_for_a_gpu_launch_are_staged_and_block(axpy):
    x = np.ones(1024, np.float32)
    y = np.zeros(1024, np.float32)
    axpy.launch(4, 256, 1024, 2.0, x, y, stream=dlstream.Stream.legacy(DEV))
    assert (y == 2).all(), "the call blocks and copies the result back"


@needs_cupy_cuda
def test_cupy_interop(axpy):
    s = dlstream.Stream(DEV)
    cs = cupy.cuda.ExternalStream(s.ptr)
    with cs:
        x = cupy.ones(1024, dtype=cupy.float32)
        y = cupy.zeros(1024, dtype=cupy.float32)
    axpy.launch(4, 256, 1024, 3.0, x, y, stream=s)
    s.synchronize()
    assert float(y.sum()) == 3.0 * 1024
    cstream = cupy.cuda.Stream(non_blocking=True)
    w = dlstream.Stream.wrap(cstream)
    assert w.ptr == cstream.ptr
    t = dlstream.empty(8, "float32", device=DEV, stream=s)
    dlstream.fill(t, 5.0, stream=s)
    with cstream:
        a = cupy.from_dlpack(t)
        total = float(a.sum())
    assert total == 40.0
    del a
    t.close()
    w.close()
    s.close()


@needs_cuda
def test_module_from_ptx():
    ptx = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry add1(.param .u64 p, .param .u32 n) {
  .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<5>; .reg .f32 %f<3>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x; mad.lo.s32 %r1, %r3, %r4, %r5;
  setp.ge.u32 %p1, %r1, %r2; @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4]; add.f32 %f2, %f1, 0f3F800000; st.global.f32 [%rd4], %f2;
DONE:
  ret;
}
"""
    with dlstream.Module(ptx, device=DEV) as m:
        f = m.function("add1", "p,u32")
        t = dlstream.empty(100, "float32", device=DEV)
        dlstream.fill(t, 1.0)
        f.launch(1, 128, t, 100)
        host = np.zeros(100, np.float32)
        dlstream.copy(host, t)
        assert (host == 2).all()
        t.close()
    with pytest.raises(dlstream.InvalidHandleError):
        f.launch(1, 128, 0, 100)
