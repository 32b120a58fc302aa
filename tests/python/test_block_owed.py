# SPDX-License-Identifier: Apache-2.0
"""Owed marks (docs/hazard-rule.md, "Owed marks"): a call inside a block whose use of a record is noted as it is
ordered records no mark after its work; the use's entry is left stale, and whatever waits on it records the block's
stream's mark first (one record at the block's end settles what is left). The ordering this must keep: a later use
on another stream, inside the block or after it, waits for the held work of the owed use. The block carries the fake
framework (_dls_fake_exchange) as blocks carry torch; the block's stream is held by waits for events of latched
streams (a latch's own wait would record the stream's mark). Control: DLSTREAM_TEST_BREAK_NOTED=1 leaves the entry
as it was (not stale), and the later use inside the block then runs before the held work (the test sees the wrong
answer, so it can fail); after the block, the settle's record covers the use either way."""
import pytest

from test_record_noted import GATES, results

PROGRAM = GATES + """
class Carrier:  # blocks carry the fake framework as they carry torch (dlstream/_carry.py)
    module = "_dls_fake_exchange"

    def enter(self, mod, stream):
        prev = mod.current_stream()
        mod.set_current_stream(stream.ptr)
        return prev, prev

    def exit(self, token):
        fx.set_current_stream(token[0])

dlstream._carry._CARRIERS.append(Carrier())

def run(case):
    X, Y = np.zeros(4, np.float32), np.zeros(4, np.float32)
    t = fx.FakeTensor(X, X.ctypes.data, X.shape)
    fx.set_current_stream(0)
    first = gate(g1)
    with dlstream.use_stream(s1):
        dlstream.fill(t, 1.0)      # the record made: its mark recorded after the work
        second = gate(g2)
        dlstream.fill(t, 2.0)      # again on s1, its only writer: noted as ordered, its mark owed
        if case == "write":
            dlstream.fill(X, 3.0, stream=s2)       # NumPy straight, another stream: after the held fill
        elif case == "read":
            dlstream.axpy(1.0, X, Y, stream=s2)    # reads the held fill's 2.0
    if case == "after":
        dlstream.fill(X, 3.0, stream=s2)           # after the block: its settle recorded the mark
    for gate_ in (first, second):                  # s1 runs the first fill, then waits for the second gate
        gate_[0].open()
        if broken and case != "after" and gate_ is first:
            s2.synchronize()                       # nothing holds it: it runs first
    dlstream.synchronize()
    for o in first + second:
        o.close()
    return (Y if case == "read" else X).tolist()

for case in ("write", "read", "after"):
    print(run(case))
"""


@pytest.mark.parametrize("broken", [False, True])
def test_an_owed_mark_is_recorded_before_another_stream_waits_with_negative_control(broken):
    want = {False: [[3.0] * 4, [2.0] * 4, [3.0] * 4], True: [[2.0] * 4, [1.0] * 4, [3.0] * 4]}[broken]
    got = results(PROGRAM, broken)
    assert got == want, f"owed marks {'broken' if broken else 'on'}: {got}"
