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


class Held:
    """A CPU stream held by a latch, a NumPy array and a framework tensor over it, and the tensor's count of
    references before any call."""

    def __init__(self, fx):
        self.s = dlstream.Stream(CPU)
        self.x = np.zeros(N, np.float32)
        self.t = tensor(fx, self.x)
        self.base = sys.getrefcount(self.t)
        self.latch = held(self.s)

    def kept(self):
        return sys.getrefcount(self.t) - self.base

    def finish(self):
        """Opens the latch, lets the stream pass and runs the releases; returns the array's first value."""
        self.latch.open()
        self.s.synchronize()
        settle()
        self.latch.close()
        self.s.close()
        return float(self.x[0])


def test_a_blocks_calls_keep_their_tensor_in_one_release_until_its_stream_passes(carried, no_leaks):
    h = Held(carried)
    with dlstream.use_stream(h.s):
        for i in range(8):
            dlstream.fill(h.t, float(i + 1))
        assert pending() == 0, "no release per call: the block keeps its calls' tensors"
        assert h.kept() == 8, "one reference per call, in the block's list"
    assert pending() == 1, "one release for the whole block, at its exit"
    poll()
    assert h.kept() == 8, "kept while the latch holds the block's stream"
    assert h.finish() == 8.0
    assert h.kept() == 0, "let go of once the stream passed"


def test_control_the_frameworks_current_stream_outside_blocks_keeps_nothing(carried, no_leaks):
    h = Held(carried)
    carried.set_current_stream(h.s.ptr)
    try:
        for i in range(8):
            dlstream.fill(h.t, float(i + 1))
        assert pending() == 0 and h.kept() == 0, "the framework orders its own stream: nothing kept"
    finally:
        carried.set_current_stream(0)
    assert h.finish() == 8.0


def test_a_block_left_by_an_exception_keeps_its_tensors_until_its_stream_passes(carried, no_leaks):
    h = Held(carried)
    with pytest.raises(KeyError):
        with dlstream.use_stream(h.s):
            dlstream.fill(h.t, 3.0)
            raise KeyError("leaves the block")
    assert pending() == 1 and h.kept() == 1, "released once, after the stream passes"
    poll()
    assert h.kept() == 1
    assert h.finish() == 3.0 and h.kept() == 0


def test_a_long_block_lets_go_of_its_list_every_256_objects(carried, no_leaks):
    h = Held(carried)
    with dlstream.use_stream(h.s):
        for _ in range(300):
            dlstream.fill(h.t, 1.0)
        assert pending() == 1, "256 objects: one release, the rest in the list"
        assert h.kept() == 300
    assert pending() == 2
    assert h.finish() == 1.0 and h.kept() == 0


def shared_group(fx, third):
    """A group on the framework's stream f: branch 1 (held) fills tensor t with 1, branch 2 fills it with 2, and
    `third` (when given) a third branch fills another tensor with 3. Returns (t's values while branch 1 is held, the
    other tensor's, t's at the end, t's count of references above its first while held and at the end)."""
    f = dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    x, y = np.zeros(N, np.float32), np.zeros(N, np.float32)
    t, u = tensor(fx, x), tensor(fx, y)
    base = sys.getrefcount(t)
    with dlstream.stream_parallel(f):
        with dlstream.branch() as b1:
            latch = held(b1)
            dlstream.fill(t, 1.0)
        with dlstream.branch() as b2:
            dlstream.fill(t, 2.0)
            last = done(b2)
        if third:
            with dlstream.branch() as b3:
                dlstream.fill(u, 3.0)
                last = done(b3)
    last.synchronize()
    during = (float(x[0]), float(y[0]), sys.getrefcount(t) - base)
    latch.open()
    f.synchronize()
    settle()
    after = (float(x[0]), sys.getrefcount(t) - base)
    for o in (latch, last):
        o.close()
    fx.set_current_stream(0)
    f.close()
    return during, after


def test_branches_of_one_group_order_a_shared_tensor_per_buffer(carried, no_leaks):
    """Branch 2 writes the tensor branch 1 (held) fills: it waits for branch 1 through the record of the tensor's
    bytes (WAW), and branch 1's list keeps the tensor. Branch 3 writes another tensor and finishes while branch 1 is
    held (the group's branches still overlap)."""
    (x_held, y_held, kept), (x_end, kept_end) = shared_group(carried, True)
    assert y_held == 3.0, "branch 3 finished while branch 1 was held"
    assert x_held == 0.0 and kept >= 1, "branch 2 waits for the held branch 1; the tensor is kept"
    assert x_end == 2.0, "branch 2's write after branch 1's"
    assert kept_end == 0


@pytest.mark.skipif(bool(UNDER_TSAN), reason=RACY)
def test_control_without_the_record_branch_2_overtakes_the_held_branch(carried, foreign_record_off):
    (x_held, _, _), (x_end, _) = shared_group(carried, False)
    assert (x_held, x_end) == (2.0, 1.0), "without the record nothing orders the branches: branch 1's lands last"
