# SPDX-License-Identifier: Apache-2.0
"""Correct and concurrent (issue 32), on the CPU backend: every row of the issue's table, with a latch holding the
first stream and a negative control that shows the check can fail; blocks that carry the framework; NumPy arrays
passed straight; Tensor.record_stream. The framework is _dls_fake_exchange (tests/python/fake_exchange.c), a torch
stand-in with the DLPack C exchange API and a current stream, whose tensors view NumPy memory; its carrier (below)
makes blocks set its current stream as they do torch's. Overlap is seen with latches: the second stream finishes
while the first is held (never a sleep, never a timer)."""
import os
import sys

import numpy as np
import pytest

import dlstream
from conftest import CPU, RULE_OFF, UNDER_TSAN, FakeCarrier, passes, run_python, settle

# An in-process negative control races by design (two CPU streams on one memory): ThreadSanitizer would stop the
# suite at the race the control is there to show.
RACY = "ThreadSanitizer is loaded: this negative control races by design, and TSan would stop at the race it shows"

N = 8


def tensor(fx, a):
    return fx.FakeTensor(a, a.ctypes.data, a.shape)


def held(stream):
    latch = dlstream.Latch(CPU)
    latch.wait(stream, timeout=30.0)
    return latch


def done_event(stream):
    e = dlstream.Event(device=CPU)
    e.record(stream)
    return e


# ---- blocks carry the framework ----

def test_blocks_make_the_frameworks_current_stream_theirs_and_restore_it(carried, no_leaks):
    fx = carried
    f, s = dlstream.Stream(CPU), dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    with dlstream.use_stream(s):
        assert fx.current_stream() == s.ptr
        with dlstream.use_stream(None):
            assert fx.current_stream() == s.ptr, "use_stream(None) lifts dlstream's choice, not the framework's"
    assert fx.current_stream() == f.ptr
    with dlstream.stream_parallel(f):
        with dlstream.branch() as b:
            assert fx.current_stream() == b.ptr
            with dlstream.stream_parallel() as inner:
                assert inner.origin == b
                with dlstream.branch() as c:
                    assert fx.current_stream() == c.ptr
                assert fx.current_stream() == b.ptr
        assert fx.current_stream() == f.ptr
        with pytest.raises(KeyError):
            with dlstream.branch():
                raise KeyError("boom")
        assert fx.current_stream() == f.ptr, "restored when the block raises"
    f.synchronize()
    for o in (f, s):
        o.close()


def test_without_a_carrier_the_frameworks_stream_stays(fx, no_leaks):
    """The control of the test above: a framework no carrier names keeps its current stream in a block."""
    f, s = dlstream.Stream(CPU), dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    with dlstream.use_stream(s):
        assert fx.current_stream() == f.ptr
    for o in (f, s):
        o.close()


# ---- the table's rows ----

def branches_overlap(fx, f, given=None):
    """Row 1 (given None: pooled branches) or row 2 (given: two streams as branches): each branch fills its own
    framework tensor; the first is held. Returns whether the second finished while the first was held, and the
    values after."""
    x1, x2 = np.zeros(N, np.float32), np.zeros(N, np.float32)
    latch = dlstream.Latch(CPU)
    with dlstream.stream_parallel(f):
        with dlstream.branch(given and given[0]) as b1:
            latch.wait(b1, timeout=30.0)
            dlstream.fill(tensor(fx, x1), 1.0)  # no stream=: the branch, the framework's current stream there
        with dlstream.branch(given and given[1]) as b2:
            dlstream.fill(tensor(fx, x2), 2.0)
            e2 = done_event(b2)
    overlapped = passes(e2.query) and (x1 == 0).all()
    latch.open()
    f.synchronize()
    latch.check()
    for o in (latch, e2):
        o.close()
    return overlapped, float(x1[0]), float(x2[0])


def test_row1_branches_on_their_own_framework_tensors_overlap_with_negative_control(fx, no_leaks):
    f = dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    carrier = FakeCarrier()
    dlstream._carry._CARRIERS.append(carrier)
    try:
        assert branches_overlap(fx, f) == (True, 1.0, 2.0), "branch 2 finished while branch 1 was held"
    finally:
        dlstream._carry._CARRIERS.remove(carrier)
    # The control: a framework the block does not carry. Each call joins the framework's stream (the bare-call rule):
    # branch 2 waits for branch 1 through it.
    assert branches_overlap(fx, f) == (False, 1.0, 2.0)
    f.close()


def test_row2_two_streams_on_their_own_framework_tensors_overlap_as_branches(carried, no_leaks):
    fx = carried
    f, s1, s2 = dlstream.Stream(CPU), dlstream.Stream(CPU), dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    assert branches_overlap(fx, f, (s1, s2)) == (True, 1.0, 2.0)
    for o in (f, s1, s2):
        o.close()


def test_bare_stream_calls_are_joined_with_the_frameworks_stream(carried, no_leaks):
    """Rows 2 and 3 written as bare calls (outside any block): correct, but serial, as docs/python.md says. Each call
    on another stream than the framework's waits for it and makes it wait in turn."""
    fx = carried
    f, s1, s2 = dlstream.Stream(CPU), dlstream.Stream(CPU), dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    x1, x2, x3 = (np.zeros(N, np.float32) for _ in range(3))
    latch = held(s1)
    dlstream.fill(tensor(fx, x1), 1.0, stream=s1)
    dlstream.fill(tensor(fx, x2), 2.0, stream=s2)   # row 2: waits for s1 through f
    dlstream.fill(tensor(fx, x3), 3.0)              # row 3: the framework's own work on f waits for s1
    assert not passes(s2.query) and not passes(f.query)
    latch.open()
    for s in (s1, s2, f):
        s.synchronize()
    assert x1[0] == 1 and x2[0] == 2 and x3[0] == 3
    latch.close()
    for o in (f, s1, s2):
        o.close()


def test_row3_the_frameworks_work_in_a_group_runs_beside_a_held_branch(carried, no_leaks):
    """A launch on a framework tensor in a branch, then unrelated framework work on the origin (the framework's
    stream) before the group ends: the origin's work finishes while the branch is held. Control: the same launch as
    a bare stream= call (the test above) holds the framework's stream."""
    fx = carried
    f = dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    x, other = np.zeros(N, np.float32), np.zeros(N, np.float32)
    latch = dlstream.Latch(CPU)
    with dlstream.stream_parallel(f):
        with dlstream.branch() as b:
            latch.wait(b, timeout=30.0)
            dlstream.fill(tensor(fx, x), 1.0)
        dlstream.fill(tensor(fx, other), 5.0)  # on f: between the fork and the join
        e = done_event(f)
    assert passes(e.query) and other[0] == 5 and x[0] == 0
    latch.open()
    f.synchronize()
    assert x[0] == 1
    for o in (latch, e, f):
        o.close()


@pytest.mark.parametrize("framework_says_f", [True, False])
def test_row4_a_branch_reads_after_the_frameworks_earlier_write_with_negative_control(carried, framework_says_f):
    """The framework writes x on f (held); then a branch of a group on f reads x: the fork orders it after the
    write. Control: the framework names another current stream for the block's edges, so nothing orders the
    branch after f's write."""
    if UNDER_TSAN and not framework_says_f:
        pytest.skip(RACY)
    fx = carried
    f, s = dlstream.Stream(CPU), dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    x, out = np.zeros(N, np.float32), np.zeros(N, np.float32)
    latch = held(f)
    dlstream.fill(tensor(fx, x), 7.0)  # the framework's write, on f
    was = dlstream._dlstream._test_foreign(False)  # the fill above made no record: only the framework orders it
    try:
        origin = f if framework_says_f else s
        fx.set_current_stream(origin.ptr)
        with dlstream.stream_parallel(origin):
            with dlstream.branch() as b:
                dlstream.copy(tensor(fx, out), tensor(fx, x))
                e = done_event(b)
        early = passes(e.query)
        latch.open()
        for o in (f, s):
            o.synchronize()
    finally:
        dlstream._dlstream._test_foreign(was)
    if framework_says_f:
        assert not early and out[0] == 7
    else:
        assert early and out[0] == 0, "negative control: the branch read before the framework's write"
    for o in (latch, e, f, s):
        o.close()
    settle()


@pytest.mark.parametrize("same", [False, True])
def test_rows5_and_6_dlstream_tensors_on_two_streams_overlap_with_control(same, no_leaks):
    """Row 5: writers of two dlstream tensors on two streams overlap; row 6: two readers of one tensor overlap (on
    streams other than its last writer's: a use on the writer's stream re-records the event a crossing from it waits
    on, so a reader there is waited for). The control (`same`): the second stream writes the first one's tensor, and
    waits."""
    s1, s2, s3 = dlstream.Stream(CPU), dlstream.Stream(CPU), dlstream.Stream(CPU)
    t1, t2 = (dlstream.empty(N, "float32", device=CPU, stream=s) for s in (s1, s2))
    u1, u2 = (dlstream.empty(N, "float32", device=CPU, stream=s) for s in (s1, s2))
    for t in (t1, t2, u1, u2):
        dlstream.fill(t, 0.0)
    dlstream.synchronize()
    latch = held(s1)
    dlstream.fill(t1, 1.0, stream=s1)
    dlstream.fill(t1 if same else t2, 2.0, stream=s2)  # row 5
    row5 = passes(s2.query)
    latch.open()
    dlstream.synchronize()
    latch.close()
    latch = held(s3)
    dlstream.copy(u1, t1, stream=s3)
    if same:
        dlstream.fill(t1, 3.0, stream=s2)  # a writer after the held reader: waits
    else:
        dlstream.copy(u2, t1, stream=s2)   # row 6: a second reader
    row6 = passes(s2.query)
    latch.open()
    dlstream.synchronize()
    assert (row5, row6) == ((False, False) if same else (True, True))
    for o in (latch, t1, t2, u1, u2, s1, s2, s3):
        o.close()


# ---- memory passed straight: NumPy arrays and views ----

NUMPY = """
import numpy as np, dlstream
s1, s2 = dlstream.Stream("cpu"), dlstream.Stream("cpu")
legacy = dlstream.Stream.legacy("cpu")
off = {off}
def run(case):
    X = np.zeros(4, np.float32)
    t = dlstream.from_dlpack(X) if case == "import" else None
    latch = dlstream.Latch("cpu")
    latch.wait(s1, timeout=30.0)
    if case == "same":
        dlstream.fill(X, 1.0, stream=s1)
        dlstream.fill(X, 2.0, stream=s2)            # must land after s1's fill
        later = s2
    elif case == "views":
        dlstream.fill(X[:2], 5.0, stream=s1)
        dlstream.axpy(1.0, X[:2], X[2:], stream=s2)  # reads X[:2] after s1's fill
        later = s2
    else:
        dlstream.fill(t, 3.0, stream=s1)            # through the import
        dlstream.axpy(1.0, X, X)                    # X straight, on the legacy stream: X = 2 X after the fill
        later = legacy
    if off:
        later.synchronize()                         # nothing holds it: it runs first
    latch.open()
    dlstream.synchronize()
    latch.close()
    return X.tolist()
print(run("same"), run("views"), run("import"))
"""


@pytest.mark.parametrize("off", [False, True])
def test_numpy_arrays_passed_straight_are_ordered_with_negative_control(off):
    """The issue's three cases: one NumPy array filled on two streams; a view written on one stream and read (as
    the other view's input) on another; an import of the array used on one stream and the array straight on the
    legacy stream. Control: the record of foreign memory off (DLSTREAM_TEST_NO_FOREIGN=1)."""
    env = {"DLSTREAM_TEST_NO_FOREIGN": "1", "TSAN_OPTIONS": "report_bugs=0"} if off else None
    r = run_python(NUMPY.format(off=off), env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = r.stdout.strip().splitlines()[-1]
    want = "[1.0, 1.0, 1.0, 1.0] [5.0, 5.0, 0.0, 0.0] [3.0, 3.0, 3.0, 3.0]" if off else \
        "[2.0, 2.0, 2.0, 2.0] [5.0, 5.0, 5.0, 5.0] [6.0, 6.0, 6.0, 6.0]"
    assert got == want, f"record {'off' if off else 'on'}: {got}"


@pytest.mark.parametrize("foreign", [True, False])
def test_branches_sharing_a_framework_tensor_are_ordered_per_buffer_with_negative_control(carried, foreign):
    """Branch 1 writes x (held), branch 2 reads it: the record orders branch 2 after branch 1, and branch 2 alone,
    while a third branch on another tensor runs. Control: the record off, branch 2 reads before the write."""
    if UNDER_TSAN and not foreign:
        pytest.skip(RACY)
    fx = carried
    f = dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    x, out, other = (np.zeros(N, np.float32) for _ in range(3))
    was = dlstream._dlstream._test_foreign(foreign)
    try:
        latch = dlstream.Latch(CPU)
        with dlstream.stream_parallel(f):
            with dlstream.branch() as b1:
                latch.wait(b1, timeout=30.0)
                dlstream.fill(tensor(fx, x), 4.0)
            with dlstream.branch() as b2:
                dlstream.copy(tensor(fx, out), tensor(fx, x))
                e2 = done_event(b2)
            with dlstream.branch() as b3:
                dlstream.fill(tensor(fx, other), 1.0)
                e3 = done_event(b3)
        early2, early3 = passes(e2.query), passes(e3.query)
        latch.open()
        f.synchronize()
    finally:
        dlstream._dlstream._test_foreign(was)
    assert early3 and other[0] == 1, "an unrelated branch is not held"
    assert (early2, out[0]) == ((False, 4.0) if foreign else (True, 0.0))
    for o in (latch, e2, e3, f):
        o.close()
    settle()


def test_a_framework_tensor_used_in_a_branch_is_kept_until_the_branch_passes(carried, no_leaks):
    fx = carried
    f = dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    x = np.zeros(N, np.float32)
    t = tensor(fx, x)
    base = sys.getrefcount(t)
    latch = dlstream.Latch(CPU)
    with dlstream.stream_parallel(f):
        with dlstream.branch() as b:
            latch.wait(b, timeout=30.0)
            dlstream.fill(t, 1.0)
            assert sys.getrefcount(t) == base + 1, "held while the branch may still write it"
    latch.open()
    f.synchronize()
    settle()
    assert sys.getrefcount(t) == base
    dlstream.fill(t, 2.0)  # the control: on the framework's stream outside a block, nothing is kept
    assert sys.getrefcount(t) == base
    f.synchronize()
    latch.close()
    f.close()


# ---- Tensor.record_stream ----

RECORD_STREAM = """
import numpy as np, dlstream
s0, s1, s2 = (dlstream.Stream("cpu") for _ in range(3))
def run(declared_on):
    t = dlstream.empty(4, "float32", device="cpu", stream=s0)
    dlstream.fill(t, 0.0)
    s0.synchronize()
    latch = dlstream.Latch("cpu")
    latch.wait(s2, timeout=30.0)
    dlstream.fill(t, -3.0, stream=s2)             # pending behind the latch
    t.record_stream({{"s1": s1, "s0": s0}}[declared_on])
    dlstream.fill(t, 7.0, stream=s0)              # must land after s2's fill
    if {off}:
        s0.synchronize()
    latch.open()
    dlstream.synchronize()
    latch.close()
    v = float(np.from_dlpack(t)[0])
    t.close()
    return v
print(run("s1"), run("s0"))
"""


@pytest.mark.parametrize("off", [False, True])
def test_record_stream_never_drops_a_pending_writer_with_negative_control(off):
    """The issue's reproducer: t.record_stream(s1) (or s0) while s2's fill is pending must not let s0's later fill
    overtake it: t ends as 7. Control: the rule off (DLSTREAM_TEST_NO_HAZARDS=1), t ends as -3."""
    r = run_python(RECORD_STREAM.format(off=off), env=RULE_OFF if off else None, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == (["-3.0", "-3.0"] if off else ["7.0", "7.0"])


# ---- branches bound to their origin (the frameworks' caching allocators) ----

def branch_of(origin):
    """The native of the one branch of a group on `origin` (its handle ends here: the stream goes back to the pool)."""
    with dlstream.stream_parallel(origin):
        with dlstream.branch() as b:
            return b.ptr


@pytest.mark.parametrize("bind", [True, False])
def test_a_branch_stream_goes_back_to_its_origins_groups_only_with_negative_control(bind, no_leaks):
    """A pooled stream that was a branch of a group on f is handed out again to groups on f only, never to a group
    on g: memory a framework allocated in the branch (tied to that stream by its allocator) and f used after the
    join is reused only after f's earlier work (the next fork from f). Control: binding off, g's group gets it."""
    was = dlstream._dlstream._test_bind_branches(bind)
    f, g = dlstream.Stream(CPU), dlstream.Stream(CPU)
    try:
        first, on_g, again = branch_of(f), branch_of(g), branch_of(f)
        assert again == first or not bind
        assert (on_g != first) == bind
    finally:
        dlstream._dlstream._test_bind_branches(was)
        dlstream.synchronize()
        for o in (f, g):
            o.close()


def test_a_full_pool_of_bound_streams_keeps_the_newest_binding(no_leaks):
    """With more origins than the pool keeps bound streams for (DLS__BOUND_MAX, 64), all alive, the newest binding
    still holds: an older bound stream makes room. Before, the branch of the 65th origin was destroyed, not pooled,
    and its next group got another stream (CI, the wheel's run of the suite)."""
    origins = [dlstream.Stream(CPU) for _ in range(70)]
    try:
        for o in origins:
            branch_of(o)
        assert branch_of(origins[-1]) == branch_of(origins[-1])
    finally:
        dlstream.synchronize()
        for o in origins:
            o.close()


@pytest.mark.parametrize("ends", [True, False])
def test_an_origins_end_unbinds_its_branch_streams_with_negative_control(ends, no_leaks):
    """An owned origin's end unbinds the streams bound to it (after they wait for its work): a group on another
    stream gets them, and no stream made later at the dead origin's address inherits the binding. Control: the
    origin lives on, its branch stays bound and g's group gets another stream."""
    f, g = dlstream.Stream(CPU), dlstream.Stream(CPU)
    first = branch_of(f)
    if ends:
        f.close()
    try:
        assert (branch_of(g) == first) == ends
    finally:
        dlstream.synchronize()
        for o in (f, g):
            o.close()


@pytest.mark.parametrize("kept", [False, True])
def test_branches_on_framework_tensors_give_their_streams_back_to_the_pool_with_negative_control(carried, kept,
                                                                                                 no_leaks):
    """Groups whose branches use framework tensors (issue 32's benchmark: a wall-clock speedup of 1.04) reuse the
    pooled streams of the groups before: the natives handed out over many groups stay few. Before, each branch made
    a new stream (and the driver destroyed an old one): the record of each tensor kept an entry, and so a reference,
    for every stream that ever used it, and the wrapper the call made of the framework's current stream (the branch's
    own native, read back) kept the branch in the stream cache. Control: the test keeps its own wrapper of every
    branch's native, which holds the stream as those did, and every group gets new streams."""
    fx = carried
    f = dlstream.Stream(CPU)
    fx.set_current_stream(f.ptr)
    k, groups = 4, 6
    xs = [np.zeros(N, np.float32) for _ in range(k)]
    seen, wraps = set(), []
    try:
        for _ in range(groups):
            with dlstream.stream_parallel(f):
                for x in xs:
                    with dlstream.branch() as b:
                        dlstream.fill(tensor(fx, x), 1.0)
                        seen.add(b.ptr)
                        if kept:
                            wraps.append(dlstream.Stream.wrap(b.ptr, CPU))
            f.synchronize()
        assert (len(seen) <= 2 * k) != kept, f"{len(seen)} streams over {groups} groups of {k} branches"
        assert all((x == 1.0).all() for x in xs)
    finally:
        for w in wraps:
            w.close()
        f.close()


# ---- CuPy carried, on the null CUDA driver with tests/python/fake_cupy ----

def test_a_branch_carries_cupys_current_stream():
    test_cupy_path = pytest.importorskip("test_cupy_path")
    if not os.path.exists(os.path.join(test_cupy_path.NULL_DRIVER, "libcuda.so.1")):
        pytest.skip(f"no null CUDA driver (bench/null_driver.c) in {test_cupy_path.NULL_DRIVER}")
    got = test_cupy_path.run('''
        with cupy.cuda.Stream(S1):
            with dlstream.stream_parallel() as g:
                out["origin"] = g.origin.ptr
                with dlstream.branch() as b:
                    out["b"] = b.ptr
                    out["inside"] = cupy.cuda.get_current_stream().ptr
                    waits = stats()[2]
                    axpy.launch(4, 256, 1024, 1.0, x, y)
                    out["launch"] = stats()[0]
                    out["waits"] = stats()[2] - waits
                out["after"] = cupy.cuda.get_current_stream().ptr
            out["S1"] = S1
    ''', True)
    assert got["origin"] == got["S1"] == got["after"]
    assert got["inside"] == got["b"] == got["launch"], "CuPy's current stream in the branch is the branch"
    assert got["waits"] == 0, "the branch's launch on CuPy's (carried) stream waits for nothing"
