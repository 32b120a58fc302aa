# SPDX-License-Identifier: Apache-2.0
"""dlstream.capture never leaks a capture: not when its end is refused (a group still open), not when a
KeyboardInterrupt lands anywhere in the with statement, not when the capture object is abandoned or its stream is
closed inside the block. A leaked capture would refuse every later call of the process."""
import contextvars
import gc
import sys
import threading

import numpy as np
import pytest

import dlstream
from conftest import CPU, TORCH_CUDA, needs_cuda, needs_torch_cuda, settle, torch


def still_usable():
    """A capture left open would refuse this (and every later call)."""
    a = np.zeros(4, np.float32)
    dlstream.fill(a, 2.0)
    settle()
    assert (a == 2.0).all()


def test_refused_end_discards_the_capture(no_leaks):
    s = dlstream.Stream(CPU)
    x = dlstream.empty(4, "float32", device=CPU, stream=s)
    cap = dlstream.capture(s)
    with pytest.raises(dlstream.StateError, match="could not end, so it was discarded"):
        with cap:
            group = dlstream.Group(s)  # begun in the capture and never ended: the capture cannot end
            dlstream.fill(x, 1.0)
    assert dlstream.capture_status(s) == "none"
    assert cap.graph is None
    del group
    gc.collect()
    still_usable()
    dlstream.fill(x, 3.0, stream=s)  # the stream runs eagerly again
    s.synchronize()
    assert (np.from_dlpack(x) == 3.0).all()
    x.close()
    s.close()


def test_block_that_raises_discards_the_capture(no_leaks):
    s = dlstream.Stream(CPU)
    with pytest.raises(ZeroDivisionError):
        with dlstream.capture(s) as g:
            dlstream.spin(0.001)
            1 / 0
    assert dlstream.capture_status(s) == "none" and g.graph is None
    still_usable()
    s.close()


def test_stream_closed_inside_the_block(no_leaks):
    s = dlstream.Stream(CPU)
    with pytest.raises(dlstream.StateError, match="closed inside the block"):
        with dlstream.capture(s):
            s.close()
    still_usable()


def test_abandoned_capture_object_discards_its_capture(no_leaks):
    s = dlstream.Stream(CPU)

    def enter_and_drop():
        c = dlstream.capture(s)
        c.__enter__()
        assert dlstream.capture_status(s) == "active"
        del c
        gc.collect()

    contextvars.copy_context().run(enter_and_drop)  # its use_stream setting stays in that context
    assert dlstream.capture_status(s) == "none"
    still_usable()
    s.close()


def interrupt_at(n, body, inner_lines):
    """Runs body() with a trace function that raises KeyboardInterrupt at the n-th event where a signal could land:
    a line inside the with block, or any line or call in Python code that body() calls (dlstream's own capture
    code included, if it had any). Events on the with statement's own line are left out: a signal is handled only
    where the interpreter checks for it, which is never between a with block's last line and its __exit__ call.
    Returns the number of such events."""
    seen = [0]

    def tracer(frame, event, arg):
        mine = frame.f_code is body.__code__
        if not mine or (event == "line" and frame.f_lineno in inner_lines):
            seen[0] += 1
            if seen[0] == n:
                raise KeyboardInterrupt
        return tracer

    sys.settrace(tracer)
    try:
        body()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return seen[0]


@pytest.mark.parametrize("owned", [False, True])
def test_keyboard_interrupt_anywhere_leaks_no_capture(owned, no_leaks):
    s = dlstream.Stream(CPU)
    x = dlstream.empty(4, "float32", device=CPU, stream=s)

    def body():
        with dlstream.capture(None if owned else s, device=CPU) as g:
            dlstream.fill(x, 1.0, stream=g.stream)
            dlstream.spin(0)
        g.close()

    first = body.__code__.co_firstlineno
    inner = {first + 2, first + 3}
    total = interrupt_at(0, body, inner)  # uninterrupted: counts the events
    assert total >= len(inner)
    for n in range(1, total + 1):
        interrupt_at(n, body, inner)
        gc.collect()
        assert dlstream.capture_status(s) == "none", f"a capture leaked when interrupted at event {n}"
        assert dlstream._dlstream._stream_var.get(None) is None, f"use_stream leaked at event {n}"
        still_usable()
    x.close()
    s.close()


@needs_torch_cuda
def test_a_call_with_no_stream_and_no_tensor_inside_torch_cuda_graph_is_captured():
    """Inside torch.cuda.graph a call that names no stream and has no tensor argument (a built-in launched with a
    raw pointer) runs on torch's capturing stream: it is recorded, not run eagerly on the legacy stream."""
    y = torch.zeros(256, device="cuda")
    fill = dlstream.builtin_function("dls_fill", "cuda:0")
    pattern = int(np.array(5.0, np.float32).view(np.uint32))
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fill.launch(1, 256, y.data_ptr(), 256, 4, pattern)
        e = dlstream.Event(device="cuda:0").record()  # no stream: torch's capturing stream too
    torch.cuda.synchronize()
    assert (y == 0).all(), "the launch ran eagerly instead of being captured"
    with pytest.raises(dlstream.StateError):
        e.query()  # recorded in the capture
    g.replay()
    torch.cuda.synchronize()
    assert (y == 5.0).all()
    del g
    assert TORCH_CUDA


@needs_torch_cuda
def test_a_worker_thread_that_synchronizes_leaves_a_torch_capture_valid():
    """A worker thread launches on its own dlstream stream and synchronizes it while the main thread captures with
    torch.cuda.graph in global mode: the capture must stay valid (a host wait in the thread's default capture mode
    would invalidate it; dlstream's waits query in relaxed mode)."""
    s = dlstream.Stream("cuda:0")
    dlstream.spin(0, stream=s)  # loads the built-in before the capture
    s.synchronize()
    x = torch.zeros(256, device="cuda")
    torch.cuda.synchronize()
    started, done, errors = threading.Event(), threading.Event(), []

    def worker():
        started.wait(30)
        try:
            dlstream.spin(0.001, stream=s)
            s.synchronize()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        done.set()

    th = threading.Thread(target=worker)
    th.start()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
        started.set()
        done.wait(30)
        x.add_(1)
    th.join(30)
    assert not errors, errors
    g.replay()
    torch.cuda.synchronize()
    assert (x == 2).all()
    s.close()


@needs_cuda
@pytest.mark.parametrize("mode", ["relaxed", "global"])
def test_host_arrays_staged_while_another_thread_begins_and_ends_captures(mode, no_leaks):
    """Issue 31's capture against allocation, from Python: calls that stage a NumPy array on a stream (a temporary on
    the device, copies in and back, a host wait) while another thread begins and ends captures of that stream. Each
    call either runs wholly eagerly (the array holds its value) or fails with a dlstream error and leaves the array
    as it was; the capturing thread only ever sees dlstream errors (a capture a host wait invalidated is discarded);
    no capture is left open and nothing leaks. Before the pins, a capture could take half of a call's work."""
    s = dlstream.Stream("cuda:0")
    stop = threading.Event()
    unexpected = []
    captures = [0]

    def capturer():
        while not stop.is_set():
            try:
                with dlstream.capture(s, mode=mode) as cap:
                    pass
                captures[0] += 1
                cap.close()
            except dlstream.Error:
                pass  # refused or discarded (the staging thread's host wait invalidated it): said, and left clean
            except BaseException as e:  # noqa: BLE001 - reported below
                unexpected.append(e)
                return

    t = threading.Thread(target=capturer)
    t.start()
    eager = failed = 0
    try:
        for i in range(300):
            a = np.full(256, -1.0, np.float32)
            try:
                dlstream.fill(a, float(i), stream=s)
                eager += 1
                assert (a == float(i)).all(), f"call {i} ran eagerly but the array holds {a[:4]}..."
            except dlstream.Error:
                failed += 1
                assert (a == -1.0).all(), f"call {i} failed but wrote the array: {a[:4]}..."
    finally:
        stop.set()
        t.join()
    assert not unexpected, unexpected
    print(f"\n{mode}: {eager} calls ran eagerly, {failed} were refused, {captures[0]} captures ended")
    assert eager > 0
    assert dlstream.capture_status(s) == "none"
    a = np.zeros(256, np.float32)
    dlstream.fill(a, 5.0, stream=s)  # the stream runs eagerly again
    assert (a == 5.0).all()
    s.close()
