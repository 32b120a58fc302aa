# SPDX-License-Identifier: Apache-2.0
"""The capture-state question on a wrapped stream, without a GPU: the null CUDA driver (bench/null_driver.c) keeps a
capture begun through it, and the CUDA backend asks the state alone first (cuStreamIsCapturing) and the full question
(cuStreamGetCaptureInfo, with the capture's id) only while a capture is active. A framework's capture, begun outside
dlstream, must still be seen: by dlstream.capture_status, and by the rule that refuses an eager wait on a record the
capture took (that refusal needs the capture's id). A backend that took the first answer's "active" without asking
for the id, or that skipped the question, fails here."""
import os

import pytest

import dlstream
from conftest import run_python

BUILD = os.environ.get("DLSTREAM_TESTS_BUILD_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(dlstream.__file__))))
NULL_DRIVER = os.path.join(BUILD, "bench", "null_driver")

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(NULL_DRIVER, "libcuda.so.1")),
    reason=f"no null CUDA driver (bench/null_driver.c) in {NULL_DRIVER}: it is built in a build tree (an installed "
           "dlstream: set DLSTREAM_TESTS_BUILD_DIR)")

BODY = r'''
import ctypes, json
import dlstream
lib = ctypes.CDLL("libcuda.so.1")

def entry(name, *argtypes):
    fn, found = ctypes.c_void_p(), ctypes.c_int()
    lib.cuGetProcAddress_v2(name.encode(), ctypes.byref(fn), 12000, ctypes.c_uint64(0), ctypes.byref(found))
    assert fn.value, name
    return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(fn.value)

create = entry("cuStreamCreate", ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint)
begin = entry("cuStreamBeginCapture", ctypes.c_void_p, ctypes.c_uint)
end = entry("cuStreamEndCapture", ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
raw = ctypes.c_void_p()
assert create(ctypes.byref(raw), 1) == 0
w = dlstream.Stream.wrap(raw.value, device="cuda:0")   # a framework's stream, as an int
out = {"before": dlstream.capture_status(w)}
assert begin(raw, 2) == 0                               # the framework begins a capture (relaxed)
out["during"] = dlstream.capture_status(w)
e = dlstream.Event("cuda:0")
e.record(w)                                             # a record the capture takes
other = dlstream.Stream("cuda:0")
try:
    other.wait(e)                                       # an eager stream tied to the capture: refused
    out["eager_wait"] = "queued"
except dlstream.StateError as x:
    out["eager_wait"] = "refused: " + str(x)
graph = ctypes.c_void_p()
assert end(raw, ctypes.byref(graph)) == 0
out["after"] = dlstream.capture_status(w)
e.close()
other.close()
w.close()
print(json.dumps(out))
'''


def test_a_capture_begun_outside_dlstream_is_seen_on_its_wrapped_stream():
    import json
    r = run_python(BODY, env={"LD_LIBRARY_PATH": NULL_DRIVER})
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert (got["before"], got["during"], got["after"]) == ("none", "active", "none"), got
    assert got["eager_wait"].startswith("refused"), got
