# SPDX-License-Identifier: Apache-2.0
"""Fault injection through the Python layer: every injectable point of a few
operations fails in turn (the extension's _fault_* hooks, built in test builds
only). Each failure surfaces as the right dlstream exception with a message;
NumPy inputs are unchanged, outputs are either untouched or fully written,
reference counts and live handles return to their baseline, and the operation
succeeds again afterwards."""
import gc
import re
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, live, settle

ext = dlstream._dlstream
pytestmark = pytest.mark.skipif(not hasattr(ext, "_fault_arm"),
                                reason="built without DLS_FAULT_INJECTION (a Release build or pip install)")

INJECTED = (dlstream.OutOfMemoryError, dlstream.BackendError)


def sweep(op, check=None):
    """Runs op() once to count its points, then fails each point in turn;
    check(n, error) runs after each (error is None when the failure was
    absorbed). Returns (points, reported)."""
    op()  # warms the caches that a first run fills (stream wrappers, object caches)
    ext._clear_caches()
    base = live()
    ext._fault_arm(0)
    op()
    points = ext._fault_points()
    ext._fault_disarm()
    settle()
    assert points > 0, "the operation passed no injectable point"
    reported = 0
    for n in range(1, points + 1):
        ext._fault_arm(n)
        error = None
        try:
            op()
        except dlstream.Error as e:  # anything else fails the test
            error = e
        finally:
            ext._fault_disarm()
        injected, point = ext._fault_injected(), ext._fault_last()
        if error is not None:
            reported += 1
            assert injected, f"point {n}: {error!r} with no fault injected"
            assert isinstance(error, INJECTED), f"point {n} ({point}): {type(error).__name__}: {error}"
            assert isinstance(error, (MemoryError, RuntimeError))
            msg = str(error)  # "<call>: ..." or "<call>(...): ...", then the cause
            assert re.match(r"[A-Za-z_][\w.]*[(:]", msg) and ("fault injection" in msg or "memory" in msg), \
                f"point {n} ({point}): the message hides the call or the cause: {msg}"
        if check is not None:
            check(n, error)
        del error
        ext._clear_caches()
        after = live()
        assert after == base, f"point {n} ({point}): handles leaked: before {base}, after {after}"
        assert ext._deferred_pending() == 0, f"point {n} ({point}): a release is still pending"
    op()  # and a clean run succeeds afterwards
    settle()
    print(f"fault injection (python) {op.__qualname__.split('.')[0]}: {points} points, {reported} reported, "
          f"{points} survived")
    return points, reported


def test_axpy_on_numpy_survives_every_point(no_leaks):
    x = np.arange(64, dtype=np.float32)
    y = np.ones(64, dtype=np.float32)
    x0 = x.copy()
    refs = (sys.getrefcount(x), sys.getrefcount(y))
    s = dlstream.Stream(CPU)

    def op():
        y[:] = 1.0
        dlstream.axpy(2.0, x, y, stream=s)
        s.synchronize()

    def check(n, error):
        settle()
        assert (x == x0).all(), f"point {n}: the input changed"
        # A failure before the kernel was queued leaves y alone; one after it (recording the use) does not undo it.
        assert (y == 1.0).all() or (y == 2.0 * x0 + 1.0).all(), f"point {n}: y is half written: {y}"
        gc.collect()
        assert (sys.getrefcount(x), sys.getrefcount(y)) == refs, f"point {n}: a reference leaked"

    points, reported = sweep(op, check)
    assert reported > 0
    assert (y == 2.0 * x0 + 1.0).all()
    s.close()


def test_tensor_roundtrip_through_numpy_survives_every_point(no_leaks):
    def op():
        t = dlstream.empty(32, "float64", device=CPU)
        try:
            dlstream.fill(t, 3.0)
            a = np.from_dlpack(t)
            assert (a == 3.0).all()
            del a
        finally:
            t.close()

    sweep(op)


def test_streams_and_events_survive_every_point(no_leaks):
    def op():
        with dlstream.Stream(CPU) as s, dlstream.Stream.acquire(CPU) as p, dlstream.Event(timing=True, device=CPU) as e:
            s.record(e)
            p.wait(e)
            p.wait(s)
            e.synchronize()
            assert e.query()
            p.synchronize()

    sweep(op)


def test_stream_parallel_survives_every_point(no_leaks):
    out = np.zeros((3, 16), dtype=np.float32)
    refs = sys.getrefcount(out)

    def op():
        out[:] = 0
        with dlstream.Stream(CPU) as origin:
            with dlstream.stream_parallel(origin):
                for i in range(3):
                    with dlstream.branch():
                        dlstream.fill(out[i], float(i + 1))
            origin.synchronize()
        assert (out == np.arange(1, 4, dtype=np.float32)[:, None]).all()

    def check(n, error):
        settle()
        gc.collect()
        assert sys.getrefcount(out) == refs, f"point {n}: a reference leaked"

    sweep(op, check)


def test_latch_survives_every_point(no_leaks):
    def op():
        with dlstream.Stream(CPU) as s, dlstream.Latch(CPU) as latch:
            latch.wait(s, timeout=10.0)
            latch.open()
            s.synchronize()
            latch.check()

    sweep(op)


def test_native_objects_balance_in_a_fresh_process():
    """Shutdown frees every native object the backend made, after failures too."""
    from conftest import run_python
    code = r"""
import dlstream, numpy as np
ext = dlstream._dlstream
x = np.ones(8, np.float32); y = np.ones(8, np.float32)
for n in range(1, 40):
    ext._fault_arm(n)
    try:
        with dlstream.Stream("cpu") as s:
            dlstream.axpy(1.0, x, y, stream=s)
            s.synchronize()
    except dlstream.Error:
        pass
    ext._fault_disarm()
ext._shutdown()
bad = {k: v for k, v in ext._fault_objects().items() if v[0] != v[1]}
print("unbalanced", bad)
assert not bad, bad
"""
    r = run_python(code)
    assert r.returncode == 0, r.stdout + r.stderr
