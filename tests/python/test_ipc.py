# SPDX-License-Identifier: Apache-2.0
"""Tensors shared with another process (Tensor.ipc_handle, dlstream.from_ipc; docs/ipc.md).

CI (no GPU): what is refused, and the wiring of the ordering through the null CUDA driver (bench/null_driver.c): an
import's stream waits for the exporter's event, its close writes the exporter's gate word with the value the
exporter's free waits for, and the test-only switch turns both off.

GPU (tests/python/ipc_child.py in two processes, on one GPU and on two): the importer's first use waits for the
exporter's write a latch holds, and the exporter's memory is not reused before the importer's close while the
importer's read is held; each with its negative control (DLSTREAM_TEST_IPC_NO_WAIT=1), which sees the race."""
import os
import subprocess
import sys

import pytest

import dlstream
from conftest import needs_cuda, run_python

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "ipc_child.py")
BUILD = os.environ.get("DLSTREAM_TESTS_BUILD_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(dlstream.__file__))))
NULL_DRIVER = os.path.join(BUILD, "bench", "null_driver")
NO_WAIT = {"DLSTREAM_TEST_IPC_NO_WAIT": "1"}
N = 1 << 20


# ---- refusals (every machine) ----

def test_cpu_memory_is_not_shared(no_leaks):
    with pytest.raises(dlstream.NotSupportedError, match=r"empty: dls_tensor_empty_ipc.*cpu:0 cannot share memory "
                                                         r"with other processes"):
        dlstream.empty(16, "float32", device="cpu", ipc=True)
    with dlstream.empty(16, "float32", device="cpu") as t:
        with pytest.raises(dlstream.NotSupportedError, match=r"Tensor.ipc_handle: .*the cpu backend has no "
                                                             r"interprocess memory"):
            t.ipc_handle()
        with pytest.raises(dlstream.InvalidArgumentError, match=r"ipc_handle\(stream=5\): not a stream"):
            t.ipc_handle(stream=5)


def test_bad_handles_are_refused(no_leaks):
    with pytest.raises(dlstream.InvalidArgumentError, match=r"from_ipc\(handle=<10 bytes>\): a handle is 1024 bytes"):
        dlstream.from_ipc(b"x" * 10)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"from_ipc\(handle=3\): expected the bytes"):
        dlstream.from_ipc(3)
    with pytest.raises(dlstream.InvalidArgumentError, match="the handle is not one dls_.*_export_ipc made"):
        dlstream.from_ipc(bytes(1024))
    with pytest.raises(TypeError):
        dlstream.from_ipc()


def test_a_released_tensor_is_refused(no_leaks):
    t = dlstream.empty(4, "float32", device="cpu")
    t.close()
    with pytest.raises(dlstream.InvalidHandleError, match="Tensor.ipc_handle: the tensor was released"):
        t.ipc_handle()


# ---- the wiring, through the null CUDA driver ----

NULL_SIDE = r'''
import ctypes, json, sys
import dlstream
lib = ctypes.CDLL("libcuda.so.1")
u32, ul = ctypes.c_uint32, ctypes.c_ulong
def stats():
    s, n, w = ctypes.c_void_p(), ul(), ul()
    lib.dls_null_stats(ctypes.byref(s), ctypes.byref(n), ctypes.byref(w))
    vw, vv, ww, wv = ul(), u32(), ul(), u32()
    lib.dls_null_ipc_stats(ctypes.byref(vw), ctypes.byref(vv), ctypes.byref(ww), ctypes.byref(wv))
    return {"event_waits": w.value, "value_waits": vw.value, "wait_value": vv.value, "value_writes": ww.value,
            "write_value": wv.value}
out = {}
'''

NULL_EXPORT = NULL_SIDE + r'''
t = dlstream.empty(1024, "float32", device="cuda:0", ipc=True)
handles = [t.ipc_handle().hex(), t.ipc_handle().hex()]     # two exports: the free waits for both
before = stats()
t.close()
dlstream._dlstream._deferred_poll()
after = stats()
out["handles"] = handles
out["value_waits"] = after["value_waits"] - before["value_waits"]
out["wait_value"] = after["wait_value"]
dlstream._dlstream._deferred_poll()
out["pending"] = dlstream._dlstream._deferred_pending()
print(json.dumps(out))
'''

NULL_IMPORT = NULL_SIDE + r'''
h = bytes.fromhex(sys.argv[1] if len(sys.argv) > 1 else HANDLE)
before = stats()
x = dlstream.from_ipc(h)
mid = stats()
out["shape"], out["dtype"], out["device"] = x.shape, x.dtype, x.device
try:
    dlstream.from_ipc(h)
except dlstream.StateError as e:
    out["again"] = str(e)
x.close()
dlstream._dlstream._deferred_poll()
after = stats()
out["event_waits"] = mid["event_waits"] - before["event_waits"]
out["value_writes"] = after["value_writes"] - mid["value_writes"]
out["write_value"] = after["write_value"]
out["pending"] = dlstream._dlstream._deferred_pending()
out["live"] = {k: v for k, v in dlstream._dlstream._live_handles().items() if v}
print(json.dumps(out))
'''


def _null(code, env=None, handle=None):
    import json
    e = {"LD_LIBRARY_PATH": NULL_DRIVER, **(env or {})}
    if handle is not None:
        code = f"HANDLE = {handle!r}\n" + code
    r = run_python(code, env=e)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


needs_null_driver = pytest.mark.skipif(
    not os.path.exists(os.path.join(NULL_DRIVER, "libcuda.so.1")),
    reason=f"no null CUDA driver (bench/null_driver.c) in {NULL_DRIVER}: it is built in a build tree (an installed "
           "dlstream: set DLSTREAM_TESTS_BUILD_DIR)")


@needs_null_driver
@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "no_wait_control"])
def test_the_handoff_is_wired_both_ways(ordered):
    env = {} if ordered else NO_WAIT
    exp = _null(NULL_EXPORT, env)
    assert exp["pending"] == 0
    got = [_null(NULL_IMPORT, env, handle=h) for h in exp["handles"]]
    for imp in got:
        assert (imp["shape"], imp["dtype"], imp["device"]) == ([1024], "float32", "cuda:0")
        assert "imported that handle already" in imp["again"]
        assert imp["pending"] == 0 and imp["live"] == {}, imp
        assert imp["value_writes"] == 1  # the close writes the gate word, ordered or not
    if ordered:
        # the import's stream waited for the exporter's event; the exporter's free waited for each export's word,
        # the last for the value the second importer wrote
        assert [imp["event_waits"] for imp in got] == [1, 1]
        assert exp["value_waits"] == 2
        assert exp["wait_value"] == got[1]["write_value"] != 0
    else:
        assert [imp["event_waits"] for imp in got] == [0, 0]
        assert exp["value_waits"] == 0



# ---- code is loaded before anything waits: the importer's first built-in call ----
# A real driver's module load may wait for the device to drain: if the built-ins were loaded at the first built-in
# call, behind a stream waiting for another process's event (or a latch), that call would wait on the host until the
# wait passed (the exporter's latch timed out in the GPU test below). dlstream loads them when it opens the device.

NULL_LOAD_ORDER = NULL_SIDE + r"""
lib.dls_null_order_stats.argtypes = [ctypes.POINTER(ul)]
def loads_after_wait():
    v = ul()
    lib.dls_null_order_stats(ctypes.byref(v))
    return v.value
s = dlstream.Stream("cuda:0")
if SCENARIO == "import":
    x = dlstream.from_ipc(bytes.fromhex(HANDLE), stream=s)  # s waits for the exporter's event
else:
    t = dlstream.Stream("cuda:0")
    s.wait(t.record())                                        # s waits for another stream
    x = dlstream.empty(1024, "float32", device="cuda:0", stream=s)
y = dlstream.empty(1024, "float32", device="cuda:0", stream=s)
try:
    dlstream.copy(y, x, stream=s)                             # this process's first built-in call
except dlstream.UnavailableError:                             # built without nvcc: no built-in kernels
    out["unavailable"] = True
out["waits"] = stats()["event_waits"]
out["loads_after_wait"] = loads_after_wait()
x.close()
y.close()
print(json.dumps(out))
"""


@needs_null_driver
@pytest.mark.parametrize("scenario", ["import", "stream_wait"])
@pytest.mark.parametrize("lazy", [False, True], ids=["loaded_with_the_device", "lazy_control"])
def test_no_code_is_loaded_behind_a_stream_wait(scenario, lazy):
    handle = _null(NULL_EXPORT)["handles"][0] if scenario == "import" else ""
    env = {"DLSTREAM_TEST_LAZY_BUILTINS": "1"} if lazy else {}
    got = _null(f"SCENARIO = {scenario!r}\n" + NULL_LOAD_ORDER, env, handle=handle)
    if got.get("unavailable"):
        pytest.skip("dlstream was built without nvcc: no CUDA built-in kernels to load")
    assert got["waits"] >= 1, got
    if lazy:
        assert got["loads_after_wait"] == 1, f"negative control: the first call's load follows the wait: {got}"
    else:
        assert got["loads_after_wait"] == 0, f"a module was loaded behind a stream wait: {got}"

# ---- two processes on GPUs ----

def _cuda_count():
    return dlstream.device_count("cuda")


class _Side:
    """A running ipc_child.py: lines in, lines out."""

    def __init__(self, role, device, env=None):
        e = dict(os.environ)
        e["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        e.update(env or {})
        self.p = subprocess.Popen([sys.executable, CHILD, role, device, str(N)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)

    def hear(self, want):
        line = self.p.stdout.readline().split()
        if not line or line[0] != want:
            self.p.kill()
            raise AssertionError(f"expected {want!r}, got {line!r}: {self.p.stderr.read()[-3000:]}")
        return line[1:]

    def say(self, *words):
        self.p.stdin.write(" ".join(words) + "\n")
        self.p.stdin.flush()

    def end(self):
        out, err = self.p.communicate(timeout=60)
        assert self.p.returncode == 0, err[-3000:]
        assert "end clean" in out, out + err[-3000:]


def _devices(where):
    if where == "two_gpus" and _cuda_count() < 2:
        pytest.skip(f"needs 2 CUDA GPUs; {_cuda_count()} visible")
    return ("cuda:0", "cuda:1" if where == "two_gpus" else "cuda:0")


@needs_cuda
@pytest.mark.parametrize("where", ["one_gpu", "two_gpus"])
@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "no_wait_control"])
def test_first_use_waits_for_the_exporters_held_write(where, ordered):
    dev_e, dev_i = _devices(where)
    importer = _Side("import-read", dev_i, None if ordered else NO_WAIT)
    importer.hear("ready")  # its device opened first: no code load of its own runs while the exporter holds a stream
    exporter = _Side("export-held", dev_e)
    handle = exporter.hear("handle")[0]
    importer.say("handle", handle)
    busy = importer.hear("queued")[0]
    exporter.say("open")
    value = float(importer.hear("value")[0])
    importer.end()
    exporter.say("exit")
    exporter.end()
    if ordered:
        assert busy == "True", "the importer's stream did not wait for the held write"
        assert value == 42.0
    else:
        assert value == 0.0, "without the event wait the import read before the write: the race is real"


@needs_cuda
@pytest.mark.parametrize("where", ["one_gpu", "two_gpus"])
@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "no_wait_control"])
def test_exporters_free_waits_for_the_importers_close(where, ordered):
    dev_e, dev_i = _devices(where)
    exporter = _Side("export-free", dev_e, None if ordered else NO_WAIT)
    handle = exporter.hear("handle")[0]
    importer = _Side("import-held", dev_i)
    importer.say("handle", handle)
    importer.hear("held")
    exporter.say("reuse")  # the exporter allocates and writes 7 into as much memory as it can get back
    exporter.hear("reused")
    importer.say("go")
    value = float(importer.hear("value")[0])
    importer.end()
    exporter.say("exit")
    exporter.end()
    if ordered:
        assert value == 42.0
    else:
        assert value == 7.0, "without the gate the exporter reused the memory under the importer's read"
