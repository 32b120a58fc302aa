# SPDX-License-Identifier: Apache-2.0
"""The same memory imported twice in a row (dlstream.from_dlpack of one NumPy array), the first import closed while
its write is still queued (held by a latch on s1): the second import's write on s3 lands after it (NumPy's answer: the
later write's value), as two uses of one array passed straight are ordered through its record.

Found by the eighth session's hunt: an import leaves the registry of foreign memory at its last reference (release.c,
dls__buffer_unref) while its release still waits in the deferred queue for the pending write; the second import found
nothing to wait for, its write ran first and the held write landed last (x[0] was 1, not 2). The deferred entry now
keeps the import's bytes, and an import of overlapping memory (dls__foreign_enter) waits for its pending uses
(dls__deferred_order_after). dls_buffer_borrow (C) with a release callback takes the same path; one without a callback
has nothing to defer, and its uses are forgotten at its free (the caller, told nothing, orders a reuse itself)."""
from conftest import run_python

PROGRAM = """
import numpy as np, dlstream
s1, s3 = dlstream.Stream("cpu"), dlstream.Stream("cpu")
x = np.zeros(64, np.uint8)
latch = dlstream.Latch("cpu")
latch.wait(s1, timeout=2.0)           # bounds the wait where s3 waits for s1 (the right order)
t1 = dlstream.from_dlpack(x)
dlstream.fill(t1, 1, stream=s1)      # held by the latch
t1.close()
t2 = dlstream.from_dlpack(x)
dlstream.fill(t2, 2, stream=s3)      # must land after the held fill
try:
    s3.synchronize()                 # wrong order: at once, the held fill still to come; right: after the timeout
except dlstream.Error as e:
    print("s3:", type(e).__name__)
latch.open()
dlstream.synchronize()
t2.close()
latch.close()
print("final", int(x[0]))
"""


def test_a_second_import_waits_for_the_first_ones_pending_write():
    r = run_python(PROGRAM, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "2", f"the held write of the closed import landed last: {r.stdout}"


def test_control_a_second_import_while_the_first_lives_waits():
    """The same program with the first import closed last: the second import's producer waits for its uses (the
    documented order of two imports that live at once), and the later write's value is the answer."""
    program = PROGRAM.replace("t1.close()\nt2", "t2").replace("t2.close()", "t2.close()\nt1.close()")
    r = run_python(program, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "2", r.stdout


STRAIGHT = PROGRAM.replace("t2 = dlstream.from_dlpack(x)\n", "").replace("dlstream.fill(t2, 2, stream=s3)",
                                                                        "dlstream.fill(x, 2, stream=s3)") \
    .replace("t2.close()\n", "")


def test_the_array_passed_straight_waits_for_the_closed_imports_pending_write():
    """The same memory passed straight (not imported again) after the first import was closed with its write held:
    the straight use makes a record of its own, and waits for the closed import's pending uses first (alias.c,
    dls__ext_deferred_order_after). Before, it waited for nothing: x[0] was 1."""
    r = run_python(STRAIGHT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "2", f"the held write of the closed import landed last: {r.stdout}"


def test_control_with_the_record_off_the_straight_use_waits_for_nothing():
    """Negative control: with the record of foreign memory off (DLSTREAM_TEST_NO_FOREIGN=1), the straight write
    runs first and the held write lands last."""
    r = run_python(STRAIGHT, env={"DLSTREAM_TEST_NO_FOREIGN": "1"}, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "1", r.stdout
