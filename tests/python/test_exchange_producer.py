# SPDX-License-Identifier: Apache-2.0
"""dlstream.Tensor as a producer of the DLPack C exchange API (interop/python/exchange.c): read by a C consumer as
torch and tvm-ffi read a type's table (tests/python/fake_consumer.c), by NumPy and by torch.

The table's managed tensors keep every ordering rule of __dlpack__: host memory is handed over once its queued work
has run (a latch holds it; the negative control, with the hazard rule off, reads before the write), device memory
is exported to the table's work stream, which waits for the tensor's earlier uses on the device."""
import threading

import numpy as np
import pytest

import dlstream
from conftest import CPU, RULE_OFF, TORCH_CUDA, held, needs_torch_cuda, run_python, torch

kDLCPU, kDLCUDA, kDLFloat = 1, 2, 2


@pytest.fixture
def fc():
    return pytest.importorskip("_dls_fake_consumer", reason="the fake exchange-API consumer (_dls_fake_consumer) is "
                               "not importable: CMake builds it into <build>/python")


def test_the_table_is_on_the_type_and_says_what_it_has(fc):
    cap = dlstream.Tensor.__dlpack_c_exchange_api__
    assert type(cap).__name__ == "PyCapsule" and "dlpack_exchange_api" in repr(cap)
    info = fc.info(dlstream.Tensor)
    assert info["version"][0] == 1 and info["version"][1] >= 1
    assert info == {**info, "prev_api": False, "allocator": True, "from_object": True, "to_object": True,
                    "current_work_stream": True, "dltensor": False}


def test_managed_tensor_of_host_memory(fc, no_leaks):
    with dlstream.empty((2, 3), "float32", device=CPU) as t:
        dlstream.fill(t, 2.5)
        got = fc.managed(t)  # host memory: handed over once the fill has run
        assert got["first"] == 2.5
        assert got["data"] == t.data_ptr and got["device"] == (kDLCPU, 0)
        assert got["shape"] == (2, 3) and got["strides"] == (3, 1) and got["dtype"] == (kDLFloat, 32, 1)
        assert got["version"][0] == 1 and got["flags"] == 0 and got["byte_offset"] == 0
        before = dlstream._dlstream._exchange_stats()["managed_tensor_from_py_object_no_sync"]
        fc.managed(t)
        assert dlstream._dlstream._exchange_stats()["managed_tensor_from_py_object_no_sync"] == before + 1


def test_the_host_export_waits_for_a_held_write(fc, no_leaks):
    s = dlstream.Stream(CPU)
    t = dlstream.empty(8, "float32", device=CPU, stream=s)
    dlstream.fill(t, 0.0, stream=s)
    latch = held(s, timeout=60)
    dlstream.fill(t, 5.0, stream=s)  # held
    opener = threading.Timer(0.3, latch.open)  # opens it while the consumer's call waits
    opener.start()
    got = fc.managed(t)
    opener.join()
    assert got["first"] == 5.0 and not latch.timed_out
    latch.close()
    t.close()
    s.close()


NEGATIVE = r"""
import dlstream, _dls_fake_consumer as fc
s = dlstream.Stream("cpu")
t = dlstream.empty(8, "float32", device="cpu", stream=s)
dlstream.fill(t, 0.0, stream=s)
s.synchronize()
latch = dlstream.Latch("cpu")
latch.wait(s, timeout=60)
dlstream.fill(t, 5.0, stream=s)
print("first", fc.managed(t)["first"])  # nothing orders it: read before the held write
latch.open()
s.synchronize()
"""


def test_negative_control_without_the_rule_reads_before_the_write(fc):
    r = run_python(NEGATIVE, env=RULE_OFF)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "first 0.0" in r.stdout, r.stdout


def test_a_held_export_keeps_the_memory(fc, no_leaks):
    t = dlstream.empty(4, "float32", device=CPU)
    dlstream.fill(t, 1.0)
    kept = fc.hold(t)
    ptr = t.data_ptr
    t.close()  # the export holds the memory
    assert fc.held_info(kept)["data"] == ptr and fc.held_info(kept)["first"] == 1.0
    del kept  # the deleter: freed in stream order


def test_current_work_stream(fc):
    assert fc.stream(dlstream.Tensor, kDLCPU, 0) == 0  # host memory has no stream
    with pytest.raises(dlstream.InvalidDeviceError, match=r"current_work_stream\(device_type=99, device_id=0\): not "
                                                          "a device dlstream handles"):
        fc.stream(dlstream.Tensor, 99, 0)


def test_allocator_and_import(fc, no_leaks):
    t = fc.allocate(dlstream.Tensor, (3, 4), kDLFloat, 32, kDLCPU, 0)
    assert isinstance(t, dlstream.Tensor)
    assert (t.shape, t.dtype, t.device) == ((3, 4), "float32", "cpu:0")
    dlstream.fill(t, 3.0)
    dlstream.synchronize()
    assert (np.from_dlpack(t) == 3.0).all()
    t.close()
    with pytest.raises(RuntimeError, match="allocator: InvalidDeviceError: .*not one dlstream handles"):
        fc.allocate(dlstream.Tensor, (3,), kDLFloat, 32, 99, 0)
    with pytest.raises(RuntimeError, match="allocator: InvalidTensorError: .*shape\\[0\\] = -3 is negative"):
        fc.allocate(dlstream.Tensor, (-3,), kDLFloat, 32, kDLCPU, 0)


def test_to_object_views_a_producers_memory(fc, no_leaks):
    a = np.arange(6, dtype=np.float32)
    t = fc.to_object(dlstream.Tensor, a.__dlpack__(max_version=(1, 0)))
    assert isinstance(t, dlstream.Tensor) and t.shape == (6,) and t.data_ptr == a.ctypes.data
    dlstream.fill(t, 7.0)
    dlstream.synchronize()
    assert (a == 7.0).all()
    t.close()


def test_errors_name_the_entry(fc, no_leaks):
    class Impostor:
        __dlpack_c_exchange_api__ = dlstream.Tensor.__dlpack_c_exchange_api__

    with pytest.raises(dlstream.ArgumentTypeError, match="managed_tensor_from_py_object_no_sync.*not a dlstream"):
        fc.managed(Impostor())
    t = dlstream.empty(4, "float32", device=CPU)
    t.close()
    with pytest.raises(dlstream.InvalidHandleError, match="managed_tensor_from_py_object_no_sync: the tensor was "
                                                          "released"):
        fc.managed(t)


def test_numpy_still_takes_the_capsule(no_leaks):
    with dlstream.empty(5, "float32", device=CPU) as t:
        dlstream.fill(t, 4.0)
        assert (np.from_dlpack(t) == 4.0).all()


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_torch_from_dlpack_of_host_memory(no_leaks):
    with dlstream.empty(5, "float32", device=CPU) as t:
        dlstream.fill(t, 6.0)
        x = torch.from_dlpack(t)
        assert x.data_ptr() == t.data_ptr and bool((x == 6.0).all())
        del x


def _tvm_ffi():
    return pytest.importorskip("tvm_ffi", reason="apache-tvm-ffi is not installed (a consumer of the table: .ci/run "
                               "installs it with torch)")


def test_tvm_ffi_reads_the_table(no_leaks):
    tvm_ffi = _tvm_ffi()
    with dlstream.empty((2, 3), "float32", device=CPU) as t:
        dlstream.fill(t, 2.0)
        before = dlstream._dlstream._exchange_stats()
        x = tvm_ffi.from_dlpack(t)
        after = dlstream._dlstream._exchange_stats()
        assert after["managed_tensor_from_py_object_no_sync"] == before["managed_tensor_from_py_object_no_sync"] + 1
        assert tuple(x.shape) == (2, 3) and (np.from_dlpack(x) == 2.0).all()
        del x


def test_tvm_ffi_functions_return_dlstream_tensors(no_leaks):
    tvm_ffi = _tvm_ffi()
    echo = tvm_ffi.get_global_func("testing.echo")
    with dlstream.empty(4, "float32", device=CPU) as t:
        dlstream.fill(t, 1.5)
        before = dlstream._dlstream._exchange_stats()["managed_tensor_to_py_object_no_sync"]
        y = echo(t)  # in through the table's export, back through its import
        assert isinstance(y, dlstream.Tensor) and y.data_ptr == t.data_ptr and y.shape == (4,)
        assert dlstream._dlstream._exchange_stats()["managed_tensor_to_py_object_no_sync"] == before + 1
        dlstream.synchronize()
        assert (np.from_dlpack(y) == 1.5).all()
        y.close()


# ---- CUDA ----

def test_torch_from_dlpack_and_the_table():
    """torch's from_dlpack (up to 2.15 at least) calls __dlpack__ with its current stream and reads no producer's
    table: the import is ordered by __dlpack__ (test_torch_on_its_stream_waits_for_a_held_write). Should a torch read
    it, this test says so."""
    if torch is None:
        pytest.skip("torch is not installed")
    dev = "cuda:0" if TORCH_CUDA else "cpu"
    with dlstream.empty(4, "float32", device=dev) as t:
        before = dlstream._dlstream._exchange_stats()["managed_tensor_from_py_object_no_sync"]
        x = torch.from_dlpack(t)
        used = dlstream._dlstream._exchange_stats()["managed_tensor_from_py_object_no_sync"] > before
        del x
    if not used:
        pytest.skip(f"torch {torch.__version__}'s from_dlpack calls __dlpack__ and reads no producer's exchange API "
                    "(torch/utils/dlpack.py): the import goes through __dlpack__, ordered the same way")


needs_cuda_dlstream = pytest.mark.skipif(dlstream.device_count("cuda") == 0, reason="no CUDA device")

TABLE_HELD = r"""
import dlstream, _dls_fake_consumer as fc
dev = "cuda:0"
w = dlstream.Stream(dev)
legacy = dlstream.Stream.legacy(dev)
n = 1 << 20
t = dlstream.empty(n, "float32", device=dev, stream=w)
dlstream.fill(t, 0.0, stream=w)
out = dlstream.empty(n, "float32", device=dev, stream=legacy)
dlstream.fill(out, 0.0, stream=legacy)
dlstream.synchronize()
latch = dlstream.Latch(dev)
latch.wait(w, timeout=30)
dlstream.fill(t, 5.0, stream=w)                       # held on w
assert fc.stream(dlstream.Tensor, 2, 0) == 0          # the table's work stream: the legacy default stream
kept = fc.hold(t)                                     # exported to it: it waits for w's held write
axpy = dlstream.builtin_function("dls_axpy_f32", dev)
axpy.launch((n + 255) // 256, 256, n, 1.0, t.data_ptr, out, stream=legacy)   # a raw pointer: only the export orders it
if ORDERED:
    print("busy", not legacy.query())
    latch.open()
legacy.synchronize()
import numpy as np
host = np.zeros(n, np.float32)
dlstream.copy(host, out)
print("value", float(host[0]))
latch.open()
del kept
dlstream.synchronize()
"""


def _held(code, ordered, after, before):
    """Runs a held-write script in a fresh interpreter (ORDERED set; the rule off for the control) and checks that
    the ordered run's consumer stream was held and read `after`, the control's read `before` (the race is real)."""
    r = run_python(f"ORDERED = {ordered}\n" + code, env=None if ordered else RULE_OFF, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    want = ["busy True", f"value {after}"] if ordered else [f"value {before}"]
    assert all(w in r.stdout for w in want), f"wanted {want}: {r.stdout}"


@needs_cuda_dlstream
@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "rule_off_control"])
def test_the_tables_export_orders_its_work_stream_after_a_held_write(fc, ordered):
    _held(TABLE_HELD, ordered, 5.0, 0.0)


@needs_cuda_dlstream
def test_tvm_ffi_on_cuda(no_leaks):
    tvm_ffi = _tvm_ffi()
    with dlstream.empty(8, "float32", device="cuda:0") as t:
        before = dlstream._dlstream._exchange_stats()["managed_tensor_from_py_object_no_sync"]
        x = tvm_ffi.from_dlpack(t)
        assert dlstream._dlstream._exchange_stats()["managed_tensor_from_py_object_no_sync"] == before + 1
        assert str(x.device).startswith("cuda") and tuple(x.shape) == (8,)
        del x


TORCH_HELD = r"""
import torch, dlstream
dev = "cuda:0"
# torch's kernels load at their first launch, which can wait for an idle device (a held latch never is): warm up.
(torch.zeros(1 << 20, device=dev) + 1).sum().item()
w = dlstream.Stream(dev)
t = dlstream.empty(1 << 20, "float32", device=dev, stream=w)
dlstream.fill(t, 0.0, stream=w)
w.synchronize()
latch = dlstream.Latch(dev)
latch.wait(w, timeout=30)
dlstream.fill(t, 5.0, stream=w)             # held on w
x = torch.from_dlpack(t)                    # ordered before torch's current stream
y = x + 1                                   # torch's op, after the held write when ordered
if ORDERED:
    print("busy", not torch.cuda.current_stream().query())
    latch.open()
torch.cuda.synchronize()
print("value", float(y[0]))
latch.open()
dlstream.synchronize()
"""


@needs_torch_cuda
@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "rule_off_control"])
def test_torch_on_its_stream_waits_for_a_held_write(ordered):
    _held(TORCH_HELD, ordered, 6.0, 1.0)
