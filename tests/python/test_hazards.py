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


REPLAY = """
import numpy as np, dlstream
c, e, r = dlstream.Stream("cpu"), dlstream.Stream("cpu"), dlstream.Stream("cpu")
t = dlstream.empty(8, "float32", device="cpu", stream=c)
out = dlstream.empty(8, "float32", device="cpu", stream=c)
dlstream.fill(t, 1.0)
dlstream.fill(out, 0.0)
c.synchronize()
replay_first, graph_writes, eager_writes = {replay_first}, {graph_writes}, {eager_writes}
with dlstream.capture(c) as g:          # eager memory used in a capture: the graph keeps it, replays use it
    if graph_writes:
        dlstream.fill(t, 5.0)
    else:
        dlstream.copy(out, t)
first, later = (r, e) if replay_first else (e, r)
latch = dlstream.Latch("cpu")
latch.wait(first, timeout=30.0)
for step in (0, 1):
    if (step == 0) == replay_first:
        g.replay(stream=r)
    elif eager_writes:
        dlstream.fill(t, 7.0 if step == 0 else 9.0, stream=e)
    else:
        dlstream.copy(out, t, stream=e)
held = later.query() is False
if {rule_off}:
    later.synchronize()                 # rule off: nothing holds the later stream, so it runs first
latch.open()
first.synchronize(); later.synchronize()
got = np.empty(8, np.float32)
dlstream.copy(got, t if graph_writes and eager_writes else out, stream=c); c.synchronize()
print(held, float(got[0]))
"""

# (replay first, graph writes, eager writes): the value seen with the rule, and with it off.
REPLAY_HAZARDS = {
    "a replay reads after an eager write (RAW)": ((False, False, True), 7.0, 1.0),
    "an eager read after a replay wrote (RAW)": ((True, True, False), 5.0, 1.0),
    "a replay writes after an eager read (WAR)": ((False, True, False), 1.0, 5.0),
    "an eager write after a replay read (WAR)": ((True, False, True), 1.0, 9.0),
    "a replay writes after an eager write (WAW)": ((False, True, True), 5.0, 7.0),
    "an eager write after a replay wrote (WAW)": ((True, True, True), 9.0, 5.0),
}


@pytest.mark.parametrize("rule_off", [False, True])
@pytest.mark.parametrize("hazard", list(REPLAY_HAZARDS))
def test_a_graph_replay_is_ordered_with_eager_uses_with_negative_control(hazard, rule_off):
    """A dlstream.capture of a fill or copy of an eager tensor t, replayed on r, against eager work on e: the one
    held by a latch goes first, the later one must wait (it is still queued when the latch opens) and the value is
    the sequential program's. With the rule off (DLSTREAM_TEST_NO_HAZARDS=1, the negative control) the later one
    runs first and the value is wrong."""
    from conftest import RULE_OFF, run_python
    (replay_first, graph_writes, eager_writes), right, wrong = REPLAY_HAZARDS[hazard]
    code = REPLAY.format(replay_first=replay_first, graph_writes=graph_writes, eager_writes=eager_writes,
                         rule_off=rule_off)
    r = run_python(code, env=RULE_OFF if rule_off else None, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    held, got = r.stdout.strip().splitlines()[-1].split()
    assert float(got) == (wrong if rule_off else right), f"{hazard}, rule {'off' if rule_off else 'on'}: saw {got}"
    if not rule_off:
        assert held == "True", f"{hazard}: the later stream did not wait behind the latch"


def test_a_graph_keeps_what_its_capture_read_until_it_is_closed(no_leaks):
    """A NumPy array a capture reads is kept by the graph (not by the caller): it outlives every replay, and goes
    with the graph."""
    import weakref
    s = dlstream.Stream(CPU)
    out = dlstream.empty(8, "float32", device=CPU, stream=s)
    x = np.full(8, 3.0, np.float32)
    gone = weakref.ref(x)
    with dlstream.capture(s) as g:
        dlstream.copy(out, x)
    del x
    settle()
    assert gone() is not None, "the graph keeps the array its capture read"
    g.replay()
    got = np.zeros(8, np.float32)
    dlstream.copy(got, out, stream=s)
    s.synchronize()
    assert (got == 3.0).all()
    g.close()
    settle()
    assert gone() is None, "the array goes with the graph"
    out.close()
    s.close()
    settle()


ALIAS = """
import os, numpy as np, dlstream
via, dev, rule_off = {via!r}, {dev!r}, {rule_off}
if via.startswith("torch"):
    import torch


def round_trip(t):
    # The tensor leaves through DLPack and comes back: dlstream sees an import of its own exported memory.
    return dlstream.from_dlpack(np.from_dlpack(t) if via == "numpy" else torch.from_dlpack(t))


def value(t):
    return float(np.from_dlpack(t)[0]) if dev == "cpu" else float(torch.from_dlpack(t).cpu()[0])


def run(hazard):
    a, b = dlstream.Stream(dev), dlstream.Stream(dev)
    t, out = (dlstream.empty(4096, "float32", device=dev, stream=s) for s in (a, b))
    dlstream.fill(t, 1.0), dlstream.fill(out, 0.0)
    alias = round_trip(t)
    dlstream.synchronize()
    latch = dlstream.Latch(dev)
    latch.wait(a, timeout=30.0)
    if hazard == "raw":
        dlstream.fill(t, 7.0, stream=a)         # A writes the original, behind the latch
        dlstream.copy(out, alias, stream=b)     # B reads the alias: it must wait for A
    elif hazard == "war":
        dlstream.copy(out, t, stream=a)         # A reads the original
        dlstream.fill(alias, 9.0, stream=b)     # B overwrites it through the alias: after A's read
    else:
        dlstream.fill(t, 5.0, stream=a)         # A writes the original
        dlstream.fill(alias, 9.0, stream=b)     # B writes the alias: B's write must be the last
    for _ in range(2000):                       # a fair chance for B to run ahead if it may (bounded: a pass
        if b.query():                           # never depends on it)
            break
        os.sched_yield()
    if rule_off:
        b.synchronize()                         # rule off: nothing holds B, so it runs first
    latch.open()
    a.synchronize(); b.synchronize()
    return value(t if hazard == "waw" else out)


print(" ".join(str(run(h)) for h in ("raw", "war", "waw")))
"""


def _alias_via(via):
    """The device and the skip reason (None: it runs) of a round trip through `via`."""
    from conftest import TORCH_CUDA, torch
    if via == "numpy":
        return "cpu", None
    if torch is None:
        return None, "torch is not installed (the round trip through torch)"
    if via == "torch-cuda" and not TORCH_CUDA:
        return None, "needs torch with CUDA and a CUDA device (the round trip through torch on the GPU)"
    return ("cuda:0" if via == "torch-cuda" else "cpu"), None


@pytest.mark.parametrize("via", ["numpy", "torch-cpu", "torch-cuda"])
@pytest.mark.parametrize("rule_off", [False, True])
def test_an_export_imported_back_is_ordered_against_the_original_with_negative_control(via, rule_off):
    """t exported (to NumPy or torch) and imported back is an alias: one buffer's hazard state. A (held by a latch)
    uses the original, B the alias; read after write, write after read and write after write each give the
    sequential answer (7, 1, 9). With the rule off (the negative control, DLSTREAM_TEST_NO_HAZARDS=1) B runs first
    and each gives the other answer (1, 9, 5)."""
    from conftest import RULE_OFF, run_python
    dev, why = _alias_via(via)
    if why:
        pytest.skip(why)
    r = run_python(ALIAS.format(via=via, dev=dev, rule_off=rule_off), env=dict(RULE_OFF) if rule_off else None,
                   timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = [float(v) for v in r.stdout.strip().splitlines()[-1].split()]
    want = [1.0, 9.0, 5.0] if rule_off else [7.0, 1.0, 9.0]
    assert got == want, f"rule {'off' if rule_off else 'on'} via {via}: (raw, war, waw) = {got}, wanted {want}"
