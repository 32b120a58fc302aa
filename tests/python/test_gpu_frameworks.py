# SPDX-License-Identifier: Apache-2.0
"""GPU tests of framework current streams without the DLPack C exchange API: CuPy's current stream, the
__cuda_array_interface__ of CuPy and numba-cuda with its `stream` honoured, torch through the built-in provider
(a torch build without the exchange API), JAX through the __dlpack__ handshake. Skipped, with the reason, where
the framework or CUDA is missing. Ordering is shown with latches and negative controls."""
import os

import numpy as np
import pytest

import dlstream
from conftest import CUPY_CUDA, HAVE_CUDA, TORCH_CUDA, cupy, torch

DEV = "cuda:0"
TIMEOUT = 20.0

try:
    from numba import cuda as numba_cuda
    NUMBA_CUDA = HAVE_CUDA and numba_cuda.is_available()
except Exception:  # noqa: BLE001 - any import failure means "not here"
    numba_cuda, NUMBA_CUDA = None, False
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX would take 75% of the GPU's memory
try:
    import jax
    import jax.numpy as jnp
    JAX_GPU = HAVE_CUDA and any(d.platform == "gpu" for d in jax.devices())
except Exception:  # noqa: BLE001
    jax, jnp, JAX_GPU = None, None, False

needs_cupy = pytest.mark.skipif(not CUPY_CUDA, reason="CuPy with CUDA is not installed")
needs_numba = pytest.mark.skipif(not NUMBA_CUDA, reason="numba-cuda with a CUDA device is not installed")
needs_torch = pytest.mark.skipif(not TORCH_CUDA, reason="torch with CUDA is not installed")
needs_jax = pytest.mark.skipif(not JAX_GPU, reason="JAX with a CUDA device is not installed")


@pytest.fixture
def axpy():
    return dlstream.builtin_function("dls_axpy_f32", DEV)


def held(stream_like):
    latch = dlstream.Latch(DEV)
    latch.wait(dlstream.Stream.wrap(stream_like, device=DEV), timeout=TIMEOUT)
    return latch


def host(t, stream=None):
    """t's contents, read on `stream` (default: the legacy default stream, which waits for every blocking stream:
    while a latch holds a blocking stream, such as numba's, read on a non-blocking one instead)."""
    out = np.zeros(t.shape, np.float32)
    dlstream.copy(out, t, stream=stream or dlstream.Stream.legacy(DEV))
    return out


class OnlyCai:
    """A producer that offers nothing but another array's __cuda_array_interface__ (optionally rewritten)."""

    def __init__(self, arr, **override):
        self.arr = arr
        self.override = override

    @property
    def __cuda_array_interface__(self):
        d = dict(self.arr.__cuda_array_interface__)
        d.update(self.override)
        return d


# ---- CuPy ----

@pytest.fixture
def cupy_warm():
    """Loads the CuPy kernels the tests use before any stream is held (CUDA lazy loading may otherwise make
    their first launch wait for the whole device, i.e. for the latch)."""
    x = cupy.ones(1024, dtype=cupy.float32)
    x += 1
    x *= 2
    x.fill(1)
    float(x.sum()), float(x.max()), float(x.min())  # the reductions the tests read results with, while a latch holds
    cupy.cuda.Device(0).synchronize()


@needs_cupy
def test_cupy_launch_runs_on_cupys_current_stream(axpy, cupy_warm):
    """Inside `with cupy.cuda.Stream() as s:` a launch on CuPy arrays runs on s, so CuPy work queued on s after it
    is ordered after it (y += 1 sees the launch's result)."""
    x = cupy.ones(1024, dtype=cupy.float32)
    y = cupy.zeros(1024, dtype=cupy.float32)
    cupy.cuda.Device(0).synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    latch = held(s)
    with s:
        axpy.launch(4, 256, 1024, 2.0, x, y)
        y += 1  # CuPy work on s, after the launch
    cupy.cuda.Stream.null.synchronize()
    dlstream.Stream.legacy(DEV).synchronize()
    assert not s.done, "the launch sits on s, behind the latch"
    latch.open()
    s.synchronize()
    latch.check()
    latch.close()
    assert float(y.min()) == 3.0 and float(y.max()) == 3.0


@needs_cupy
def test_cupy_negative_control(axpy, cupy_warm):
    """The same launch on another stream does not wait for s: the check above can fail."""
    x = cupy.ones(1024, dtype=cupy.float32)
    y = cupy.zeros(1024, dtype=cupy.float32)
    cupy.cuda.Device(0).synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    latch = held(s)
    # Outside `with s`: CuPy's current stream is the null stream, so nothing orders the launch after s (inside
    # it, the arrays' current stream s would rightly hold a launch on any stream).
    axpy.launch(4, 256, 1024, 2.0, x, y, stream=dlstream.Stream.legacy(DEV))
    dlstream.Stream.legacy(DEV).synchronize()
    assert float(y.max()) == 2.0 and not s.done, "ran on the legacy stream while s is held"
    latch.open()
    s.synchronize()
    latch.close()


@needs_cupy
def test_cupy_provider_is_the_builtin_one():
    assert dlstream._dlstream._stream_providers()["cupy"].__name__ == "cupy_current_stream"
    a = cupy.zeros(4, dtype=cupy.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        assert dlstream._dlstream._stream_providers()["cupy"](a) == s.ptr


@needs_cupy
def test_cupy_cai_stream_decides(axpy, cupy_warm):
    """A pure __cuda_array_interface__ producer (CuPy's interface, version 3): under `with s:` its `stream` is
    s, and the launch runs there; with the stream removed it runs on the legacy stream (negative control)."""
    x = cupy.ones(1024, dtype=cupy.float32)
    y = cupy.zeros(1024, dtype=cupy.float32)
    cupy.cuda.Device(0).synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    for say_stream in (True, False):
        y.fill(0)
        cupy.cuda.Device(0).synchronize()
        latch = held(s)
        with s:
            assert x.__cuda_array_interface__["version"] >= 3
            over = {} if say_stream else {"stream": None}
            axpy.launch(4, 256, 1024, 2.0, OnlyCai(x, **over), OnlyCai(y, **over))
        dlstream.Stream.legacy(DEV).synchronize()
        ran = float(y.max()) == 2.0
        assert ran != say_stream
        latch.open()
        s.synchronize()
        latch.close()
    dlstream._dlstream._clear_caches()


def copy_behind_producer(producer, produce, make_arg, ctx=None, expect_held=True):
    """A latch holds the producer stream; produce() queues a write of 5 on it; our copy on a stream s of ours then
    reads make_arg() (both inside `ctx`). Returns (s was held after the copy was queued, what s read when it ran
    without waiting (None if it waited), what it read once everything ran). A stream that is not held may
    simply not have run yet, so the control (expect_held=False) synchronizes s instead of asking it."""
    import contextlib
    s = dlstream.Stream(DEV)
    out = dlstream.empty(1024, "float32", device=DEV, stream=s)
    dlstream.fill(out, 0.0)
    s.synchronize()
    latch = held(producer)
    with ctx or contextlib.nullcontext():
        produce()
        dlstream.copy(out, make_arg(), stream=s)
    s_held = expect_held and not s.query()
    early = None
    if not expect_held:
        s.synchronize()  # would wait for the latch's timeout (and fail its check) if s were held
        early = host(out, s)  # on s, not the legacy stream: that one waits for a held blocking producer
    latch.open()
    dlstream.Stream.wrap(producer, device=DEV).synchronize()
    s.synchronize()
    latch.check()
    latch.close()
    late = host(out)
    out.close()
    s.close()
    dlstream._dlstream._clear_caches()
    return s_held, early, late


@needs_cupy
def test_cupy_cai_producer_is_waited_on(cupy_warm):
    """CuPy produces on p (held); our copy on s reads it through CuPy's interface, whose `stream` is p: s waits for
    p; with the stream removed it does not (negative control)."""
    src = cupy.zeros(1024, dtype=cupy.float32)
    cupy.cuda.Device(0).synchronize()

    for say_stream in (True, False):
        src.fill(0)
        p = cupy.cuda.Stream(non_blocking=True)
        cupy.cuda.Device(0).synchronize()
        arg = (lambda: OnlyCai(src)) if say_stream else (lambda: OnlyCai(src, stream=None))
        s_held, early, late = copy_behind_producer(p, lambda: src.__iadd__(5), arg, ctx=p, expect_held=say_stream)
        if say_stream:
            assert s_held and (late == 5).all(), "s waits for CuPy's stream p"
        else:
            assert (early == 0).all(), "negative control: without the stream s reads before p writes"


# ---- numba-cuda ----

def _numba_stream_ptr(ns):
    h = ns.handle
    return int(h.value) if hasattr(h, "value") and h.value is not None else int(h)


@needs_numba
def test_numba_cai_producer_stream_is_honoured():
    """numba's streams are blocking (flags 0): while the latch holds one, the legacy default stream waits for it, so
    nothing here reads on the legacy stream until the latch is open."""
    ns = numba_cuda.stream()
    tmp = numba_cuda.device_array(1024, np.float32, stream=ns)
    five = numba_cuda.to_device(np.full(1024, 5.0, np.float32))
    numba_cuda.synchronize()
    assert tmp.__cuda_array_interface__["version"] >= 3
    for honoured in (True, False):
        tmp.copy_to_device(np.zeros(1024, np.float32))
        numba_cuda.synchronize()
        arg = OnlyCai(tmp, stream=_numba_stream_ptr(ns)) if honoured else OnlyCai(tmp, stream=None)
        # numba's own write (a device-to-device copy queued on ns), not dlstream's: a dlstream call on tmp would be
        # in dlstream's record of foreign memory, which orders the copy below even without the stream.
        s_held, early, late = copy_behind_producer(_numba_stream_ptr(ns), lambda: tmp.copy_to_device(five, stream=ns),
                                                   lambda: arg, expect_held=honoured)
        if honoured:
            assert s_held and (late == 5).all(), "s waits for numba's stream"
        else:
            assert (early == 0).all(), "negative control"


@needs_numba
def test_numba_array_as_a_launch_argument(axpy):
    x = numba_cuda.to_device(np.ones(1024, np.float32))
    y = numba_cuda.to_device(np.zeros(1024, np.float32))
    numba_cuda.synchronize()
    axpy.launch(4, 256, 1024, 3.0, x, y)
    dlstream.Stream.legacy(DEV).synchronize()
    numba_cuda.synchronize()
    assert (y.copy_to_host() == 3).all()
    dlstream._dlstream._clear_caches()


# ---- torch without the exchange API (the built-in provider) ----

class TorchNoExchange:
    """A torch tensor seen as a torch build without __dlpack_c_exchange_api__ would show it."""
    __module__ = "torch.no_exchange"

    def __init__(self, t):
        self.t = t
        self.device = t.device

    def __dlpack__(self, *a, **k):
        return self.t.__dlpack__(*a, **k)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


@needs_torch
def test_torch_provider_without_the_exchange_api():
    (torch.ones(8, device="cuda") * 2).sum().item()
    y = torch.zeros(1024, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    for provider in (True, False):
        if not provider:
            dlstream.register_stream_provider("torch.no_exchange", lambda t: None)  # negative control
        y.zero_()
        torch.cuda.synchronize()
        latch = held(side)
        with torch.cuda.stream(side):
            dlstream.fill(TorchNoExchange(y), 2.0)
        # With the provider the fill sits on side, behind the latch, and the legacy stream has nothing queued.
        # Without it the fill is queued on the legacy stream, which torch's __dlpack__(stream=) makes wait for its
        # current stream, side: the legacy stream is busy. (A host wait on it would last the latch's timeout.)
        legacy_idle = dlstream.Stream.legacy(DEV).query()
        assert legacy_idle == provider, "with the provider the fill runs on side; without, on the legacy stream"
        assert not side.query(), "side is held by the latch"
        latch.open()
        side.synchronize()
        dlstream.Stream.legacy(DEV).synchronize()
        latch.close()
        assert y.sum().item() == 2.0 * 1024
    dlstream.register_stream_provider("torch.no_exchange", None)
    dlstream._dlstream._clear_caches()


# ---- JAX: no current stream; the __dlpack__ handshake orders it ----

@needs_jax
def test_jax_arrays_are_ordered_by_the_handshake():
    a = jnp.arange(1024, dtype=jnp.float32) * 2
    out = dlstream.empty(1024, "float32", device=DEV)
    dlstream.copy(out, a)  # __dlpack__(stream=<our stream>): JAX orders its work before it
    assert (host(out) == np.arange(1024, dtype=np.float32) * 2).all()
    out.close()
