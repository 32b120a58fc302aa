# SPDX-License-Identifier: Apache-2.0
"""A call's arguments go into one table, each tensor read once: whatever way the call takes (a launch by the plan,
the general way after the plan did not fit, a stream named by keyword, a tensor of another type first, the
high-level built-ins), the framework describes each of its tensors once per call and is asked its current stream at
most once. The fake framework (tests/python/fake_exchange.c) counts both."""
import numpy as np
import pytest

import dlstream
from conftest import CPU, settle
from test_launch_memo import axpy_on_fakes, fake


def reads(fx, call):
    """How many tensor descriptions and current-stream questions `call` cost."""
    before = fx.counters()
    call()
    after = fx.counters()
    return after["dltensor"] - before["dltensor"], after["current_stream"] - before["current_stream"]


def test_each_way_of_a_launch_reads_each_tensor_once(fx, no_leaks):
    axpy, x, y, fxx, fyy = axpy_on_fakes(fx)
    s = dlstream.Stream(CPU)
    assert reads(fx, lambda: axpy.launch(1, 8, 8, 1.0, fxx, fyy)) == (2, 1)  # the general way: no plan yet
    assert axpy._planned
    assert reads(fx, lambda: axpy.launch(1, 8, 8, 1.0, fxx, fyy)) == (2, 1)  # by the plan
    assert reads(fx, lambda: axpy.launch(1, 8, 8, 2.0, fxx, fyy)) == (2, 1)  # a new scalar: read, then general
    assert reads(fx, lambda: axpy.launch(1, 8, 8, 2.0, fxx, fyy, stream=s)) == (2, 1)  # stream=: ordered after it
    z = np.zeros(8, np.float32)
    other = fake(fx, z, fx.FakeTensorInt)  # another exchange-API type first: the general way decides by it
    assert reads(fx, lambda: axpy.launch(1, 8, 8, 1.0, other, fyy))[0] == 2
    s.synchronize()
    settle()
    s.close()


@pytest.mark.parametrize("what", ["fill", "axpy", "copy"])
def test_the_builtins_read_each_tensor_once(fx, no_leaks, what):
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    fxx, fyy = fake(fx, x), fake(fx, y)
    call, n = {"fill": (lambda: dlstream.fill(fyy, 2.0), 1),
               "axpy": (lambda: dlstream.axpy(1.0, fxx, fyy), 2),
               "copy": (lambda: dlstream.copy(fyy, fxx), 2)}[what]
    assert reads(fx, call) == (n, 1)
    settle()
    assert (y == {"fill": 2, "axpy": x, "copy": x}[what]).all()
