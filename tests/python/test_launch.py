# SPDX-License-Identifier: Apache-2.0
"""Function.launch: signatures, argument conversion, the stream choice order, the exchange-API fast path, and
borrowed objects kept alive until the launch stream passes (ordering shown with the latch and negative controls)."""
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, held, settle


@pytest.fixture
def axpy():
    return dlstream.builtin_function("dls_axpy_f32", CPU)


def test_builtin_function_and_signature(axpy):
    assert axpy.name == "dls_axpy_f32" and axpy.device == "cpu:0" and axpy.signature == "u64,f32,cp,p"
    f = dlstream.builtin_function("dls_spin", CPU, signature="u64")
    assert f.signature == "u64" and "dls_spin" in repr(f)
    with pytest.raises(dlstream.NotFoundError, match="no such built-in") as ei:
        dlstream.builtin_function("dls_nope", CPU)
    assert isinstance(ei.value, LookupError)
    with pytest.raises(dlstream.InvalidArgumentError, match="token 1"):
        dlstream.builtin_function("dls_spin", CPU, signature="u64,q")
    with pytest.raises(TypeError):
        dlstream.builtin_function(5)


def test_launch_with_numpy_arrays(axpy, no_leaks):
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    axpy.launch(1, 8, 8, 2.0, x, y)
    settle()
    assert (y == 2 * x + 1).all()


def test_launch_grid_block_forms(axpy, no_leaks):
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    axpy.launch((1, 1, 1), (4,), 4, 1.0, x, y, shared_mem=0)
    settle()
    assert (y == 1).all()
    for bad in (0, (1, 0), (1, 2, 3, 4), "1"):
        with pytest.raises((ValueError, TypeError)):
            axpy.launch(bad, 4, 4, 1.0, x, y)
    with pytest.raises(ValueError, match="shared_mem"):
        axpy.launch(1, 4, 4, 1.0, x, y, shared_mem=-1)


def test_signature_checks_argument_types_and_count(axpy):
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    with pytest.raises(dlstream.ArgumentTypeError, match="takes 4 arguments"):
        axpy.launch(1, 4, 4, 1.0, x)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"args\[0\]=1.5\): expected an int for a u64"):
        axpy.launch(1, 4, 1.5, 1.0, x, y)
    with pytest.raises(dlstream.InvalidArgumentError, match="out of range for a u64"):
        axpy.launch(1, 4, -1, 1.0, x, y)
    with pytest.raises(dlstream.ArgumentTypeError, match="expected a tensor"):
        axpy.launch(1, 4, 4, 1.0, x, "y")
    with pytest.raises(TypeError, match="unexpected keyword"):
        axpy.launch(1, 4, 4, 1.0, x, y, strean=None)
    with pytest.raises(TypeError, match="grid and block"):
        axpy.launch(1)
    settle()


def test_numpy_scalars_convert(axpy, no_leaks):
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    axpy.launch(np.int64(1), np.int32(4), np.uint64(4), np.float32(3.0), x, y)
    settle()
    assert (y == 3).all()


def test_raw_pointers_and_dlstream_tensors(axpy, no_leaks):
    x = dlstream.empty(4, "float32", device=CPU)
    y = dlstream.empty(4, "float32", device=CPU)
    dlstream.fill(x, 1.0)
    dlstream.fill(y, 0.0)
    axpy.launch(1, 4, 4, 2.0, x.data_ptr, y)
    settle()
    assert (np.from_dlpack(y) == 2).all()
    x.close()
    with pytest.raises(dlstream.InvalidHandleError, match="released"):
        axpy.launch(1, 4, 4, 2.0, x, y)
    y.close()


def test_read_only_output_is_refused(no_leaks):
    fill = dlstream.builtin_function("dls_fill", CPU)
    a = np.zeros(4, np.int32)
    a.flags.writeable = False
    with pytest.raises(dlstream.ReadOnlyError, match=r"args\[0\]\): the tensor is read-only and dls_fill writes it$"):
        fill.launch(1, 1, a, 4, 4, 7)
    mine = dlstream.builtin_function("dls_fill", CPU, signature="p,u64,u32,u64")
    with pytest.raises(dlstream.ReadOnlyError, match=r"the signature declares args\[0\] 'p' \(written\); declare it 'cp'"):
        mine.launch(1, 1, a, 4, 4, 7)
    with pytest.raises(dlstream.ReadOnlyError, match="fill writes it"):
        dlstream.fill(a, 1)
    settle()


def test_untyped_arguments(no_leaks):
    f = dlstream.builtin_function("dls_spin", CPU, signature=None)
    assert f.signature == "u64"  # built-ins carry their signature
    g = dlstream.builtin_function("dls_fill", CPU, signature=[])
    assert g.signature == ""


# ---- the exchange API fast path ----

def fake_pair(fx, n=8, cls=None):
    cls = cls or fx.FakeTensor
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    return x, y, cls(x, x.ctypes.data, x.shape), cls(y, y.ctypes.data, y.shape)


@pytest.mark.parametrize("kind", ["FakeTensor", "FakeTensorInt"])
def test_exchange_api_fast_path(fx, axpy, kind, no_leaks):
    x, y, fxx, fyy = fake_pair(fx, cls=getattr(fx, kind))
    before = fx.counters()
    axpy.launch(1, 8, 8, 2.0, fxx, fyy)
    settle()
    after = fx.counters()
    assert (y == 2 * x + 1).all()
    assert after["dltensor"] > before["dltensor"] and after["current_stream"] > before["current_stream"]
    assert after["managed"] == before["managed"], "no capsule on the fast path"


def test_exchange_api_of_an_unknown_major_falls_back_to_dlpack(fx, axpy, no_leaks):
    x, y, fxx, fyy = fake_pair(fx, cls=fx.FakeTensorFuture)
    before = fx.counters()
    axpy.launch(1, 8, 8, 2.0, fxx, fyy)
    settle()
    after = fx.counters()
    assert (y == 2 * x + 1).all()
    assert after["managed"] == before["managed"] + 2 and after["deleter"] == before["deleter"] + 2


def test_exchange_api_failure_propagates(fx, axpy):
    x, y, fxx, fyy = fake_pair(fx)
    fx.fail_next()
    with pytest.raises(BufferError, match="fake framework"):
        axpy.launch(1, 8, 8, 2.0, fxx, fyy)
    settle()


def test_fast_path_makes_no_handles_or_objects(fx, axpy, no_leaks):
    x, y, fxx, fyy = fake_pair(fx)
    axpy.launch(1, 8, 8, 2.0, fxx, fyy)
    settle()
    handles = dlstream._dlstream._live_handles()
    rx, ry = sys.getrefcount(fxx), sys.getrefcount(fyy)
    for _ in range(1000):
        axpy.launch(1, 8, 8, 0.0, fxx, fyy)
    assert dlstream._dlstream._live_handles() == handles
    assert (sys.getrefcount(fxx), sys.getrefcount(fyy)) == (rx, ry)
    assert dlstream._dlstream._deferred_pending() == 0
    settle()


# ---- which stream ----

def test_stream_choice_order(fx, axpy, no_leaks, stream_choice_only):
    """explicit stream= > use_stream() > the framework's current stream > the legacy default stream.
    The expected stream is held by a latch: once every other stream has drained, y must still be untouched."""
    a, b, c = dlstream.Stream(CPU), dlstream.Stream(CPU), dlstream.Stream(CPU)
    leg = dlstream.Stream.legacy(CPU)
    streams = {"a": a, "b": b, "c": c, "legacy": leg}
    x, y, fxx, fyy = fake_pair(fx)

    def runs_on(name, **kw):
        y[:] = 1
        latch = held(streams[name])
        axpy.launch(1, 8, 8, 1.0, fxx, fyy, **kw)
        for n, s in streams.items():
            if n != name:
                s.synchronize()  # none of them waits for the held stream
        untouched = bool((y == 1).all())
        latch.open()
        for s in streams.values():
            s.synchronize()
        latch.close()
        assert (y == 1 + x).all()
        return untouched

    fx.set_current_stream(c.ptr)
    assert runs_on("a", stream=a)
    with dlstream.use_stream(b):
        assert runs_on("a", stream=a)
        assert runs_on("b")
        assert not runs_on("legacy"), "negative control: the check can fail"
    assert runs_on("c")
    fx.set_current_stream(0)
    assert runs_on("legacy")
    assert not runs_on("a"), "negative control"
    settle()
    for s in (a, b, c):
        s.close()
    dlstream._dlstream._clear_caches()


def test_framework_stream_is_waited_on_with_negative_control(fx, no_leaks, foreign_record_off):
    """The framework's producer stream p is held by a latch and then writes src := 1; our launch on s copies src.
    When the framework says p is current, s waits for p (out == 1); told nothing, s runs ahead (out == 0). (The
    record of foreign memory, which orders the two uses of src's memory by itself, is off.)"""
    copy = dlstream.builtin_function("dls_copy_strided", CPU)

    def run(framework_says_p):
        p, s = dlstream.Stream(CPU), dlstream.Stream(CPU)
        src = np.zeros(1, np.int32)
        out = np.zeros(1, np.int32)
        fsrc = fx.FakeTensor(src, src.ctypes.data, src.shape, 0, 32)
        latch = held(p)
        dlstream.fill(src, 1, stream=p)  # queued behind the latch
        fx.set_current_stream(p.ptr if framework_says_p else 0)
        desc = np.array([1, 4, 1, 0, 0, 0, 0, 0, 0, 0, 1] + [0] * 7 + [1] + [0] * 7, dtype=np.int64)
        desc_bytes = np.array([1, 4], np.uint32).tobytes() + desc[2:].tobytes()
        copy.launch(1, 1, out, fsrc, desc_bytes, stream=s)
        if framework_says_p:
            assert s.query() is False, "s must wait for the framework's stream"
        else:
            s.synchronize()
        got_early = int(out[0])
        latch.open()
        p.synchronize()
        s.synchronize()
        latch.close()
        fx.set_current_stream(0)
        settle()
        p.close()
        s.close()
        return got_early, int(out[0])

    assert run(True)[1] == 1
    assert run(False)[0] == 0, "without the wait s reads src before p writes it: the check above can fail"


def test_borrowed_object_lives_until_the_stream_passes(fx, axpy, no_leaks):
    """A tensor used on a stream other than its framework's is kept alive until that stream passes."""
    s = dlstream.Stream(CPU)
    x, y, fxx, fyy = fake_pair(fx)
    fx.set_current_stream(0)  # the framework's stream: legacy; ours: s
    latch = held(s)
    base = sys.getrefcount(fyy)
    axpy.launch(1, 8, 8, 1.0, fxx, fyy, stream=s)
    assert sys.getrefcount(fyy) == base + 1, "the launch holds y until s passes"
    assert dlstream._dlstream._deferred_pending() >= 1
    dlstream._dlstream._deferred_poll()
    assert sys.getrefcount(fyy) == base + 1, "still held: s has not passed"
    latch.open()
    s.synchronize()  # polls the deferred releases
    assert sys.getrefcount(fyy) == base
    latch.close()
    s.close()
    settle()


def test_same_stream_launch_keeps_nothing(fx, axpy, no_leaks):
    s = dlstream.Stream(CPU)
    x, y, fxx, fyy = fake_pair(fx)
    fx.set_current_stream(s.ptr)
    base = sys.getrefcount(fyy)
    latch = held(s)
    axpy.launch(1, 8, 8, 1.0, fxx, fyy)
    assert sys.getrefcount(fyy) == base and dlstream._dlstream._deferred_pending() == 0
    latch.open()
    s.synchronize()
    latch.close()
    fx.set_current_stream(0)
    s.close()
    dlstream._dlstream._clear_caches()


def test_numpy_capsule_released_after_the_stream_passes(axpy, no_leaks):
    s = dlstream.Stream(CPU)
    x = np.ones(8, np.float32)
    y = np.zeros(8, np.float32)
    base = sys.getrefcount(y)
    latch = held(s)
    axpy.launch(1, 8, 8, 1.0, x, y, stream=s)
    assert sys.getrefcount(y) > base, "the DLPack capsule's tensor is held while s may still run"
    latch.open()
    s.synchronize()
    assert sys.getrefcount(y) == base
    assert (y == 1).all()
    latch.close()
    s.close()


def test_other_device_tensor_is_refused(axpy):
    class GpuThing:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kw):
            raise AssertionError("not reached")

    with pytest.raises((dlstream.Error, BufferError)):
        axpy.launch(1, 8, 8, 1.0, GpuThing(), GpuThing())
