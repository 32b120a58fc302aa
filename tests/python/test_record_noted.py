# SPDX-License-Identifier: Apache-2.0
"""The record of foreign memory's quick way (docs/hazard-rule.md, "Uses noted as they are ordered"): memory used again
on a stream with no other writer (for a write: no other reader either) waits for nothing, so its use is noted as it is
ordered, and after the
work only the stream's mark is recorded. That record is the ordering this way must not skip: a later use on another
stream waits on the mark, so it must cover the held work. The quick use here is a framework tensor on its framework's
current stream (nothing else records that stream's mark after it: no object is kept), and the stream is held by
waits for events of latched streams (a latch's own wait would mark it). Control:
DLSTREAM_TEST_BREAK_NOTED=1 skips that record, and the later use then runs before the held work (the test sees the
wrong answer, so it can fail)."""
import ast

import pytest

from conftest import fake_exchange, run_python

# The programs' start (test_block_owed.py's too): four CPU streams, and gate(g), which holds s1 behind an event of g
# while a latch holds g, with nothing recorded on s1 (a latch's own wait would record its stream's mark).
GATES = """
import numpy as np, dlstream
import _dls_fake_exchange as fx
s1, s2, g1, g2 = (dlstream.Stream("cpu") for _ in range(4))
broken = {broken}

def gate(g):
    latch = dlstream.Latch("cpu")
    latch.wait(g, timeout=30.0)
    e = dlstream.Event(device="cpu")
    e.record(g)
    s1.wait(e)
    return latch, e
"""

PROGRAM = GATES + """
def run(case):
    X, Y, Z = np.ones(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32)
    t, u = fx.FakeTensor(X, X.ctypes.data, X.shape), fx.FakeTensor(Z, Z.ctypes.data, Z.shape)
    fx.set_current_stream(0)
    first = gate(g1)
    if case == "reread":
        dlstream.axpy(1.0, t, Y, stream=s1)   # another stream than its framework's: the record is made, s1 reads
    else:
        dlstream.fill(t, 1.0, stream=s1)      # the record is made, s1 its writer
    second = gate(g2)
    fx.set_current_stream(s1.ptr)
    if case == "reread":
        dlstream.axpy(1.0, t, u)              # on its framework's current stream s1, no other writer: noted as ordered
    else:
        dlstream.fill(t, 2.0)                 # on its framework's current stream s1, its only writer: the same
    fx.set_current_stream(0)
    if case == "write":
        dlstream.fill(X, 3.0, stream=s2)           # must land after the held fill
    elif case == "read":
        dlstream.axpy(1.0, X, Y, stream=s2)        # must read the held fill's 2.0 (Y = X + Y)
    else:
        dlstream.fill(X, 3.0, stream=s2)           # must land after the held read (Z = X + Z reads 1.0)
    first[0].open()                                # s1 runs the first call, then waits for the second gate
    if broken:
        s2.synchronize()                           # nothing holds it: it runs first
    second[0].open()
    dlstream.synchronize()
    for o in first + second:
        o.close()
    return {{"write": X, "read": Y, "reread": Z}}[case].tolist()

for case in ("write", "read", "reread"):
    print(run(case))
"""


def results(program, broken):
    """Runs `program` (a format string of `broken`) in a fresh interpreter, with DLSTREAM_TEST_BREAK_NOTED=1 where
    `broken` (the mark's record skipped); its last three lines of output as values. Skips, saying why, where the fake
    framework is missing."""
    fake_exchange()
    r = run_python(program.format(broken=broken), timeout=120,
                   env={"DLSTREAM_TEST_BREAK_NOTED": "1", "TSAN_OPTIONS": "report_bugs=0"} if broken else None)
    assert r.returncode == 0, r.stderr[-3000:]
    return [ast.literal_eval(part) for part in r.stdout.strip().splitlines()[-3:]]


@pytest.mark.parametrize("broken", [False, True])
def test_a_use_noted_as_it_is_ordered_is_waited_for_on_another_stream_with_negative_control(broken):
    # One result per case: X after the fills, Y after the read, Z after the reread; the control's land first.
    want = {False: [[3.0] * 4, [2.0] * 4, [1.0] * 4], True: [[2.0] * 4, [1.0] * 4, [3.0] * 4]}[broken]
    got = results(PROGRAM, broken)
    assert got == want, f"the quick way {'broken' if broken else 'on'}: {got}"
