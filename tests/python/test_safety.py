# SPDX-License-Identifier: Apache-2.0
"""Leaks over many calls, threads, interpreter shutdown with live objects, and fork()."""
import os
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import dlstream
from conftest import CPU, fake_exchange, live, run_python, settle


def test_no_growth_over_100k_fast_path_launches(no_leaks):
    fx = fake_exchange()
    fx.set_current_stream(0)
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x = np.ones(16, np.float32)
    y = np.zeros(16, np.float32)
    fxx, fyy = fx.FakeTensor(x, x.ctypes.data, x.shape), fx.FakeTensor(y, y.ctypes.data, y.shape)
    for _ in range(1000):
        axpy.launch(1, 16, 16, 0.0, fxx, fyy)
    settle()
    refs = (sys.getrefcount(fxx), sys.getrefcount(fyy), sys.getrefcount(x))
    handles = live()
    tracemalloc.start()
    snap = tracemalloc.take_snapshot()
    for _ in range(100_000):
        axpy.launch(1, 16, 16, 0.0, fxx, fyy)
    settle()
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap, "filename"))
    tracemalloc.stop()
    assert grown < 64 * 1024, f"Python memory grew by {grown} bytes"
    assert (sys.getrefcount(fxx), sys.getrefcount(fyy), sys.getrefcount(x)) == refs
    assert live() == handles


def test_no_growth_over_100k_capsule_imports(no_leaks):
    a = np.arange(8, dtype=np.float32)
    base = sys.getrefcount(a)
    for _ in range(1000):
        dlstream.from_dlpack(a).close()
    settle()
    tracemalloc.start()
    snap = tracemalloc.take_snapshot()
    for _ in range(100_000):
        dlstream.from_dlpack(a).close()
    settle()
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap, "filename"))
    tracemalloc.stop()
    assert grown < 64 * 1024
    assert sys.getrefcount(a) == base


def test_no_growth_over_many_exports(no_leaks):
    t = dlstream.empty(8, "float32", device=CPU)
    for _ in range(20_000):
        cap = t.__dlpack__(max_version=(1, 1), stream=-1)
        del cap
    t.close()


def test_threads_launch_concurrently(no_leaks):
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    errors = []

    def work(k):
        try:
            s = dlstream.Stream(CPU)
            x = np.full(64, k, np.float32)
            y = np.zeros(64, np.float32)
            t = dlstream.empty(64, "float32", device=CPU, stream=s)
            dlstream.fill(t, 0.0, stream=s)
            for _ in range(200):
                axpy.launch(1, 64, 64, 1.0, x, y, stream=s)
                e = s.record()
                dlstream.Stream.legacy(CPU).wait(e)
                e.close()
            dlstream.axpy(1.0, x, t, stream=s)
            s.synchronize()
            assert (y == 200 * k).all() and (np.from_dlpack(t) == k).all()
            t.close()
            s.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 9)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    settle()


def test_synchronize_releases_the_gil(no_leaks):
    s = dlstream.Stream(CPU)
    latch = dlstream.Latch(CPU)
    latch.wait(s, timeout=30)
    done = threading.Event()
    th = threading.Thread(target=lambda: (s.synchronize(), done.set()))
    th.start()
    latch.open()  # this thread runs while the other blocks in synchronize()
    th.join(30)
    assert done.is_set()
    latch.close()
    s.close()


SHUTDOWN = r"""
import numpy as np, dlstream, sys
s = dlstream.Stream("cpu")
latch = dlstream.Latch("cpu")
latch.wait(s, timeout=30)
keep = np.ones(8, np.float32)
t = dlstream.empty(8, device="cpu", stream=s)
dlstream.axpy(1.0, keep, t, stream=s)           # a deferred release holding `keep`
view = np.from_dlpack(dlstream.empty(4, device="cpu"))  # an export alive at exit
e = s.record()
mod = dlstream.builtin_function("dls_fill", "cpu")
print("pending", dlstream._dlstream._deferred_pending())
sys.stdout.flush()
"""


def test_objects_alive_at_interpreter_exit():
    r = run_python(SHUTDOWN, env={"DLSTREAM_EXIT_TIMEOUT": "0.2"})  # the latch holds `s` at exit
    assert r.returncode == 0, r.stderr
    assert "pending 1" in r.stdout


def test_exit_without_exports_tears_the_runtime_down():
    r = run_python("import numpy as np, dlstream\n"
                   "s = dlstream.Stream('cpu'); dlstream.axpy(1.0, np.ones(4, np.float32), np.ones(4, np.float32), stream=s)\n"
                   "import atexit; atexit.register(lambda: print('late', dlstream._dlstream._live_handles()['stream']))\n")
    assert r.returncode == 0, r.stderr


def test_use_after_shutdown_raises_state_error():
    r = run_python("import dlstream\n"
                   "s = dlstream.Stream('cpu')\n"
                   "dlstream._dlstream._shutdown()\n"
                   "try:\n    dlstream.Stream('cpu')\nexcept dlstream.StateError as e:\n    print('state:', e)\n"
                   "s.close()\n")
    assert r.returncode == 0, r.stderr
    assert "state: Stream: dlstream was shut down" in r.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")
def test_fork_child_gets_a_clear_error():
    code = r"""
import os, dlstream, numpy as np
s = dlstream.Stream("cpu")
dlstream.fill(np.zeros(4, np.float32), 1.0)
pid = os.fork()
if pid == 0:
    try:
        dlstream.Stream("cpu")
        os._exit(3)
    except dlstream.ForkError as e:
        ok = isinstance(e, RuntimeError) and "fork()" in str(e)
        try:
            s.synchronize()
            os._exit(4)
        except dlstream.ForkError:
            pass
        os._exit(0 if ok else 5)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
s.synchronize()
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout
