# SPDX-License-Identifier: Apache-2.0
"""dlstream.Stream: owned, pooled, wrapped and default streams; the __cuda_stream__ protocol; errors."""
import numpy as np
import pytest

import dlstream
from conftest import CPU, needs_cuda


def test_owned_stream_basics(no_leaks):
    with dlstream.Stream(CPU) as s:
        assert s.kind == "owned" and s.device == "cpu:0" and not s.closed
        assert s.ptr != 0 and s.handle != 0
        s.synchronize()
        assert s.query() is True
        assert "owned" in repr(s)
    assert s.closed and "closed" in repr(s)


def test_close_is_idempotent_and_use_after_close_raises(no_leaks):
    s = dlstream.Stream(CPU)
    s.close()
    s.close()
    with pytest.raises(dlstream.InvalidHandleError, match="Stream.synchronize: the stream was closed") as ei:
        s.synchronize()
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, dlstream.Error)
    with pytest.raises(ValueError, match="closed"):
        s.record()


def test_default_streams_are_not_owned():
    leg = dlstream.Stream.legacy(CPU)
    pt = dlstream.Stream.per_thread(CPU)
    assert leg.kind == "legacy" and pt.kind == "per_thread"
    leg.close()  # no-op for a default stream
    assert dlstream.Stream.legacy(CPU).query() in (True, False)
    assert dlstream.current_stream(CPU) == dlstream.Stream.legacy(CPU)


def test_equality_and_hash_follow_the_native_stream(no_leaks):
    a = dlstream.Stream(CPU)
    w = dlstream.Stream.wrap(a.ptr, device=CPU)
    assert w.kind == "foreign" and w == a and hash(w) == hash(a)
    b = dlstream.Stream(CPU)
    assert a != b
    assert len({a, w, b}) == 2
    assert (a == 5) is False
    w.close()
    a.close()
    b.close()


def test_wrap_of_a_stream_is_a_stream_of_its_own_whose_close_leaves_the_given_one(no_leaks):
    """A library that wraps what its caller passed and closes its wrapper must not close the caller's stream."""
    for s in (dlstream.Stream(CPU), dlstream.Stream.acquire(CPU), dlstream.Stream.legacy(CPU)):
        w = dlstream.Stream.wrap(s)
        assert w is not s and w == s and w.ptr == s.ptr and w.handle == s.handle
        assert w.kind == (s.kind if s.kind == "legacy" else "foreign")
        w.close()
        assert w.closed and not s.closed
        dlstream.fill(np.zeros(4, np.float32), 1.0, stream=s)  # the caller's stream still works
        s.synchronize()
        s.close()
    s = dlstream.Stream(CPU)
    w = dlstream.Stream.wrap(s)
    s.close()  # the owner's close ends the stream: the wrapper then names a stale handle
    with pytest.raises(dlstream.InvalidHandleError):
        w.synchronize()


def test_wrap_int_zero_and_specials_name_default_streams():
    assert dlstream.Stream.wrap(0, device=CPU).kind == "legacy"
    assert dlstream.Stream.wrap(2, device=CPU).kind == "per_thread"


class _CS:
    def __init__(self, value):
        self.value = value

    def __cuda_stream__(self):
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def test_wrap_cuda_stream_protocol_object(no_leaks):
    s = dlstream.Stream(CPU)
    w = dlstream.Stream.wrap(_CS((0, s.ptr)), device=CPU)
    assert w == s and w.kind == "foreign"
    w.close()
    s.close()


@pytest.mark.parametrize("value, exc, msg", [
    ([0, 5], dlstream.ArgumentTypeError, "tuple"),
    ((0,), dlstream.ArgumentTypeError, "tuple"),
    ((0, 1, 2), dlstream.ArgumentTypeError, "tuple"),
    ((0, "x"), dlstream.ArgumentTypeError, "must both be ints"),
    ((1, 5), dlstream.VersionError, "version 1"),
    ((0, -5), dlstream.InvalidArgumentError, "-5 is not a stream: a native stream is a pointer, never negative"),
    (RuntimeError("boom"), RuntimeError, "boom"),
])
def test_cuda_stream_protocol_is_validated(value, exc, msg):
    with pytest.raises(exc, match=msg):
        dlstream.Stream.wrap(_CS(value), device=CPU)


def test_wrap_rejects_other_types():
    with pytest.raises(TypeError, match="__cuda_stream__"):
        dlstream.Stream.wrap("not a stream")
    with pytest.raises(dlstream.ArgumentTypeError):
        dlstream.Stream.wrap(1.5)
    with pytest.raises(ValueError, match="never negative"):
        dlstream.Stream.wrap(-1, device=CPU)


def test_wrap_of_a_dead_cpu_pointer_is_refused():
    with pytest.raises(dlstream.InvalidArgumentError, match="not a live CPU stream"):
        dlstream.Stream.wrap(0x1234, device=CPU)


def test_cuda_stream_of_a_cpu_stream_is_not_supported(no_leaks):
    with dlstream.Stream(CPU) as s:
        with pytest.raises(NotImplementedError, match="not a CUDA device"):
            s.__cuda_stream__()
        assert s.dlpack_value is None


def test_wait_on_event_and_stream_and_record(no_leaks):
    a, b = dlstream.Stream(CPU), dlstream.Stream(CPU)
    e = a.record()
    assert isinstance(e, dlstream.Event)
    b.wait(e)
    b.wait(a)
    e2 = dlstream.Event(device=CPU)
    assert b.record(e2) is e2
    b.synchronize()
    with pytest.raises(TypeError):
        b.wait("nope")
    with pytest.raises(TypeError):
        b.wait()
    with pytest.raises(TypeError):
        b.record(event=3)
    for o in (e, e2, a, b):
        o.close()


def test_pooled_stream(no_leaks):
    s = dlstream.Stream.acquire(CPU)
    assert s.kind == "pooled"
    s.synchronize()
    s.close()


def test_priority_and_bad_arguments(no_leaks):
    dlstream.Stream(CPU, priority=-1).close()
    with pytest.raises(dlstream.InvalidArgumentError, match="priority"):
        dlstream.Stream(CPU, priority=5)
    with pytest.raises(dlstream.InvalidDeviceError, match="unknown device"):
        dlstream.Stream("tpu")
    with pytest.raises(dlstream.InvalidDeviceError, match="out of range"):
        dlstream.Stream("cpu:3")
    with pytest.raises(TypeError):
        dlstream.Stream(device=1.5)


def test_unavailable_backend_says_why():
    if dlstream.device_count("cuda") > 0:
        pytest.skip("CUDA is available here")
    with pytest.raises(dlstream.UnavailableError, match="cuda") as ei:
        dlstream.Stream("cuda:0")
    assert isinstance(ei.value, RuntimeError) and ei.value.status_name == "DLS_ERR_UNAVAILABLE"


def test_use_stream_nests_and_restores(no_leaks):
    a, b = dlstream.Stream(CPU), dlstream.Stream(CPU)
    assert dlstream.current_stream(CPU).kind == "legacy"
    with dlstream.use_stream(a) as s:
        assert s is a and dlstream.current_stream() is a
        with dlstream.use_stream(b):
            assert dlstream.current_stream() is b
            with dlstream.use_stream(None):
                assert dlstream.current_stream(CPU).kind == "legacy"
        assert dlstream.current_stream() is a
    assert dlstream.current_stream(CPU).kind == "legacy"
    a.close()
    b.close()


def test_use_stream_is_per_thread(no_leaks):
    import threading
    a = dlstream.Stream(CPU)
    seen = []
    with dlstream.use_stream(a):
        t = threading.Thread(target=lambda: seen.append(dlstream.current_stream(CPU).kind))
        t.start()
        t.join()
    assert seen == ["legacy"]
    a.close()


@needs_cuda
def test_cuda_stream_protocol_round_trip(no_leaks):
    with dlstream.Stream("cuda:0") as s:
        version, ptr = s.__cuda_stream__()
        assert version == 0 and ptr == s.ptr != 0
        assert s.dlpack_value == ptr
    assert dlstream.Stream.legacy("cuda:0").dlpack_value == 1
    assert dlstream.Stream.per_thread("cuda:0").dlpack_value == 2
    assert dlstream.Stream.legacy("cuda:0").__cuda_stream__() == (0, 0)


@needs_cuda
def test_a_wrapped_framework_stream_lives_while_dlstream_work_names_it():
    """Stream.wrap(torch_stream): the framework's stream object is kept by dlstream's stream as long as a buffer or
    a use names it, not only by the wrapper, so dropping both first cannot destroy the native stream under a free
    still to be queued there (CuPy's example crashed at exit that way); it goes once they are done."""
    import gc
    import weakref
    torch = pytest.importorskip("torch", reason="needs torch with CUDA for a framework stream object")
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA for a framework stream object")
    ts = torch.cuda.Stream()
    gone = weakref.ref(ts)
    w = dlstream.Stream.wrap(ts)
    t = dlstream.empty(1 << 20, "float32", device="cuda:0", stream=w)
    dlstream.fill(t, 1.0)
    del ts, w
    gc.collect()
    assert gone() is not None, "the framework's stream went while a tensor on it was alive"
    t.close()
    dlstream.synchronize("cuda:0")
    gc.collect()
    assert gone() is None, "the framework's stream was kept after the last use"
