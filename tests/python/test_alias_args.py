# SPDX-License-Identifier: Apache-2.0
"""Aliases passed straight to a call: a NumPy array, a torch tensor (CPU, CUDA), a CuPy array or an exchange-API
tensor (the fake framework: the DLPack C exchange API's fast path and Function.launch's plan) over a dlstream
tensor's exported memory, given to a built-in or to Function.launch without dlstream.from_dlpack, is a use of that
tensor's buffer. Each hazard (read after write, write after read, write after write, both ways: the alias after the
original and the original after the alias) is held by a latch on one stream, with a negative control (the rule
off: the other answer)."""
import os
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, held

CHILD = r"""
import json, os, struct, sys
sys.path.insert(0, {tests!r})
import numpy as np, dlstream
via, dev, rule_off = {via!r}, {dev!r}, {rule_off}
N = 4096
if via.startswith("torch"):
    import torch
if via == "cupy-cuda":
    import cupy
if via == "fake":
    import _dls_fake_exchange as fx
    fw = dlstream.Stream(dev)                   # the fake framework's current stream: neither A nor B
    fx.set_current_stream(fw.ptr)


def fake(owner, ptr, n):
    return fx.FakeTensor(owner, ptr, (n,))


def alias(t):
    # t leaves through DLPack and its consumer's tensor is passed straight to calls (no dlstream.from_dlpack).
    if via == "numpy":
        return np.from_dlpack(t)
    if via == "fake":
        host = np.from_dlpack(t)
        return fake(host, host.ctypes.data, N)
    return cupy.from_dlpack(t) if via == "cupy-cuda" else torch.from_dlpack(t)


def view(k):
    # A slice of the alias: its bytes lie in t's buffer, at an offset.
    if via == "fake":
        return fake(k.a, np.from_dlpack(k.t).ctypes.data + 8, 4)
    return k.a[2:6]


def value(x):
    if isinstance(x, np.ndarray):
        return float(x[0])
    if dev.startswith("cpu"):
        return float(np.from_dlpack(x)[0])
    return float(cupy.asnumpy(cupy.from_dlpack(x))[0]) if via == "cupy-cuda" else float(torch.from_dlpack(x).cpu()[0])


def bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


axpy_fn = dlstream.builtin_function("dls_axpy_f32", dev)     # "u64,f32,cp,p": x read, y written
fill_fn = dlstream.builtin_function("dls_fill", dev)         # "p,u64,u32,u64": dst written
planned = None
if via == "fake":
    # A launch plan made before anything was exported, for the exchange-API type: a later call of the same shape
    # is read by the read pass's common case, which must hand an alias to the general way.
    px, py = np.ones(N, np.float32), np.zeros(N, np.float32)
    for _ in range(3):
        axpy_fn.launch(1, 32, N, 1.0, fake(px, px.ctypes.data, N), fake(py, py.ctypes.data, N))
    fw.synchronize()
    planned = axpy_fn._planned


def on_framework_stream(k, call):
    # The call names no stream: the fake framework's current stream (B here) decides, and its tensors would be
    # taken the fast way (nothing to order) were it not for the alias.
    fx.set_current_stream(k.B.ptr)
    try:
        call()
    finally:
        fx.set_current_stream(fw.ptr)


def plan_raw(k):
    on_framework_stream(k, lambda: axpy_fn.launch(1, 32, N, 1.0, k.a, fake(k.plain, k.plain.ctypes.data, N)))
    return k.plain


# name: what runs on A (held by a latch) and then on B, and which tensor holds the answer.
CASES = {{
    "copy reads the alias after a write (RAW)":
        lambda k: (dlstream.fill(k.t, 7.0, stream=k.A), dlstream.copy(k.out, k.a, stream=k.B), k.out)[-1],
    "axpy reads the alias after a write (RAW)":
        lambda k: (dlstream.fill(k.t, 7.0, stream=k.A), dlstream.axpy(1.0, k.a, k.out, stream=k.B), k.out)[-1],
    "copy reads a view of the alias after a write (RAW)":
        lambda k: (dlstream.fill(k.t, 7.0, stream=k.A), dlstream.copy(k.out4, k.view, stream=k.B), k.out4)[-1],
    "fill writes the alias after a read (WAR)":
        lambda k: (dlstream.copy(k.out, k.t, stream=k.A), dlstream.fill(k.a, 9.0, stream=k.B), k.out)[-1],
    "axpy writes the alias after a read (WAR)":
        lambda k: (dlstream.copy(k.out, k.t, stream=k.A), dlstream.axpy(1.0, k.ones, k.a, stream=k.B), k.out)[-1],
    "fill writes the alias after a write (WAW)":
        lambda k: (dlstream.fill(k.t, 5.0, stream=k.A), dlstream.fill(k.a, 9.0, stream=k.B), k.t)[-1],
    "axpy writes the alias after a write (WAW)":
        lambda k: (dlstream.fill(k.t, 5.0, stream=k.A), dlstream.axpy(1.0, k.ones, k.a, stream=k.B), k.t)[-1],
    "launch reads a cp alias after a write (RAW)":
        lambda k: (dlstream.fill(k.t, 7.0, stream=k.A), axpy_fn.launch(1, 32, N, 1.0, k.a, k.out, stream=k.B),
                   k.out)[-1],
    "launch writes a p alias after a read (WAR)":
        lambda k: (dlstream.copy(k.out, k.t, stream=k.A), axpy_fn.launch(1, 32, N, 1.0, k.ones, k.a, stream=k.B),
                   k.out)[-1],
    "launch writes a p alias after a write (WAW)":
        lambda k: (dlstream.fill(k.t, 5.0, stream=k.A), fill_fn.launch(1, 32, k.a, N, 4, bits(9.0), stream=k.B),
                   k.t)[-1],
    "the original is read after a write through the alias (RAW)":
        lambda k: (dlstream.fill(k.a, 7.0, stream=k.A), dlstream.copy(k.out, k.t, stream=k.B), k.out)[-1],
    "the original is written after a read through the alias (WAR)":
        lambda k: (dlstream.copy(k.out, k.a, stream=k.A), dlstream.fill(k.t, 9.0, stream=k.B), k.out)[-1],
    "the original is written after a write through the alias (WAW)":
        lambda k: (dlstream.fill(k.a, 5.0, stream=k.A), dlstream.fill(k.t, 9.0, stream=k.B), k.t)[-1],
    "the original is read after a launch wrote the alias (RAW)":
        lambda k: (axpy_fn.launch(1, 32, N, 1.0, k.ones, k.a, stream=k.A), dlstream.copy(k.out, k.t, stream=k.B),
                   k.out)[-1],
}}
if via == "fake":
    CASES["a planned launch reads the alias after a write (RAW)"] = \
        lambda k: (dlstream.fill(k.t, 7.0, stream=k.A), plan_raw(k))[-1]
    CASES["fill on the framework's stream writes the alias after a write (WAW)"] = \
        lambda k: (dlstream.fill(k.t, 5.0, stream=k.A), on_framework_stream(k, lambda: dlstream.fill(k.a, 9.0)),
                   k.t)[-1]


class K:
    pass


def run(case):
    k = K()
    k.A, k.B = dlstream.Stream(dev), dlstream.Stream(dev)
    k.t = dlstream.empty(N, "float32", device=dev, stream=k.A)
    k.out, k.ones = (dlstream.empty(N, "float32", device=dev, stream=k.B) for _ in range(2))
    k.out4 = dlstream.empty(4, "float32", device=dev, stream=k.B)
    k.plain = np.zeros(N, np.float32)
    for x, v in ((k.t, 1.0), (k.out, 0.0), (k.ones, 1.0), (k.out4, 0.0)):
        dlstream.fill(x, v)
    k.a = alias(k.t)
    k.view = view(k)
    dlstream.synchronize()
    latch = dlstream.Latch(dev)
    latch.wait(k.A, timeout=30.0)
    answer = CASES[case](k)
    for _ in range(2000):                       # a fair chance for B to run ahead if it may (bounded: a pass
        if k.B.query():                         # never depends on it)
            break
        os.sched_yield()
    if rule_off:
        k.B.synchronize()                       # rule off: nothing holds B, so it runs first
    latch.open()
    dlstream.synchronize()
    got = value(answer)
    latch.close()
    return got


print(json.dumps({{"planned": planned, "got": {{case: run(case) for case in CASES}}}}))
"""

# case: (the answer with the rule, without it)
WANT = {
    "copy reads the alias after a write (RAW)": (7.0, 1.0),
    "axpy reads the alias after a write (RAW)": (7.0, 1.0),
    "copy reads a view of the alias after a write (RAW)": (7.0, 1.0),
    "fill writes the alias after a read (WAR)": (1.0, 9.0),
    "axpy writes the alias after a read (WAR)": (1.0, 2.0),
    "fill writes the alias after a write (WAW)": (9.0, 5.0),
    "axpy writes the alias after a write (WAW)": (6.0, 5.0),
    "launch reads a cp alias after a write (RAW)": (7.0, 1.0),
    "launch writes a p alias after a read (WAR)": (1.0, 2.0),
    "launch writes a p alias after a write (WAW)": (9.0, 5.0),
    "the original is read after a write through the alias (RAW)": (7.0, 1.0),
    "the original is written after a read through the alias (WAR)": (1.0, 9.0),
    "the original is written after a write through the alias (WAW)": (9.0, 5.0),
    "the original is read after a launch wrote the alias (RAW)": (2.0, 1.0),
    "a planned launch reads the alias after a write (RAW)": (7.0, 1.0),
    "fill on the framework's stream writes the alias after a write (WAW)": (9.0, 5.0),
}


def _skip_reason(via):
    """The device of `via`, and why it cannot run here (None: it runs)."""
    from conftest import CUPY_CUDA, TORCH_CUDA, fake_exchange, torch
    if via == "numpy":
        return CPU, None
    if via == "fake":
        fake_exchange()
        return CPU, None
    if via == "cupy-cuda":
        return ("cuda:0", None) if CUPY_CUDA else (None, "needs CuPy with CUDA (aliases through cupy.from_dlpack)")
    if torch is None:
        return None, "torch is not installed (aliases through torch.from_dlpack)"
    if via == "torch-cuda" and not TORCH_CUDA:
        return None, "needs torch with CUDA and a CUDA device (aliases through torch.from_dlpack on the GPU)"
    return ("cuda:0" if via == "torch-cuda" else CPU), None


@pytest.mark.parametrize("rule_off", [False, True])
@pytest.mark.parametrize("via", ["numpy", "fake", "torch-cpu", "torch-cuda", "cupy-cuda"])
def test_an_alias_passed_straight_is_ordered_with_the_original_with_negative_control(via, rule_off):
    """Every hazard between the original t (its uses on A, held by a latch) and an alias of it passed straight to
    copy, axpy, fill and Function.launch ('cp' reads, 'p' writes) on B, both ways, and through a view: each gives
    the sequential answer. With the rule off (the negative control, DLSTREAM_TEST_NO_HAZARDS=1) B runs first and
    each gives the other answer."""
    from conftest import RULE_OFF, run_python
    dev, why = _skip_reason(via)
    if why:
        pytest.skip(why)
    tests = os.path.dirname(os.path.abspath(__file__))
    r = run_python(CHILD.format(tests=tests, via=via, dev=dev, rule_off=rule_off),
                   env=dict(RULE_OFF) if rule_off else None, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    import json
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if via == "fake":
        assert out["planned"] is True, "the plan the alias must bypass was made"
    wrong = {case: got for case, got in out["got"].items() if got != WANT[case][1 if rule_off else 0]}
    assert not wrong, f"rule {'off' if rule_off else 'on'} via {via}: {wrong} (wanted {WANT})"
    assert len(out["got"]) == (16 if via == "fake" else 14)


def test_an_unrelated_array_is_no_alias(no_leaks):
    """A NumPy array of its own memory, passed while a dlstream tensor is exported and its fill is held on A: the
    copy on B reading it does not wait for A (B finishes before the latch opens; had it waited, the latch would time
    out), and nothing is left behind."""
    a, b = dlstream.Stream(CPU), dlstream.Stream(CPU)
    t = dlstream.empty(64, "float32", device=CPU, stream=a)
    out = dlstream.empty(64, "float32", device=CPU, stream=b)
    dlstream.fill(t, 1.0)
    exported = np.from_dlpack(t)    # the registry of exported memory is not empty from here on
    mine = np.full(64, 3.0, np.float32)
    latch = held(a, timeout=30.0)
    dlstream.fill(t, 7.0)           # on a, behind the latch
    dlstream.copy(out, mine, stream=b)
    b.synchronize()
    assert not latch.timed_out, "the copy of an unrelated array waited for the held stream"
    latch.open()
    a.synchronize()                 # an array passed straight waits for nothing when read: the host waits first
    got = np.empty(64, np.float32)
    dlstream.copy(got, out, stream=b)
    b.synchronize()
    assert (got == 3.0).all() and exported[0] == 7.0
    del exported
    for o in (latch, t, out, a, b):
        o.close()


def test_a_launch_is_planned_while_memory_is_exported(fx):
    """Exported memory costs an alias lookup per tensor, not the launch plan: Function.launch of tensors of the
    exchange-API type that alias nothing is still planned and computes, while a NumPy array of a dlstream tensor
    lives."""
    t = dlstream.empty(16, "float32", device=CPU)
    exported = np.from_dlpack(t)
    f = dlstream.builtin_function("dls_axpy_f32", CPU)
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    fx_x, fx_y = fx.FakeTensor(x, x.ctypes.data, x.shape), fx.FakeTensor(y, y.ctypes.data, y.shape)
    for _ in range(3):
        f.launch(1, 32, 64, 1.0, fx_x, fx_y)
    assert f._planned, "no launch plan while a buffer is exported"
    f.launch(1, 32, 64, 1.0, fx_x, fx_y)  # by the plan
    dlstream.synchronize()
    assert (y == 4.0).all()
    del exported
    t.close()


def test_a_raw_address_of_exported_memory_stays_unordered():
    """An int address is the caller's word (docs/semantics.md): even over an exported buffer whose fill is held,
    Function.launch does not order it (the launch on B finishes first)."""
    a, b = dlstream.Stream(CPU), dlstream.Stream(CPU)
    t = dlstream.empty(64, "float32", device=CPU, stream=a)
    out = dlstream.empty(64, "float32", device=CPU, stream=b)
    dlstream.fill(t, 1.0)
    dlstream.fill(out, 0.0)
    exported = np.from_dlpack(t)
    latch = held(a, timeout=30.0)
    dlstream.fill(t, 7.0)
    dlstream.builtin_function("dls_axpy_f32", CPU).launch(1, 32, 64, 1.0, exported.ctypes.data, out, stream=b)
    b.synchronize()
    assert not latch.timed_out, "a raw address was ordered"
    latch.open()
    del exported
    for o in (latch, t, out, a, b):
        o.close()


def test_an_alias_write_refused_midway_leaks_nothing(no_leaks):
    """A call that takes an alias and then fails (axpy of two lengths) drops the alias's hold: no handle, no
    deferred release left behind."""
    s = dlstream.Stream(CPU)
    t = dlstream.empty(16, "float32", device=CPU, stream=s)
    dlstream.fill(t, 1.0)
    alias = np.from_dlpack(t)
    with pytest.raises(dlstream.InvalidArgumentError, match="as many elements"):
        dlstream.axpy(1.0, alias, np.zeros(8, np.float32), stream=s)
    with pytest.raises(dlstream.InvalidArgumentError, match="as many elements"):
        dlstream.axpy(1.0, np.zeros(8, np.float32), alias, stream=s)
    del alias
    s.synchronize()
    t.close()
    s.close()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
