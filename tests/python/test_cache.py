# SPDX-License-Identifier: Apache-2.0
"""The caching allocator from Python: a closed tensor's memory comes back to the next allocation on its stream,
another stream takes it over only after waiting for the held work on it, dlstream.empty_cache() gives it back, and
streams of a framework that dlstream wraps for a call keep nothing (the framework may destroy them)."""
import os

import numpy as np
import pytest

import dlstream

N = 1 << 16  # floats: 256 KiB


def _cache_on():
    if os.environ.get("DLSTREAM_DEBUG_ALLOC") == "1" or os.environ.get("DLSTREAM_CACHE_LIMIT") == "0":
        pytest.skip("the cache is off (DLSTREAM_DEBUG_ALLOC=1 or DLSTREAM_CACHE_LIMIT=0)")


def _comes_back(device):
    """A tensor closed on a stream: the next one of its size on that stream gets its memory, and empty_cache then
    gives that memory back."""
    _cache_on()
    dlstream.empty_cache(device)
    s = dlstream.Stream(device)
    t = dlstream.empty(N, "float32", stream=s)
    p = t.data_ptr
    t.close()
    u = dlstream.empty(N, "float32", stream=s)
    assert u.data_ptr == p
    u.close()
    assert dlstream.empty_cache(device) == N * 4
    assert dlstream.empty_cache(device) == 0
    s.close()


def test_a_closed_tensors_memory_comes_back_on_its_stream():
    dlstream.synchronize()  # earlier tests' deferred releases (on any device) have come back to their caches
    dlstream.empty_cache()
    _comes_back("cpu")
    assert dlstream.empty_cache() == 0  # every device


def test_another_stream_takes_the_memory_only_after_the_held_reader():
    """x (7s) is read on r behind a latch, then closed; a tensor on b gets its memory and b fills it with 9s: b
    waits for x's stream, which waits for r's read, so r still reads 7s."""
    _cache_on()
    if os.environ.get("DLSTREAM_CPU_SYNC") == "1":
        pytest.skip("DLSTREAM_CPU_SYNC=1: a latch would hold the test itself")
    a, r, b = (dlstream.Stream("cpu") for _ in range(3))
    x = dlstream.empty(N, "float32", stream=a)
    dlstream.fill(x, 7.0)
    out = dlstream.empty(N, "float32", stream=r)
    latch = dlstream.Latch("cpu")
    latch.wait(r, timeout=30.0)
    dlstream.copy(out, x, stream=r)
    p = x.data_ptr
    x.close()
    y = dlstream.empty(N, "float32", stream=b)
    assert y.data_ptr == p, "b did not take x's memory: the handover was not tested"
    dlstream.fill(y, 9.0)
    assert not b.query(), "b's fill must wait behind the held read"
    latch.open()
    latch.close()
    assert np.all(np.from_dlpack(out) == 7.0)
    for t in (y, out):
        t.close()
    for s in (a, r, b):
        s.close()


def test_empty_cache_names_a_bad_device():
    with pytest.raises(dlstream.Error, match="empty_cache"):
        dlstream.empty_cache("nowhere:0")


def _torch_cuda():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def test_cuda_memory_comes_back_and_goes_back():
    if dlstream.device_count("cuda") == 0:
        pytest.skip("no CUDA device")
    _comes_back("cuda:0")


def test_a_torch_stream_wrapped_for_a_call_keeps_nothing():
    """A torch stream named by `stream=` is wrapped for the call and kept in a small cache of wraps, not alive:
    memory freed on it goes straight to the driver."""
    _cache_on()
    torch = _torch_cuda()
    dlstream.empty_cache("cuda:0")
    ts = torch.cuda.Stream()
    t = dlstream.empty(N, "float32", device="cuda:0", stream=ts)
    dlstream.fill(t, 1.0)
    t.close()
    ts.synchronize()
    assert dlstream.empty_cache("cuda:0") == 0
    # A Stream.wrap keeps torch's stream alive: its memory is cached until the wrap closes.
    w = dlstream.Stream.wrap(ts)
    t = dlstream.empty(N, "float32", stream=w)
    p = t.data_ptr
    t.close()
    u = dlstream.empty(N, "float32", stream=w)
    assert u.data_ptr == p, "a Stream.wrap of a torch stream caches"
    u.close()
    w.close()  # the wrap's end gives its memory back
    assert dlstream.empty_cache("cuda:0") == 0
