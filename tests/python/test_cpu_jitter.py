# SPDX-License-Identifier: Apache-2.0
"""DLSTREAM_CPU_JITTER: the CPU workers' random delays (docs/testing.md). A bad value is refused by name, and with
the delays on, ordered work still gives the ordered answer. What the delays expose is shown by the C suites: with
DLSTREAM_CPU_JITTER=200, tests/c/test_capture.c failed 7 times in 60 before its fix (docs/testing.md)."""
import pytest

from conftest import run_python

ORDERED = """
import numpy as np, dlstream
s1, s2 = dlstream.Stream("cpu"), dlstream.Stream("cpu")
x, y = np.zeros(1 << 12, np.float32), np.zeros(1 << 12, np.float32)
for i in range(1, 51):
    dlstream.fill(x, float(i), stream=s1)
    s2.wait(s1)
    dlstream.copy(y, x, stream=s2)
    s1.wait(s2)
    s2.synchronize()
    assert y[0] == i and y[-1] == i, (i, y[0], y[-1])
print("ordered ok")
"""


@pytest.mark.parametrize("value", ["abc", "-1", "100001", "5x"])
def test_a_bad_value_is_refused_by_name(value):
    r = run_python("import numpy as np, dlstream\ndlstream.fill(np.zeros(4, np.float32), 1.0)",
                   env={"DLSTREAM_CPU_JITTER": value})
    assert r.returncode != 0
    assert f"DLSTREAM_CPU_JITTER={value}: expected microseconds, 0 to 100000" in r.stderr, r.stderr[-2000:]


def test_ordered_work_keeps_its_order_under_the_delays():
    r = run_python(ORDERED, env={"DLSTREAM_CPU_JITTER": "300"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ordered ok" in r.stdout
