# SPDX-License-Identifier: Apache-2.0
"""dlstream.Event: owned and wrapped events, record/wait/synchronize/query/elapsed_time."""
import pytest

import dlstream
from conftest import CPU


def test_event_record_query_synchronize(no_leaks):
    with dlstream.Stream(CPU) as s, dlstream.Event(device=CPU) as e:
        assert e.query() is True  # never recorded
        assert e.record(s) is e
        e.synchronize()
        assert e.query() is True
        e.wait(s)
        assert not e.timing and not e.foreign and e.ptr != 0
        assert "Event" in repr(e)
    assert e.closed


def test_record_defaults_to_the_context_stream(no_leaks):
    a = dlstream.Stream(CPU)
    latch = dlstream.Latch(CPU)
    latch.wait(a)
    e = dlstream.Event(device=CPU)
    with dlstream.use_stream(a):
        e.record()
    assert e.query() is False, "the event was recorded behind the latch on the use_stream() stream"
    latch.open()
    e.synchronize()
    assert e.query() is True
    for o in (e, latch, a):
        o.close()


def test_elapsed_time(no_leaks):
    s = dlstream.Stream(CPU)
    start, end = dlstream.Event(timing=True, device=CPU), dlstream.Event(timing=True, device=CPU)
    start.record(s)
    dlstream.spin(0.002, stream=s)
    end.record(s)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert ms >= 1.5
    plain = dlstream.Event(device=CPU).record(s)
    with pytest.raises(dlstream.InvalidArgumentError, match="DLS_EVENT_TIMING"):
        plain.elapsed_time(end)
    with pytest.raises(TypeError):
        start.elapsed_time(3)
    s.synchronize()
    for o in (start, end, plain, s):
        o.close()


def test_wrap_of_native_handles(no_leaks):
    owner = dlstream.Event(device=CPU)

    class TorchLike:
        cuda_event = owner.ptr

    class CupyLike:
        ptr = owner.ptr

    for obj in (owner.ptr, TorchLike(), CupyLike()):
        w = dlstream.Event.wrap(obj, device=CPU)
        assert w.foreign and w.ptr == owner.ptr
        w.record(dlstream.Stream.legacy(CPU))
        w.synchronize()
        w.close()
    view = dlstream.Event.wrap(owner)
    assert view is not owner and view.foreign and view.ptr == owner.ptr
    view.close()  # a library closing what it wrapped leaves the caller's event alive
    assert view.closed and not owner.closed
    owner.record(dlstream.Stream.legacy(CPU))
    owner.synchronize()
    owner.close()


def test_wrap_errors():
    with pytest.raises(dlstream.InvalidArgumentError, match="record it before wrapping"):
        dlstream.Event.wrap(0, device=CPU)

    class Unrecorded:
        cuda_event = 0

    with pytest.raises(ValueError, match="handle is 0"):
        dlstream.Event.wrap(Unrecorded(), device=CPU)
    with pytest.raises(dlstream.ArgumentTypeError, match="cuda_event"):
        dlstream.Event.wrap("x")


def test_closed_event_raises(no_leaks):
    e = dlstream.Event(device=CPU)
    e.close()
    for call in (e.record, e.wait, e.synchronize, e.query):
        with pytest.raises(dlstream.InvalidHandleError, match="the event was closed"):
            call()
    s = dlstream.Stream(CPU)
    with pytest.raises(ValueError, match="closed"):
        s.wait(e)
    s.close()


def test_event_wait_orders_two_streams_with_negative_control(no_leaks):
    """a: latch, then fill buf := 1 through its raw address (work dlstream does not order). b: copy buf -> out,
    after waiting for an event recorded on a (or not)."""
    import numpy as np

    fill = dlstream.builtin_function("dls_fill", CPU)

    def run(ordered):
        a, b = dlstream.Stream(CPU), dlstream.Stream(CPU)
        buf = dlstream.empty(1, "int32", device=CPU, stream=b)
        out = dlstream.empty(1, "int32", device=CPU, stream=b)
        dlstream.fill(buf, 0, stream=b)
        dlstream.fill(out, 0, stream=b)
        b.synchronize()
        latch = dlstream.Latch(CPU)
        latch.wait(a)
        fill.launch(1, 1, buf.data_ptr, 1, 4, 1, stream=a)  # a raw pointer: only the event orders it
        if ordered:
            b.wait(a.record())
        dlstream.copy(out, buf, stream=b)
        if not ordered:
            b.synchronize()  # runs ahead while the latch is closed
        else:
            assert b.query() is False, "b must be held behind a's latch"
        latch.open()
        a.synchronize()
        b.synchronize()
        got = int(np.from_dlpack(out)[0])
        latch.check()
        for o in (latch, buf, out, a, b):
            o.close()
        return got

    assert run(True) == 1
    assert run(False) == 0, "without the wait b reads early: the check above can fail"
