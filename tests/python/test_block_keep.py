# SPDX-License-Identifier: Apache-2.0
"""What a block keeps (interop/python/call/block.h), on the CPU backend: a framework tensor used inside a use_stream()
or branch block, on the block's stream (the framework's current stream there), stays alive until that stream passes
its use, kept in one list of the block's Stream and let go of with one release at the block's exit (an exception's
exit too), its Stream's close or end, or every 256 objects: no release of its own per call. Each test holds the block's
stream with a latch, so its work is pending when the block ends; the tensor must outlive it (its reference count says
so) and go once the latch opens. The framework is _dls_fake_exchange with a carrier (conftest.FakeCarrier), as in
test_concurrent.py. Controls: the same calls on the framework's current stream outside any block keep nothing (the
framework orders them), so the counts these tests read can be the other ones."""
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, UNDER_TSAN, held, settle

RACY = "ThreadSanitizer is loaded: this negative control races by design, and TSan would stop at the race it shows"
N = 8
_pending = dlstream._dlstream._deferred_pending
poll = dlstream._dlstream._deferred_poll  # (not settle(): its sync of the legacy default stream waits for every stream)


def pending():
    """Releases pending, those of earlier tests that ran (polled) left out."""
    return _pending() - _BASE[0]


_BASE = [0]


@pytest.fixture(autouse=True)
def _no_earlier_releases():
    settle()
    _BASE[0] = _pending()


def done(stream):
    e = dlstream.Event(device=CPU)
    e.record(stream)
    return e


def tensor(fx, a):
    return fx.FakeTensor(a, a.ctypes.data, a.shape)


def test_a_blocks_calls_keep_their_tensor_in_one_release_until_its_stream_passes(carried, no_leaks):
    fx = carried
    s = dlstream.Stream(CPU)
    x = np.zeros(N, np.float32)
    t = tensor(fx, x)
    base = sys.getrefcount(t)
    latch = held(s)
    with dlstream.use_stream(s):
        for i in range(8):
            dlstream.fill(t, float(i + 1))
        assert pending() == 0, "no release per call: the block keeps its calls' tensors"
        assert sys.getrefcount(t) == base + 8, "one reference per call, in the block's list"
    assert pending() == 1, "one release for the whole block, at its exit"
    assert sys.getrefcount(t) == base + 8, "kept while the block's stream has not passed the calls"
    poll()
    assert sys.getrefcount(t) == base + 8, "kept: the latch still holds the stream"
    latch.open()
    s.synchronize()
    settle()
    assert sys.getrefcount(t) == base, "let go of once the stream passed"
    assert float(x[0]) == 8.0
    latch.close()
    s.close()


def test_control_the_frameworks_current_stream_outside_blocks_keeps_nothing(carried, no_leaks):
    fx = carried
    s = dlstream.Stream(CPU)
    x = np.zeros(N, np.float32)
    t = tensor(fx, x)
    base = sys.getrefcount(t)
    latch = held(s)
    fx.set_current_stream(s.ptr)
    try:
        for i in range(8):
            dlstream.fill(t, float(i + 1))
        assert pending() == 0 and sys.getrefcount(t) == base, "the framework orders its own stream: nothing kept"
    finally:
        fx.set_current_stream(0)
    latch.open()
    s.synchronize()
    settle()
    assert float(x[0]) == 8.0
    latch.close()
    s.close()


def test_a_block_left_by_an_exception_keeps_its_tensors_until_its_stream_passes(carried, no_leaks):
    fx = carried
    s = dlstream.Stream(CPU)
    x = np.zeros(N, np.float32)
    t = tensor(fx, x)
    base = sys.getrefcount(t)
    latch = held(s)
    with pytest.raises(KeyError):
        with dlstream.use_stream(s):
            dlstream.fill(t, 3.0)
            raise KeyError("leaves the block")
    assert pending() == 1 and sys.getrefcount(t) == base + 1, "released once, after the stream passes"
    poll()
    assert sys.getrefcount(t) == base + 1
    latch.open()
    s.synchronize()
    settle()
    assert sys.getrefcount(t) == base and float(x[0]) == 3.0
    latch.close()
    s.close()


def test_a_long_block_lets_go_of_its_list_every_256_objects(carried, no_leaks):
    fx = carried
    s = dlstream.Stream(CPU)
    x = np.zeros(N, np.float32)
    t = tensor(fx, x)
    base = sys.getrefcount(t)
    latch = held(s)
    with dlstream.use_stream(s):
        for _ in range(300):
            dlstream.fill(t, 1.0)
        assert pending() == 1, "256 objects: one release, the rest in the list"
        assert sys.getrefcount(t) == base + 300
    assert pending() == 2
    latch.open()
    s.synchronize()
    settle()
    assert sys.getrefcount(t) == base
    latch.close()
    s.close()


def test_branches_of_one_group_order_a_shared_tensor_per_buffer(carried, no_leaks):
    """Branch 1 (held) fills the tensor, then branch 2 writes it: branch 2 waits for branch 1 through the record of
    the tensor's bytes (WAW), and branch 1's list keeps it. Branch 3 writes another tensor and finishes while branch 1
    is held (the group's branches still overlap)."""
    fx = carried
    f = dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    x, y = np.zeros(N, np.float32), np.zeros(N, np.float32)
    t, u = tensor(fx, x), tensor(fx, y)
    base = sys.getrefcount(t)
    with dlstream.stream_parallel(f):
        with dlstream.branch() as b1:
            latch = held(b1)
            dlstream.fill(t, 1.0)
        with dlstream.branch():
            dlstream.fill(t, 2.0)
        with dlstream.branch() as b3:
            dlstream.fill(u, 3.0)
            e3 = done(b3)
    e3.synchronize()
    assert float(y[0]) == 3.0, "branch 3 finished while branch 1 was held"
    assert float(x[0]) == 0.0 and sys.getrefcount(t) >= base + 1
    latch.open()
    f.synchronize()
    settle()
    assert float(x[0]) == 2.0, "branch 2's write after branch 1's"
    assert sys.getrefcount(t) == base
    for o in (latch, e3):
        o.close()
    fx.set_current_stream(0)
    f.close()


@pytest.mark.skipif(bool(UNDER_TSAN), reason=RACY)
def test_control_without_the_record_branch_2_overtakes_the_held_branch(carried, foreign_record_off):
    fx = carried
    f = dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    x = np.zeros(N, np.float32)
    t = tensor(fx, x)
    with dlstream.stream_parallel(f):
        with dlstream.branch() as b1:
            latch = held(b1)
            dlstream.fill(t, 1.0)
        with dlstream.branch() as b2:
            dlstream.fill(t, 2.0)
            e2 = done(b2)
    e2.synchronize()
    latch.open()
    f.synchronize()
    settle()
    assert float(x[0]) == 1.0, "without the record, nothing orders the branches: branch 1's held write lands last"
    for o in (latch, e2):
        o.close()
    fx.set_current_stream(0)
    f.close()
