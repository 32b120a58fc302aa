# SPDX-License-Identifier: Apache-2.0
"""Python code that runs inside a method - an argument's __bool__, __index__, __float__, __dlpack__ or
__cuda_stream__, a finalizer of the garbage collector - may close the very object the method works on. Every such
method re-reads what it uses afterwards or holds it: the result is a clean dlstream error or a completed call,
never a use-after-free (the suite runs under AddressSanitizer in CI, where one would abort it)."""
import gc
import threading

import numpy as np
import pytest

import dlstream
from conftest import CPU, Closes, held, settle

NDIM = 12  # more dimensions than a core tensor keeps inline: its shape lives on the heap, freed with the tensor


def raises_cleanly(fn):
    """fn() completes, or raises a dlstream error with a message (never anything else)."""
    try:
        fn()
    except dlstream.Error as e:
        assert str(e)
        return e
    return None


def big_tensor():
    return dlstream.empty((1,) * NDIM, "float32", device=CPU)


@pytest.mark.parametrize("kw", ["copy", "max_version", "dl_device"])
def test_dlpack_arguments_that_close_the_tensor(kw, no_leaks):
    t = big_tensor()
    arg = {"copy": Closes(t), "max_version": (Closes(t), 0), "dl_device": (Closes(t, 1), 0)}[kw]
    e = raises_cleanly(lambda: t.__dlpack__(**{kw: arg}))
    assert isinstance(e, dlstream.InvalidHandleError) and "released" in str(e)
    settle()


def test_record_stream_whose_stream_closes_the_tensor(no_leaks):
    t = big_tensor()
    s = dlstream.Stream(CPU)
    e = raises_cleanly(lambda: t.record_stream(Closes(t)))
    assert e is not None
    s.close()


class Collected:
    """Cyclic garbage whose finalizer closes `victim` when the collector runs."""

    def __init__(self, victim):
        self.victim = victim
        self.me = self

    def __del__(self):
        self.victim.close()


@pytest.mark.parametrize("what", ["shape", "strides", "repr", "dtype", "device", "size", "nbytes", "ndim"])
def test_properties_under_a_finalizer_that_closes_the_tensor(what, no_leaks):
    t = big_tensor()
    thresholds = gc.get_threshold()
    gc.collect()
    gc.disable()
    try:
        Collected(t)
        gc.set_threshold(1)  # the next tracked allocation (the shape's tuple ...) collects the garbage above
        gc.enable()
        try:
            v = repr(t) if what == "repr" else getattr(t, what)
            assert v is not None
        except dlstream.InvalidHandleError as e:
            assert "released" in str(e)
    finally:
        gc.set_threshold(*thresholds)
        gc.enable()
    t.close()
    settle()


def test_fill_value_that_closes_the_destination(no_leaks):
    t = dlstream.empty(8, "int32", device=CPU)
    raises_cleanly(lambda: dlstream.fill(t, Closes(t, 3)))
    t2 = dlstream.empty(8, "float32", device=CPU)
    raises_cleanly(lambda: dlstream.axpy(Closes(t2, 2.0), t2, t2))
    settle()


def test_copy_whose_source_closes_the_destination(no_leaks):
    dst = dlstream.empty(8, "float32", device=CPU)
    src = Closes(dst, array=np.ones(8, np.float32))
    e = raises_cleanly(lambda: dlstream.copy(dst, src))
    assert isinstance(e, dlstream.InvalidHandleError)
    settle()


def test_launch_arguments_that_close_a_tensor_argument(no_leaks):
    fill = dlstream.builtin_function("dls_fill", CPU)
    t = dlstream.empty(8, "int32", device=CPU)
    e = raises_cleanly(lambda: fill.launch(1, 1, t, 8, 4, Closes(t, 7)))
    assert isinstance(e, dlstream.InvalidHandleError)
    t = dlstream.empty(8, "int32", device=CPU)
    e = raises_cleanly(lambda: fill.launch(Closes(t), 1, t, 8, 4, 7))
    assert isinstance(e, dlstream.InvalidHandleError)
    settle()


def test_stream_methods_whose_arguments_close_the_stream(no_leaks):
    other = dlstream.Stream(CPU)
    s = dlstream.Stream(CPU)
    e = raises_cleanly(lambda: s.wait(Closes(s, stream=other)))
    assert isinstance(e, dlstream.InvalidHandleError) and "closed" in str(e)
    s = dlstream.Stream(CPU)
    ev = dlstream.Event(device=CPU)
    e = raises_cleanly(lambda: ev.record(Closes(ev, stream=other)))
    assert isinstance(e, dlstream.InvalidHandleError)
    ev = dlstream.Event(device=CPU)
    e = raises_cleanly(lambda: ev.wait(Closes(ev, stream=other)))
    assert isinstance(e, dlstream.InvalidHandleError)
    latch = dlstream.Latch(CPU)
    e = raises_cleanly(lambda: latch.wait(Closes(latch, stream=other)))
    assert isinstance(e, dlstream.InvalidHandleError)
    s.close()
    other.close()


def test_stream_record_under_a_finalizer_that_closes_the_stream(no_leaks):
    s = dlstream.Stream(CPU)
    thresholds = gc.get_threshold()
    gc.collect()
    gc.disable()
    try:
        Collected(s)
        gc.set_threshold(1)
        gc.enable()
        e = raises_cleanly(s.record)
        assert e is None or isinstance(e, dlstream.InvalidHandleError)
    finally:
        gc.set_threshold(*thresholds)
        gc.enable()
    s.close()


def test_graph_replay_whose_stream_closes_the_graph(no_leaks):
    s = dlstream.Stream(CPU)
    x = dlstream.empty(4, "float32", device=CPU, stream=s)
    with dlstream.capture(s) as g:
        dlstream.fill(x, 1.0)
    e = raises_cleanly(lambda: g.replay(stream=Closes(g.graph, stream=s)))
    assert isinstance(e, dlstream.InvalidHandleError) and "closed" in str(e)
    g.close()
    x.close()
    s.close()


class Shrinks:
    """An extent whose __index__ empties the list it is read from."""

    def __init__(self, shape):
        self.shape = shape

    def __index__(self):
        self.shape.clear()
        gc.collect()
        return 2


def test_shape_list_changed_while_it_is_read(no_leaks):
    shape = [1, 2, 3, 4]
    shape.insert(1, Shrinks(shape))
    t = dlstream.empty(shape, device=CPU)
    assert t.shape == (1, 2, 2, 3, 4)  # read from a copy
    t.close()


def test_close_from_another_thread_while_synchronizing(no_leaks):
    s = dlstream.Stream(CPU)
    latch = held(s, timeout=30)
    e = s.record()
    results = []

    def wait(obj):
        try:
            obj.synchronize()
            results.append("done")
        except dlstream.Error as err:
            results.append(err)

    threads = [threading.Thread(target=wait, args=(s,)), threading.Thread(target=wait, args=(e,))]
    for t in threads:
        t.start()
    s.close()  # while the other threads wait (or before they start: the outcome is clean either way)
    e.close()
    latch.open()
    for t in threads:
        t.join(30)
    assert len(results) == 2
    for r in results:
        assert r == "done" or (isinstance(r, dlstream.InvalidHandleError) and "closed" in str(r))
    latch.close()
