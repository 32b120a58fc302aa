# SPDX-License-Identifier: Apache-2.0
"""The hazard rule's record and wait while another CUDA context is current on the thread (a private context
someone made, as a library on another device would): the rule's crossing still orders the streams, and the
thread's context is the one it was. CUDA runs a call on a created stream in that stream's context, and dlstream
makes such a call without making its own context current first (docs/design-decisions.md, decision 20). Latch, with the
rule-off negative control (DLSTREAM_TEST_NO_HAZARDS=1)."""
import pytest

from conftest import needs_cuda

CROSSING = """
import ctypes, numpy as np, dlstream
cu = ctypes.CDLL("libcuda.so.1")
P = ctypes.c_void_p
assert cu.cuInit(0) == 0
dev = ctypes.c_int()
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
s, s2 = dlstream.Stream("cuda:0"), dlstream.Stream("cuda:0")
t = dlstream.empty(1 << 16, "float32", device="cuda:0", stream=s)
u = dlstream.empty(1 << 16, "float32", device="cuda:0", stream=s2)
dlstream.fill(t, 1.0)
dlstream.fill(u, 0.0)
dlstream.copy(u, t)                     # s2 now uses t: the next crossing takes the rule's record and wait
s.synchronize(); s2.synchronize()
ctx = P()                               # a private context, current from here on (cuCtxCreate makes it so)
create = getattr(cu, "cuCtxCreate_v4", None)
r = create(ctypes.byref(ctx), None, 0, dev) if create is not None else cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
assert r == 0, r
latch = dlstream.Latch("cuda:0")
latch.wait(s, timeout=30.0)
dlstream.fill(t, 7.0)                   # on s, behind the latch: the crossing records s's mark
dlstream.copy(u, t)                     # on s2: waits for it
pending = s2.query() is False
cur = P()
assert cu.cuCtxGetCurrent(ctypes.byref(cur)) == 0
same = cur.value == ctx.value
if {rule_off}:
    s2.synchronize()                    # rule off: nothing holds s2, its copy reads the old 1s
latch.open()
s.synchronize(); s2.synchronize()
got = np.empty(1 << 16, np.float32)
dlstream.copy(got, u, stream=s2); s2.synchronize()
assert cu.cuCtxGetCurrent(ctypes.byref(cur)) == 0
print(pending, same, cur.value == ctx.value, float(got[-1]))
"""


@needs_cuda
@pytest.mark.parametrize("rule_off", [False, True])
def test_a_crossing_orders_the_streams_with_another_context_current(rule_off):
    from conftest import RULE_OFF, run_python
    env = dict(RULE_OFF) if rule_off else {}
    r = run_python(CROSSING.format(rule_off=rule_off), env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    pending, same, still, got = r.stdout.strip().splitlines()[-1].split()
    assert same == "True" and still == "True", "dlstream left another context current than the thread's own"
    if rule_off:
        assert float(got) == 1.0, f"negative control (rule off): the copy saw {got}"
    else:
        assert pending == "True", "the copy on s2 did not wait behind the held fill on s"
        assert float(got) == 7.0, f"the copy saw {got}"
