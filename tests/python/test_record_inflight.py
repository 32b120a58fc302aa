# SPDX-License-Identifier: Apache-2.0
"""A use of foreign memory on the record's quick way (docs/hazard-rule.md, "Uses noted as they are ordered") holds no
reference on the record: while the use is in flight (ordered, its work not yet marked) the registry keeps the record,
and a sweep of the records whose uses passed leaves it in. Here Python code runs in the middle of a call, after such a
use and before the call's work is queued (the next argument's conversion), and sweeps the records
(dlstream._dlstream._deferred_poll, as a host wait does). The record's earlier uses have all passed, so only the use in
flight keeps it: taken out, a later use on another stream would meet no record and run before the call's held read.
Control: the record off (dlstream._dlstream._test_foreign(False)) gives that wrong answer, so the test can fail."""
import numpy as np
import pytest

import dlstream

from conftest import CPU


class SweepsFirst:
    """A tensor argument whose conversion first sweeps the records of foreign memory, then is `array`."""

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return (dlstream.kDLCPU, 0)

    def __dlpack__(self, **kw):
        dlstream._dlstream._deferred_poll()
        return self.array.__dlpack__()


def gate(s):
    """`s` held behind an event of a latched stream, with nothing recorded on `s` itself (a latch's own wait would
    record its mark, which keeps the record's uses from having passed)."""
    g = dlstream.Stream(CPU)
    latch = dlstream.Latch(CPU)
    latch.wait(g, timeout=30.0)
    e = dlstream.Event(device=CPU)
    e.record(g)
    s.wait(e)
    return latch, e, g


@pytest.mark.parametrize("record", [True, False], ids=["record", "control-record-off"])
def test_a_record_in_flight_stays_through_a_sweep_in_the_call(record):
    was = dlstream._dlstream._test_foreign(record)
    try:
        s1, s2 = dlstream.Stream(CPU), dlstream.Stream(CPU)
        x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
        dlstream.fill(x, 1.0, stream=s1)             # x's record, s1 its writer
        s1.synchronize()                             # its uses have passed
        latch, e, g = gate(s1)
        dlstream.axpy(1.0, x, SweepsFirst(y), stream=s1)  # x: the quick way (in flight), then the sweep; y = x + y, held
        dlstream.fill(x, 3.0, stream=s2)             # must wait for the held read of x
        if not record:
            s2.synchronize()                         # nothing holds it: it runs first
        latch.open()
        dlstream.synchronize()
        for o in (latch, e, g, s1, s2):
            o.close()
    finally:
        dlstream._dlstream._test_foreign(was)
    if record:
        assert y.tolist() == [1.0] * 4, "the call read x after the later fill on s2: its record was swept mid-call"
        assert x.tolist() == [3.0] * 4
    else:
        assert y.tolist() == [3.0] * 4, "the control (the record off) must see the wrong answer"
