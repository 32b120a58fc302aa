# SPDX-License-Identifier: Apache-2.0
"""dlstream.synchronize: waits for every stream dlstream holds on a device (dls_device_synchronize), so that NumPy
results on the CPU backend are read after the work ran."""
import numpy as np
import pytest

import dlstream
from conftest import CPU, HAVE_CUDA, held

N = 1 << 16


def test_numpy_axpy_is_asynchronous_and_synchronize_waits(no_leaks):
    x = np.ones(N, np.float32)
    y = np.zeros(N, np.float32)
    latch = held(dlstream.Stream.legacy(CPU))   # the stream NumPy arrays run on
    dlstream.axpy(2.0, x, y)
    assert y.sum() == 0.0, "negative control: the axpy is queued behind the latch, not run"
    latch.open()
    dlstream.synchronize()
    assert y.sum() == 2.0 * N
    latch.check()
    latch.close()


@pytest.mark.parametrize("kind", ["owned", "pooled", "wrapped", "per_thread"])
def test_synchronize_waits_for_every_kind_of_stream(kind, no_leaks):
    owner = dlstream.Stream(CPU)
    s = {"owned": lambda: owner, "pooled": lambda: dlstream.Stream.acquire(CPU),
         "wrapped": lambda: dlstream.Stream.wrap(owner.ptr, CPU),
         "per_thread": lambda: dlstream.Stream.per_thread(CPU)}[kind]()
    y = np.zeros(N, np.float32)
    latch = held(s)
    dlstream.spin(0.002, stream=s)
    dlstream.fill(y, 1.0, stream=s)
    assert y.sum() == 0.0, "negative control: held"
    latch.open()
    dlstream.synchronize(CPU)
    assert y.sum() == N, f"synchronize returned before the {kind} stream ran"
    latch.close()
    s.close()
    owner.close()


def test_synchronize_without_a_device_covers_every_backend():
    dlstream.synchronize()
    dlstream.synchronize(None)
    dlstream.synchronize(device="cpu:0")


def test_synchronize_inside_a_global_capture_is_refused_and_the_capture_goes_on(no_leaks):
    y = dlstream.empty(N, "float32", device=CPU)
    with dlstream.capture(device=CPU) as g:
        dlstream.fill(y, 1.0)
        with pytest.raises(dlstream.StateError, match="synchronize: .*capture"):
            dlstream.synchronize()
        dlstream.fill(y, 2.0)
    g.replay()
    dlstream.synchronize()
    assert np.from_dlpack(y).sum() == 2.0 * N
    g.close()
    y.close()


def test_bad_devices_are_named():
    with pytest.raises(dlstream.InvalidDeviceError, match=r"synchronize\(device='tpu'\)"):
        dlstream.synchronize("tpu")
    with pytest.raises(dlstream.InvalidDeviceError, match="cpu:7"):
        dlstream.synchronize("cpu:7")
    with pytest.raises(TypeError):
        dlstream.synchronize(CPU, CPU)


@pytest.mark.skipif(HAVE_CUDA, reason="this machine has a CUDA device; the test is about one without")
def test_an_unavailable_backend_says_why():
    with pytest.raises(dlstream.UnavailableError, match="dls_device_synchronize"):
        dlstream.synchronize("cuda:0")


def test_framework_streams_wrapped_for_calls_are_dropped_not_waited_on(fx, no_leaks):
    """The extension caches wrappers of the framework streams its calls ran on; the framework may destroy such a
    stream, so synchronize drops the wrappers rather than hand the driver a stream that may be gone."""
    side = dlstream.Stream(CPU)
    x = np.ones(8, np.float32)
    y = np.zeros(8, np.float32)
    fx.set_current_stream(side.ptr)
    dlstream.axpy(1.0, fx.FakeTensor(x, x.ctypes.data, x.shape), fx.FakeTensor(y, y.ctypes.data, y.shape))
    assert dlstream._dlstream._cache_sizes()["streams"] == 1
    dlstream.synchronize()
    assert dlstream._dlstream._cache_sizes()["streams"] == 0
    side.synchronize()                   # the framework's own wait (here: the Stream it came from)
    assert y.sum() == 8.0
    side.close()



def test_synchronize_waits_for_a_pooled_stream_handed_back(no_leaks):
    """A stream closed with work still queued still runs it (a Python capture's own stream after the capture is
    closed, with its replay, is one): synchronize waits for stream objects without a handle and for the pool's
    streams too. Before, it waited for live handles only and returned before the record below had completed."""
    s = dlstream.Stream.acquire(CPU)
    latch = held(s)
    dlstream.spin(0.05, stream=s)
    e = s.record()
    s.close()  # handed back to the pool with its work queued
    assert not e.query(), "negative control: held"
    latch.open()
    dlstream.synchronize(CPU)
    assert e.query(), "synchronize returned before the pooled stream handed back ran"
    e.close()
    latch.close()
