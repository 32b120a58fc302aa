# SPDX-License-Identifier: Apache-2.0
"""Ctrl-C and interpreter exit: a host wait wakes for a signal while the work it waits for is still held (the work
stays queued), and exit does not hang behind a long kernel: it waits at most DLSTREAM_EXIT_TIMEOUT seconds, then
abandons the work with a warning naming the busy streams."""
import os
import signal
import sys
import threading

import pytest

import dlstream
from conftest import CPU, held, run_python

pytestmark = pytest.mark.skipif(sys.platform == "win32" or threading.current_thread() is not threading.main_thread(),
                                reason="signals are delivered to the main thread of a POSIX process")


def interrupted(wait):
    """Runs wait() while a timer thread sends SIGINT to this process; returns whether KeyboardInterrupt came out of
    it. The wait is held by a latch with a long timeout, so if the signal were only handled once the wait ended, the
    latch would have timed out first (the caller checks). Python's own SIGINT handler is put in place for the call:
    a process started in the background by a shell without job control (`cmd &`, nohup) inherits SIGINT ignored,
    and CPython then installs no handler (the test waited out its latch there)."""
    was = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        wait()
    except KeyboardInterrupt:
        return True
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, was)
    return False


@pytest.mark.parametrize("what", ["stream", "event"])
def test_synchronize_wakes_for_ctrl_c_while_the_latch_holds_the_work(what, no_leaks):
    s = dlstream.Stream(CPU)
    latch = held(s, timeout=60)
    e = s.record()
    assert interrupted(s.synchronize if what == "stream" else e.synchronize)
    assert not latch.timed_out and not s.query(), "the wait ended before the signal was handled"
    latch.open()  # the interrupted wait left the work queued: it runs now
    s.synchronize()
    assert e.query()
    latch.check()
    e.close()
    latch.close()
    s.close()


def test_tensor_export_to_the_host_wakes_for_ctrl_c(no_leaks):
    s = dlstream.Stream(CPU)
    t = dlstream.empty(4, "float32", device=CPU, stream=s)
    latch = held(s, timeout=60)
    assert interrupted(lambda: t.__dlpack__())  # host memory: the export waits for the tensor's stream
    assert not latch.timed_out
    latch.open()
    s.synchronize()
    t.close()
    latch.close()
    s.close()


EXIT = r"""
import dlstream
what = WHAT
if what == "legacy":
    dlstream.spin(3600, device="cpu")
elif what == "closed":
    s = dlstream.Stream("cpu")
    dlstream.spin(3600, stream=s)
    s.close()
elif what == "latch":
    s = dlstream.Stream("cpu")
    latch = dlstream.Latch("cpu")
    latch.wait(s, timeout=3600)
print("exiting", flush=True)
"""


@pytest.mark.parametrize("what, named", [("legacy", "cpu:0 legacy default stream"), ("latch", "cpu:0 owned stream"),
                                         ("closed", "streams that were already closed")])
def test_exit_is_bounded_and_names_what_it_abandons(what, named):
    r = run_python(EXIT.replace("WHAT", repr(what)), env={"DLSTREAM_EXIT_TIMEOUT": "0.3"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "exiting" in r.stdout
    assert "RuntimeWarning" in r.stderr and named in r.stderr and "DLSTREAM_EXIT_TIMEOUT" in r.stderr, r.stderr


def test_exit_with_nothing_queued_says_nothing():
    r = run_python("import dlstream\ns = dlstream.Stream('cpu')\ndlstream.spin(0.001, stream=s)\n",
                   env={"DLSTREAM_EXIT_TIMEOUT": "30"})
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr, r.stderr
