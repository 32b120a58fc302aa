# SPDX-License-Identifier: Apache-2.0
"""Hostile stream values never crash: property-based tests (hypothesis) drive every entry point that takes a
stream with random integers and objects. Values that cannot be a stream are refused with a clear error before any
driver call; DLPack's defined values work. On a GPU only values that never reach a driver's pointer read are
drawn: no driver can validate a plausible but dangling pointer, so none is drawn from user address space."""
import ctypes
import mmap

import numpy as np
import pytest

import dlstream
from conftest import CPU, HAVE_CUDA, needs_cuda, settle

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (scripts/deps.sh installs it)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
GPU = "cuda:0"

# Values no stream can have, whatever the device: negative (but DLPack's -1 where it means "no sync"),
# 3 to 4095, 2**63 and above.
small = st.integers(min_value=3, max_value=4095)
negative = st.integers(max_value=-2) | st.integers(min_value=-2**64, max_value=-2)
huge = st.integers(min_value=2**63, max_value=2**70)
# Non-canonical addresses (x86-64 and arm64 user space ends below 2**48 or 2**56): never readable.
noncanonical = st.integers(min_value=2**57, max_value=2**63 - 1)
never_streams = small | negative | huge
# On the CPU backend any value is safe: its streams are looked up in a registry, never read.
any_int = st.integers(min_value=-2**70, max_value=2**70)


def _readable_pointer(v):
    return 4096 <= v < 2**63 and dlstream._dlstream._readable(v)


# A bare int stream of a call that names no device belongs to the default device: on a machine with a GPU that is
# cuda:0, whose driver reads a stream where the pointer points. Unreadable values are refused before it; a readable
# one that is not a stream (the interpreter's own code, a heap object) is what no driver can tell from a stream
# (docs/python.md, "Stream values that cannot be streams"), so there such values are not drawn.
default_device_int = any_int.filter(lambda v: not (HAVE_CUDA and _readable_pointer(v)))
junk = (st.none() | st.booleans() | st.floats(allow_nan=True) | st.text(max_size=8) | st.binary(max_size=8) |
        st.lists(st.integers(), max_size=3) | st.tuples(st.integers(), st.integers()) | st.just(object()))


def _refused_cleanly(fn, *, allowed=()):
    """fn() either succeeds or raises a dlstream error (or a TypeError/ValueError) with a message."""
    try:
        return fn()
    except allowed:
        return None
    except (dlstream.Error, TypeError, ValueError, BufferError, NotImplementedError) as e:
        assert str(e), "an error without a message"
        return e


class _CS:
    def __init__(self, result):
        self.result = result

    def __cuda_stream__(self):
        return self.result


@pytest.fixture(scope="module")
def cpu_tensor():
    t = dlstream.empty(4, "float32", device=CPU)
    yield t
    t.close()


def live():
    """Live handles without a garbage collection per example (nothing here makes cycles)."""
    dlstream._dlstream._clear_caches()
    dlstream._dlstream._deferred_poll()
    return dlstream._dlstream._live_handles()


def _check_no_leak(before):
    assert live() == before


# ---- CPU, in CI ----

@SETTINGS
@given(value=default_device_int | junk)
def test_stream_arguments_never_crash_cpu(value):
    before = live()
    a = np.zeros(4, np.float32)
    r = _refused_cleanly(lambda: dlstream.fill(a, 1.0, stream=value))
    if isinstance(r, Exception):
        assert "fill" in str(r)
        if isinstance(value, int) and not isinstance(value, bool) and (value < 0 or 3 <= value < 4096 or
                                                                       value >= 2**63):
            assert isinstance(r, dlstream.InvalidArgumentError) and "not a stream" in str(r), r
    dlstream.Stream.legacy(CPU).synchronize()
    dlstream._dlstream._deferred_poll()
    _check_no_leak(before)


@SETTINGS
@given(value=any_int | junk)
def test_stream_wrap_never_crashes_cpu(value):
    before = live()
    r = _refused_cleanly(lambda: dlstream.Stream.wrap(value, device=CPU))
    if isinstance(r, dlstream.Stream):
        assert value in (0, 1, 2) and r.kind in ("legacy", "per_thread")
    else:
        assert "Stream.wrap" in str(r)
    r = _refused_cleanly(lambda: dlstream.Stream.wrap(_CS((0, value)), device=CPU))
    assert not isinstance(r, dlstream.Stream) or value in (0, 1, 2)
    r = _refused_cleanly(lambda: dlstream.use_stream(value, device=CPU))
    assert not isinstance(r, dlstream.use_stream) or value in (0, 1, 2, None)
    _check_no_leak(before)


@SETTINGS
@given(value=any_int | junk)
def test_dlpack_export_stream_never_crashes_cpu(cpu_tensor, value):
    """Host memory takes only stream=None (the host waits) or -1."""
    r = _refused_cleanly(lambda: cpu_tensor.__dlpack__(stream=value))
    if value is None or (value == -1 and not isinstance(value, bool)):
        assert not isinstance(r, Exception)
    else:
        assert isinstance(r, Exception) and "Tensor.__dlpack__(stream=" in str(r)


@SETTINGS
@given(value=never_streams | noncanonical)
def test_event_wrap_never_crashes(value):
    before = live()
    r = _refused_cleanly(lambda: dlstream.Event.wrap(value, device=CPU))
    assert isinstance(r, Exception) or value >= 4096
    if isinstance(r, dlstream.Event):
        r.close()
    _check_no_leak(before)


@SETTINGS
@given(value=default_device_int | junk)
def test_cai_stream_values_never_crash(value):
    from test_framework_streams import CaiArray
    a = np.zeros(4, np.float32)
    r = _refused_cleanly(lambda: dlstream.fill(CaiArray(a, stream=value), 1.0))
    if isinstance(r, Exception):
        assert "__cuda_array_interface__" in str(r) or "fill" in str(r)
    dlstream.Stream.legacy(CPU).synchronize()
    dlstream._dlstream._deferred_poll()
    dlstream._dlstream._clear_caches()


@SETTINGS
@given(value=never_streams)
def test_values_that_cannot_be_streams_are_refused_on_gpu_devices_before_the_driver(value):
    """On cuda:0 and rocm:0 these are refused whether or not the GPU (or its backend) exists: no driver call."""
    for dev in ("cuda:0", "rocm:0"):
        with pytest.raises(dlstream.InvalidArgumentError, match="not a stream"):
            dlstream.Stream.wrap(value, device=dev)
        with pytest.raises(dlstream.InvalidArgumentError, match="not a stream"):
            dlstream.Stream.wrap(_CS((0, value)), device=dev)


def test_readable_probe():
    libc = ctypes.CDLL(None)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    reserved = libc.mmap(None, 4096, 0, 0x22, -1, 0)  # PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS
    buf = ctypes.create_string_buffer(8)
    probe = dlstream._dlstream._readable
    assert probe(ctypes.addressof(buf)) and not probe(16) and not probe(2**60) and not probe(reserved)
    libc.munmap(reserved, 4096)


# ---- GPU (skipped here with the reason) ----

@needs_cuda
@SETTINGS
@given(value=never_streams | noncanonical | junk)
def test_gpu_entry_points_never_crash(value):
    before = live()
    t = dlstream.empty(4, "float32", device=GPU)
    for fn in (lambda: dlstream.fill(t, 1.0, stream=value),
               lambda: dlstream.Stream.wrap(value, device=GPU),
               lambda: dlstream.Stream.wrap(_CS((0, value)), device=GPU),
               lambda: t.__dlpack__(stream=value),
               lambda: dlstream.Event.wrap(value, device=GPU)):
        r = _refused_cleanly(fn)
        if value is None or isinstance(value, bool):
            continue  # None names the legacy stream; bools are refused as types or taken as 0 and 1
        if isinstance(r, (dlstream.Stream, dlstream.Event)):
            r.close()
    t.close()
    dlstream.Stream.legacy(GPU).synchronize()
    settle()
    _check_no_leak(before)


@needs_cuda
def test_gpu_dlpack_values(no_leaks):
    """The issue's crash: stream=5 on a CUDA tensor killed the process."""
    t = dlstream.empty(4, "float32", device=GPU)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"stream=5\).*no stream has this value"):
        t.__dlpack__(stream=5)
    with pytest.raises(dlstream.InvalidArgumentError, match="0 is ambiguous on CUDA"):
        t.__dlpack__(stream=0)
    with pytest.raises(dlstream.InvalidArgumentError, match="cannot read memory there"):
        t.__dlpack__(stream=2**60)
    with pytest.raises(dlstream.InvalidArgumentError, match="cannot read memory there"):
        dlstream.Stream.wrap(2**60, device=GPU)
    with pytest.raises(dlstream.InvalidArgumentError, match="cannot read memory there"):
        dlstream.fill(t, 1.0, stream=2**60)
    t.__dlpack__(stream=None)
    t.__dlpack__(stream=1)
    t.__dlpack__(stream=2)
    t.__dlpack__(stream=-1)
    t.close()
    settle()


def unmapped_address():
    """A page this process mapped and gave back: nothing is there now (a fixed guess such as 2**40 is mapped under
    ThreadSanitizer, whose shadow memory lives there)."""
    m = mmap.mmap(-1, mmap.PAGESIZE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(m))
    m.close()
    return address


@pytest.mark.skipif(HAVE_CUDA, reason="checks the refusals without a GPU")
def test_gpu_values_refused_without_a_gpu():
    with pytest.raises(dlstream.InvalidArgumentError, match="not a stream"):
        dlstream.Stream.wrap(5, device="cuda:0")
    with pytest.raises(dlstream.InvalidArgumentError, match="cannot read memory there"):
        dlstream.Stream.wrap(unmapped_address(), device="cuda:0")
    buf = ctypes.create_string_buffer(64)  # readable, so it reaches the backend, which is not here
    with pytest.raises(dlstream.UnavailableError):
        dlstream.Stream.wrap(ctypes.addressof(buf), device="cuda:0")
