# SPDX-License-Identifier: Apache-2.0
"""dlstream.stream_parallel: fork/join groups from Python, on the CPU backend here and on CUDA with torch."""
import numpy as np
import pytest

import dlstream

CPU = "cpu:0"
TIMEOUT = 20.0


def tensor(n, value, stream):
    t = dlstream.empty(n, "float32", device=CPU, stream=stream)
    dlstream.fill(t, value, stream=stream)
    return t


def host(t, stream):
    stream.synchronize()
    return np.from_dlpack(t).copy()


def test_branches_run_on_distinct_streams_and_the_origin_joins():
    origin = dlstream.Stream(CPU)
    with dlstream.stream_parallel(origin) as g:
        with dlstream.branch() as a:
            assert dlstream.current_stream(CPU) == a
        with g.branch() as b:
            assert b != a and b != origin
        assert g.branches == 2
    assert g.branches == 0
    origin.synchronize()
    origin.close()


def test_launches_inside_a_branch_default_to_it():
    origin = dlstream.Stream(CPU)
    x = tensor(64, 1.0, origin)
    y = tensor(64, 0.0, origin)
    with dlstream.stream_parallel(origin):
        with dlstream.branch():
            dlstream.axpy(3.0, x, y)  # no stream=: the branch
    assert (host(y, origin) == 3.0).all()
    x.close()
    y.close()
    origin.close()


def test_join_holds_the_origin_until_every_branch_passes_and_the_control_does_not():
    origin = dlstream.Stream(CPU)
    latches = [dlstream.Latch(CPU), dlstream.Latch(CPU)]
    with dlstream.stream_parallel(origin):
        for latch in latches:
            with dlstream.branch() as b:
                latch.wait(b, timeout=TIMEOUT)
    after = dlstream.Event(device=CPU)
    after.record(origin)
    assert not after.query(), "the origin passed the join while branches were held"
    latches[1].open()
    assert not after.query(), "one branch is still held"
    latches[0].open()
    after.synchronize()
    # negative control: a branch stream that nobody joins lets the origin run ahead
    control = dlstream.Latch(CPU)
    g = dlstream.Group(origin)
    b = g.branch()
    control.wait(b, timeout=TIMEOUT)
    after.record(origin)
    after.synchronize()  # completes although the branch is held: the join is what orders
    control.open()
    g.end()
    origin.synchronize()
    for latch in latches + [control]:
        latch.check()
        latch.close()
    after.close()
    origin.close()


def test_branches_start_after_work_queued_on_the_origin():
    origin = dlstream.Stream(CPU)
    latch = dlstream.Latch(CPU)
    latch.wait(origin, timeout=TIMEOUT)
    seen = dlstream.Event(device=CPU)
    with dlstream.stream_parallel(origin):
        with dlstream.branch() as b:
            seen.record(b)
            assert not seen.query(), "a branch ran before the origin's earlier work"
    latch.open()
    origin.synchronize()
    assert seen.query()
    latch.close()
    seen.close()
    origin.close()


def test_origin_defaults_to_use_stream():
    s = dlstream.Stream(CPU)
    with dlstream.use_stream(s):
        with dlstream.stream_parallel() as g:
            assert g.origin == s
    s.close()


def test_nested_groups_and_errors():
    origin = dlstream.Stream(CPU)
    with dlstream.stream_parallel(origin):
        with dlstream.branch() as b:
            with dlstream.stream_parallel() as inner:
                assert inner.origin == b
                with dlstream.branch():
                    dlstream.spin(1e-6)
            with pytest.raises(dlstream.StateError, match="inside a branch of the same group"):
                with dlstream.branch():
                    pass
    with pytest.raises(dlstream.StateError, match="outside a dlstream.stream_parallel"):
        dlstream.branch().__enter__()
    origin.synchronize()
    origin.close()


def test_branch_stream_is_stale_after_the_group_ends():
    origin = dlstream.Stream(CPU)
    with dlstream.stream_parallel(origin):
        with dlstream.branch() as b:
            pass
    with pytest.raises(dlstream.InvalidHandleError, match="stale"):
        b.synchronize()
    origin.close()


def test_an_exception_in_the_block_still_joins():
    origin = dlstream.Stream(CPU)
    with pytest.raises(KeyError):
        with dlstream.stream_parallel(origin):
            with dlstream.branch():
                raise KeyError("boom")
    assert dlstream._dlstream._live_handles()["group"] == 0
    origin.close()


def test_many_groups_leak_nothing():
    origin = dlstream.Stream(CPU)
    before = dlstream._dlstream._live_handles()
    for _ in range(2000):
        with dlstream.stream_parallel(origin):
            with dlstream.branch():
                pass
            with dlstream.branch():
                pass
    origin.synchronize()
    assert dlstream._dlstream._live_handles() == before
    origin.close()


@pytest.mark.skipif(not dlstream.device_count("cuda"), reason="no CUDA device: " + dlstream.backend_available("cuda")[1])
def test_gpu_stream_parallel_under_torch_current_stream():
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    x = torch.ones(1 << 16, device="cuda")
    ys = [torch.zeros(1 << 16, device="cuda") for _ in range(4)]
    latch = dlstream.Latch("cuda:0")
    with torch.cuda.stream(side):
        with dlstream.stream_parallel() as g:
            assert g.origin.ptr == side.cuda_stream, "the origin is torch's current stream"
            for k, y in enumerate(ys):
                with dlstream.branch() as b:
                    if k == 0:
                        latch.wait(b, timeout=TIMEOUT)
                    dlstream.axpy(float(k + 1), x, y)
        done = torch.cuda.Event()
        done.record(side)
    assert not done.query(), "torch's stream passed the join while a branch was held"
    latch.open()
    done.synchronize()
    for k, y in enumerate(ys):
        assert torch.equal(y, torch.full_like(y, float(k + 1)))
    latch.check()
    latch.close()


class Recorder:
    """A carrier (dlstream/_carry.py) of a framework that is always imported (sys), which logs its calls and fails
    where told; its token names the block's stream, so nothing is tied at the block's edges."""
    module = "sys"

    def __init__(self, log, name, fail_enter=False, fail_exit=False):
        self.log, self.name, self.fail_enter, self.fail_exit = log, name, fail_enter, fail_exit

    def enter(self, mod, stream):
        if self.fail_enter:
            raise KeyError("enter " + self.name)
        self.log.append(("enter", self.name))
        return self.name, stream.ptr

    def exit(self, token):
        self.log.append(("exit", token[0]))
        if self.fail_exit:
            raise KeyError("exit " + self.name)


@pytest.fixture
def carriers():
    """Appends carriers to dlstream's list for the test (the list is changed in place, as the tests' fixtures do)."""
    added = []

    def add(carrier):
        dlstream._carry._CARRIERS.append(carrier)
        added.append(carrier)
        return carrier
    yield add
    for c in added:
        dlstream._carry._CARRIERS.remove(c)


def outside_blocks():
    """No branch block is open in this context: use_stream's variable and the branch variable are unset."""
    return dlstream._dlstream._stream_var.get(None) is None and dlstream._parallel._branch_var.get() is None


def test_a_carrier_failing_on_entry_restores_the_ones_before_it_and_the_block(carriers):
    log = []
    carriers(Recorder(log, "a"))
    carriers(Recorder(log, "b", fail_enter=True))
    origin = dlstream.Stream(CPU)
    with dlstream.stream_parallel(origin) as g:
        with pytest.raises(KeyError, match="enter b"):
            with dlstream.branch():
                pytest.fail("the block ran although its entry failed")
        assert log == [("enter", "a"), ("exit", "a")]
        assert outside_blocks()  # the branch's variable and use_stream's, both reset
        assert g.branches == 1  # the branch was made before the carry failed; the group still joins it
    assert outside_blocks()
    assert dlstream._dlstream._live_handles()["group"] == 0
    origin.close()


def test_a_carrier_failing_on_exit_raises_once_every_framework_and_the_block_are_restored(carriers):
    log = []
    carriers(Recorder(log, "a"))
    b = carriers(Recorder(log, "b", fail_exit=True))
    origin = dlstream.Stream(CPU)
    with dlstream.stream_parallel(origin):
        with pytest.raises(KeyError, match="exit b"):
            with dlstream.branch() as s:
                assert dlstream.current_stream(CPU) == s
        assert log == [("enter", "a"), ("enter", "b"), ("exit", "b"), ("exit", "a")]
        assert outside_blocks()
        b.fail_exit = False
        with dlstream.branch():  # the group goes on
            pass
    assert outside_blocks()
    origin.close()


def test_a_framework_imported_inside_a_group_is_carried_by_its_next_branch(carriers):
    log = []
    origin = dlstream.Stream(CPU)
    with dlstream.stream_parallel(origin):
        with dlstream.branch():
            pass
        carriers(Recorder(log, "late"))  # as a module imported between two branches
        with dlstream.branch():
            assert log == [("enter", "late")]
    assert log == [("enter", "late"), ("exit", "late")]
    origin.close()


def test_a_branch_block_cannot_be_open_twice_and_each_opening_is_a_branch():
    origin = dlstream.Stream(CPU)
    with dlstream.stream_parallel(origin) as g:
        b = g.branch()
        with b as s1:
            with pytest.raises(dlstream.StateError, match="already open"):
                b.__enter__()
            assert dlstream.current_stream(CPU) == s1
        with b as s2:
            assert s2 != s1
        assert g.branches == 2
    with pytest.raises(dlstream.StateError, match="has ended or not begun"):
        b.__enter__()
    with pytest.raises(dlstream.StateError, match="has ended or not begun"):
        dlstream.stream_parallel(origin).branch().__enter__()
    assert outside_blocks()
    origin.close()


def test_branch_outside_a_group_and_bad_arguments():
    with pytest.raises(dlstream.StateError, match="outside a dlstream.stream_parallel"):
        dlstream.branch()
    with pytest.raises(TypeError):
        dlstream.branch(1, 2)
    with pytest.raises(TypeError):
        dlstream.branch(strem=None)
    origin = dlstream.Stream(CPU)
    with dlstream.stream_parallel(origin):
        with pytest.raises(dlstream.Error):
            with dlstream.branch("not a stream"):
                pass
        assert outside_blocks()
    origin.close()


def fake_torch(raw_stream):
    """A stand-in for torch as dlstream/_carry.py's torch carrier reads it: CUDA initialized, the current stream 0x2000
    as a torch Stream, and (raw_stream not None) torch._C's raw current stream, which answers without making one."""
    from types import SimpleNamespace
    log = []

    class StreamContext:
        def __init__(self, ext):
            self.ext = ext

        def __enter__(self):
            log.append(("enter", self.ext))

        def __exit__(self, *exc):
            log.append(("exit", self.ext))

    def current_stream(index):
        log.append(("current_stream", index))
        return SimpleNamespace(cuda_stream=0x2000)

    cuda = SimpleNamespace(is_initialized=lambda: True, current_stream=current_stream, stream=StreamContext,
                           ExternalStream=lambda ptr, device: ("external", ptr, device))
    c = SimpleNamespace() if raw_stream is None else SimpleNamespace(_cuda_getCurrentRawStream=lambda i: raw_stream)
    return SimpleNamespace(cuda=cuda, version=SimpleNamespace(hip=None), _C=c), log


def test_the_torch_carrier_reads_the_raw_current_stream_where_torch_has_it():
    from types import SimpleNamespace
    block = SimpleNamespace(device="cuda:1", ptr=0x5000)  # what the carrier reads of the block's Stream
    torch, log = fake_torch(0x3000)
    carrier = dlstream._carry._Torch()
    token = carrier.enter(torch, block)
    assert token[1] == 0x3000 and log == [("enter", ("external", 0x5000, 1))]  # no torch Stream made
    carrier.exit(token)
    assert log[-1] == ("exit", ("external", 0x5000, 1))
    torch, log = fake_torch(None)  # a torch without it: its current_stream(index)
    token = carrier.enter(torch, block)
    assert token[1] == 0x2000 and log == [("current_stream", 1), ("enter", ("external", 0x5000, 1))]
    carrier.exit(token)
    torch, log = fake_torch(0x5000)  # torch's current stream is the block's already: nothing to carry
    assert carrier.enter(torch, block) is None and log == []


def test_the_carry_refuses_what_its_enter_did_not_return():
    s = dlstream.Stream(CPU)
    for bad in ([1], [(1,)], "carried", 3):
        with pytest.raises(TypeError, match="_carry_exit"):
            dlstream._carry.exit(bad, s, None)
    dlstream._carry.exit(None, s, None)
    dlstream._carry.exit([], s, None)
    s.close()
