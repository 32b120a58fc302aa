# SPDX-License-Identifier: Apache-2.0
"""The hazard rule seen from Python: dlstream's own tensors used on several streams, and another framework's
tensors used on a stream other than its current one (the framework's stream then waits for the use, a read as
much as a write), each with a latch and a negative control."""
import numpy as np
import pytest

import dlstream
from conftest import CPU, settle


def held(stream):
    latch = dlstream.Latch(CPU)
    latch.wait(stream, timeout=30.0)
    return latch


def test_a_read_on_another_stream_waits_for_an_own_tensors_pending_fill(no_leaks):
    """The issue's first example: t filled on s (held), copied into u on s2: u must hold 7, not 0."""
    s, s2 = dlstream.Stream(CPU), dlstream.Stream(CPU)
    t = dlstream.empty(8, "float32", device=CPU, stream=s)
    u = dlstream.empty(8, "float32", device=CPU, stream=s2)
    dlstream.fill(t, 0.0)
    dlstream.fill(u, 0.0)
    s.synchronize()
    s2.synchronize()
    latch = held(s)
    dlstream.fill(t, 7.0)       # on s, behind the latch
    dlstream.copy(u, t)         # u's stream s2: it must wait for s
    assert s2.query() is False, "the copy on s2 waits for the fill on s"
    latch.open()
    s2.synchronize()
    out = np.empty(8, np.float32)
    dlstream.copy(out, u, stream=s2)
    s2.synchronize()
    assert (out == 7).all()
    for o in (latch, t, u, s, s2):
        o.close()
    settle()


FRAMEWORK_WAR = """
import sys, numpy as np, dlstream
sys.path.insert(0, {tests!r})
import _dls_fake_exchange as fx
f, s = dlstream.Stream("cpu"), dlstream.Stream("cpu")
fx.set_current_stream(f.ptr)
x = np.ones(8, np.float32)
fx_x = fx.FakeTensor(x, x.ctypes.data, x.shape)
out = dlstream.empty(8, "float32", device="cpu", stream=s)
latch = dlstream.Latch("cpu")
latch.wait(s, timeout=30.0)
dlstream.copy(out, fx_x, stream=s)      # dlstream reads x on s, behind the latch
dlstream.fill(fx_x, 5.0)                # the framework's next work on x: on its current stream f
if {rule_off}:
    f.synchronize()                     # rule off: nothing holds f, so its write lands first
latch.open()
s.synchronize(); f.synchronize()
got = np.empty(8, np.float32)
dlstream.copy(got, out, stream=s); s.synchronize()
print(float(got[0]))
"""


@pytest.mark.parametrize("rule_off", [False, True])
def test_a_framework_stream_waits_for_a_read_on_another_stream_with_negative_control(rule_off):
    """x is the fake framework's tensor (current stream f). dlstream reads x on s (held); then the framework writes
    x on f. f must wait for the read (write after read): the read sees 1. With the rule off (the negative
    control, DLSTREAM_TEST_NO_HAZARDS=1) f's write lands first and the read sees 5."""
    import os
    from conftest import RULE_OFF, run_python
    tests = os.path.dirname(os.path.abspath(__file__))
    fx_dir = os.path.dirname(pytest.importorskip("_dls_fake_exchange").__file__)
    env = {"PYTHONPATH": os.pathsep.join([fx_dir, tests] + [p for p in __import__("sys").path if p])}
    if rule_off:
        env.update(RULE_OFF)
    r = run_python(FRAMEWORK_WAR.format(tests=tests, rule_off=rule_off), env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = float(r.stdout.strip().splitlines()[-1])
    assert got == (5.0 if rule_off else 1.0), f"rule {'off' if rule_off else 'on'}: the read saw {got}"
