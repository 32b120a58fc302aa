# SPDX-License-Identifier: Apache-2.0
"""The hazard rule's model (test_hazard_model.py) with foreign memory and blocks: the same random programs, on
2 to 4 streams with latches, also use NumPy arrays and their overlapping views passed straight to the calls (the
record of foreign memory orders them), tensors of a framework with a current stream (tests/python/fake_exchange.c,
a torch stand-in over NumPy memory, which blocks carry as they carry torch: its calls with no stream= run on its
current stream), Tensor.record_stream at random points, and blocks: use_stream(s), and stream_parallel groups whose
branches (pooled, or the program's streams) run random calls on random tensors, shared between branches at random,
nested groups among them. The model is the same program run one call at a time in NumPy, in the order the calls
were made.

The negative control runs the machine with the record of foreign memory off (DLSTREAM_TEST_NO_FOREIGN=1, in a child
process): hypothesis must then find a mismatch. On a GPU (torch with CUDA), torch tensors and torch's own ops are
mixed into the branches."""
import collections
import os
import sys

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (scripts/deps.sh installs it)")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import initialize, precondition, rule  # noqa: E402

import dlstream  # noqa: E402
import test_hazard_model as base  # noqa: E402
from test_hazard_model import N, PROGRAMS, Programs, torch  # noqa: E402

fx = None
try:
    import _dls_fake_exchange as fx  # noqa: F811
except ImportError:
    pass

OPS = st.lists(st.tuples(st.sampled_from(["fill", "axpy", "copy", "hold", "torch", "torch_new"]), st.integers(0, 63), st.integers(0, 63),
                         st.integers(-2, 3)), min_size=1, max_size=3)


COUNTS = collections.Counter()  # what the programs did, over a run (the test prints it: pytest -s)


class ForeignPrograms(Programs):
    GPU = False  # the GPU variant (below) has no NumPy arrays (a GPU call stages them and blocks) and no stand-in

    @initialize(nstreams=st.integers(2, 4))
    def start(self, nstreams):
        super().start(nstreams)
        self.bases = {}          # id -> (NumPy base array, its model): views share both
        self.views = {}          # id -> the NumPy view a stand-in's tensor is over (read by check)
        self.branch_latches = []
        self.imports = set()     # ids of imports of foreign memory (round trips of NumPy arrays)
        self.owners, self.touched = {}, {}  # in a group: tensors a branch's torch op keeps, tensors each touched
        self.framework = None    # the stand-in's current stream (a Stream of the program), None: legacy
        if fx is not None:
            fx.set_current_stream(0)

    # ---- NumPy arrays, views of them, and the stand-in's tensors over them ----

    @precondition(lambda self: not self.GPU)
    @rule(target=Programs.tensors, v=st.integers(-3, 3), fake=st.booleans())
    def new_numpy(self, v, fake):
        COUNTS["framework tensors" if fake and fx is not None else "NumPy arrays"] += 1
        base_arr, model = np.full(2 * N, float(v), np.float32), np.full(2 * N, float(v), np.float32)
        k = self._alias(base_arr[:N], model[:N])
        self.bases[k] = (base_arr, model)
        if fake and fx is not None:
            self.live[k] = (fx.FakeTensor(base_arr, base_arr.ctypes.data, (N,)), model[:N])
            self.views[k] = base_arr[:N]
        return k

    @rule(target=Programs.tensors, k=Programs.tensors, at=st.sampled_from([0, N // 2, N]), fake=st.booleans())
    def view(self, k, at, fake):
        """Another view of a NumPy array's memory: N elements from `at` (overlapping the first unless at is N)."""
        if k not in self.bases:
            return k
        base_arr, model = self.bases[k]
        COUNTS["views"] += 1
        j = self._alias(base_arr[at:at + N], model[at:at + N])
        self.bases[j] = (base_arr, model)
        if fake and fx is not None:
            ptr = base_arr.ctypes.data + at * base_arr.itemsize
            self.live[j] = (fx.FakeTensor(base_arr, ptr, (N,)), model[at:at + N])
            self.views[j] = base_arr[at:at + N]
        return j

    @staticmethod
    def _device(t):
        return "cpu:0" if fx is not None and isinstance(t, fx.FakeTensor) else Programs._device(t)

    def _overlaps(self, x, y):
        """Two different tensors of the program over overlapping memory (a launch of a built-in refuses that)."""
        mx, my = self.live[x][1], self.live[y][1]
        return x != y and mx is not my and np.shares_memory(mx, my)

    def axpy(self, x, y, si, a, through_launch, in_context):
        if x in self.live and y in self.live and self._overlaps(x, y):
            through_launch = False
        super().axpy(x, y, si, a, through_launch, in_context)

    axpy = rule(x=Programs.tensors, y=Programs.tensors, si=st.integers(0, 3), a=st.integers(-2, 2),
                through_launch=st.booleans(), in_context=st.booleans())(axpy)

    def close(self, k):
        super().close(k)
        self.bases.pop(k, None)
        self.views.pop(k, None)

    close = rule(k=Programs.tensors)(close)

    def round_trip(self, k, via):
        j = super().round_trip(k, via)
        if k in self.live and isinstance(j, int) and (k in self.imports or not isinstance(self.live[k][0],
                                                                                         dlstream.Tensor)):
            self.imports.add(j)  # an import of foreign memory (or an alias of one): its producer is eager
        return j

    round_trip = rule(target=Programs.tensors, k=Programs.tensors, via=st.sampled_from(base.VIAS))(round_trip)

    def capture(self, op, x, y, si, a, ri, now):
        if x in self.imports or y in self.imports:  # a capture never waits for an import's eager producer
            k = len(self.graphs)
            self.graphs[k] = None
            return k
        return super().capture(op, x, y, si, a, ri, now)

    capture = rule(target=Programs.graphs, op=st.sampled_from(["fill", "axpy", "copy"]), x=Programs.tensors,
                   y=Programs.tensors, si=st.integers(0, 3), a=st.integers(-2, 2), ri=st.integers(0, 3),
                   now=st.integers(0, 2))(capture)

    # ---- the framework's stream, record_stream ----

    @precondition(lambda self: fx is not None and not self.GPU)
    @rule(si=st.integers(-1, 3))
    def framework_stream(self, si):
        """The stand-in's current stream changes, as under `with torch.cuda.stream(s)`: the new one first waits for
        the old (what a correct program of that framework does; its own ordering, not dlstream's)."""
        new = None if si < 0 else self.streams[si % len(self.streams)]
        if new is not None and new.device != "cpu:0":
            return
        old = self.framework or dlstream.Stream.legacy("cpu:0")
        (new or dlstream.Stream.legacy("cpu:0")).wait(old)
        self.framework = new
        fx.set_current_stream(0 if new is None else new.ptr)

    @rule(k=Programs.tensors, si=st.integers(0, 3))
    def record_stream(self, k, si):
        """A declared use of a dlstream tensor on a random stream: it adds a party, never drops an ordering."""
        if k in self.live and isinstance(self.live[k][0], dlstream.Tensor):
            t = self.live[k][0]
            t.record_stream(self._stream(si, t))
            COUNTS["record_stream"] += 1

    # ---- blocks ----

    def _pick(self, i):
        keys = sorted(self.live)
        return keys[i % len(keys)] if keys else None

    def _op(self, op, i, j, v, stream=None, branch=None):
        """One call of a block, with no stream= (the block's stream), on tensors picked by index. In a group
        (`branch`: its index), a tensor a torch op touched is private to that branch: dlstream does not see torch's
        own work, which only the group's edges order (torch's rule, not dlstream's)."""
        if op == "torch_new":
            if self.GPU:  # allocated on the block's stream by torch's allocator, used later anywhere
                self._private(self._alias(torch.full((N,), float(v), device="cuda"), np.full(N, float(v), np.float32)),
                              branch)
                COUNTS["block torch_new"] += 1
            return
        x, y = self._pick(i), self._pick(j)
        if x is None:
            return
        (tx, mx), (ty, my) = self.live[x], self.live[y]
        if branch is not None and not (self._mine(x, branch, op == "torch") and self._mine(y, branch, op == "torch")):
            return
        COUNTS["block " + op] += 1
        COUNTS["block call on foreign memory"] += not isinstance(ty, dlstream.Tensor)
        if op == "torch":
            if self.GPU and isinstance(ty, torch.Tensor):
                ty.mul_(float(v)).add_(1.0)  # torch's own op, on torch's current stream: the block's
                my[:] = my * np.float32(v) + np.float32(1)
            return
        if op == "hold":
            latch = dlstream.Latch(stream.device)
            latch.wait(stream, timeout=30.0)
            self.branch_latches.append(latch)
        elif self._device(ty) != stream.device or self._device(tx) != stream.device:
            return  # a launch may not mix devices
        elif op == "fill":
            dlstream.fill(ty, float(v))
            my[:] = v
        elif op == "axpy":
            dlstream.axpy(float(v), tx, ty)
            my[:] = my + np.float32(v) * mx  # x may be y, or overlap it: read before written
        elif x != y:
            dlstream.copy(ty, tx)
            my[:] = mx

    def _mine(self, k, branch, torch_op):
        """Whether branch `branch` of the open group may use tensor k (and, for a torch op, keeps it to itself)."""
        owner = self.owners.get(k)
        if owner is not None and owner != branch:
            return False
        if torch_op:
            if self.touched.get(k, {branch}) - {branch}:
                return False
            self.owners[k] = branch
        self.touched.setdefault(k, set()).add(branch)
        return True

    def _private(self, k, branch):
        if branch is not None:
            self.owners[k] = branch

    @rule(si=st.integers(0, 3), ops=OPS)
    def in_use_stream(self, si, ops):
        s = self.streams[si % len(self.streams)]
        COUNTS["use_stream blocks"] += 1
        with dlstream.use_stream(s):
            for op in ops:
                self._op(*op, stream=s)

    @rule(si=st.integers(0, 3), branches=st.lists(st.tuples(st.integers(-1, 3), OPS, st.booleans()), min_size=1,
                                                      max_size=3))
    def group(self, si, branches):
        """A stream_parallel group on a program stream: each branch (pooled, or a program stream other than the
        origin) runs its calls; a branch may open a nested group with one pooled branch running the same calls."""
        origin = self.streams[si % len(self.streams)]
        self.owners, self.touched = {}, {}
        COUNTS["groups"] += 1
        COUNTS["branches"] += len(branches)
        COUNTS["nested groups"] += sum(nested for _, _, nested in branches)
        with dlstream.stream_parallel(origin):
            for n, (which, ops, nested) in enumerate(branches):
                given = None if which < 0 else self.streams[which % len(self.streams)]
                if given is not None and (given == origin or given.device != origin.device):
                    given = None
                with dlstream.branch(given) as b:
                    if nested:
                        with dlstream.stream_parallel():
                            with dlstream.branch() as inner:
                                for op in ops:
                                    self._op(*op, stream=inner, branch=n)
                    else:
                        for op in ops:
                            self._op(*op, stream=b, branch=n)

    def _open_all(self):
        super()._open_all()
        for latch in self.branch_latches:
            latch.open()
            latch.close()
        self.branch_latches.clear()

    def check(self):
        """Reads every tensor (after every latch opened, every stream waited for) against the model."""
        self._open_all()
        dlstream.synchronize()
        for k, (t, m) in self.live.items():
            if k in self.views:
                got = self.views[k]
            elif self.GPU:
                got = (t if isinstance(t, torch.Tensor) else torch.from_dlpack(t)).cpu().numpy()
            else:
                got = np.from_dlpack(t)
            assert np.array_equal(got, m), f"tensor {k}: dlstream {got[:4]}..., the sequential model {m[:4]}..."

    check = rule()(check)

    def teardown(self):
        super().teardown()
        if fx is not None:
            fx.set_current_stream(0)
        if self.GPU:
            torch.cuda.synchronize()


ForeignPrograms.TestCase.settings = settings(max_examples=max(PROGRAMS // 2, 50), stateful_step_count=25,
                                             deadline=None, suppress_health_check=list(HealthCheck),
                                             derandomize=True, database=None)


class TorchBranchPrograms(ForeignPrograms):
    """The same programs on cuda:0 with torch tensors (made outside blocks on torch's current stream, or inside a
    block on its stream: torch's allocator ties them to it) and torch's own ops, outside blocks and in them (where
    torch's current stream is the block's); dlstream's calls on random streams and in blocks."""
    GPU = True

    @initialize(nstreams=st.integers(2, 4))
    def start(self, nstreams):
        self.streams = [dlstream.Stream("cuda:0") for _ in range(nstreams)]
        self.handles = [dlstream.Stream.wrap(s.ptr, s.device) for s in self.streams]
        self.latches, self.live, self.next_id, self.graphs = {}, {}, 0, {}
        self.axpy = {"cuda:0": dlstream.builtin_function("dls_axpy_f32", "cuda:0")}
        self.bases, self.views, self.branch_latches, self.imports = {}, {}, [], set()
        self.owners, self.touched, self.framework = {}, {}, None

    def _stream(self, i, t=None):
        return self.streams[i % len(self.streams)]

    @staticmethod
    def _device(t):
        return "cuda:0"

    @rule(target=Programs.tensors, v=st.integers(-3, 3))
    def new_torch(self, v):
        return self._alias(torch.full((N,), float(v), device="cuda"), np.full(N, float(v), np.float32))

    @rule(k=Programs.tensors, a=st.integers(-2, 2))
    def torch_op(self, k, a):
        if k in self.live and isinstance(self.live[k][0], torch.Tensor):
            t, m = self.live[k]
            t.mul_(float(a)).add_(1.0)
            m[:] = m * np.float32(a) + np.float32(1)

    def straight(self, k, via):
        return k  # torch's own ops on a torch tensor of dlstream memory are torch's to order

    straight = rule(target=Programs.tensors, k=Programs.tensors, via=st.sampled_from(base.VIAS))(straight)

    def round_trip(self, k, via):
        if k not in self.live or isinstance(self.live[k][0], torch.Tensor):
            return k
        t, m = self.live[k]
        return self._alias(dlstream.from_dlpack(torch.from_dlpack(t)), m)

    round_trip = rule(target=Programs.tensors, k=Programs.tensors, via=st.sampled_from(base.VIAS))(round_trip)

    def close(self, k):
        if k in self.live:
            t = self.live.pop(k)[0]
            if isinstance(t, dlstream.Tensor):
                t.close()

    close = rule(k=Programs.tensors)(close)


TorchBranchPrograms.TestCase.settings = settings(max_examples=max(PROGRAMS // 4, 50), stateful_step_count=25,
                                                 deadline=None, suppress_health_check=list(HealthCheck),
                                                 derandomize=True, database=None)


@pytest.mark.skipif(torch is None, reason="needs torch with CUDA (the GPU variant: torch tensors and torch ops in "
                                          "branches)")
def test_programs_with_torch_ops_in_blocks_on_the_gpu():
    # torch's kernels load at their first launch, which waits for an idle device (a held latch never is): warm up.
    x = torch.ones(N, device="cuda")
    x.mul_(2.0).add_(1.0)
    torch.full((N,), 1.0, device="cuda")
    torch.from_dlpack(dlstream.empty(N, "float32", device="cuda:0")).cpu()
    # dlstream's built-ins likewise (a kernel's first launch loads it): each call the programs make, once.
    y = torch.zeros(N, device="cuda")
    dlstream.fill(y, 1.0)
    dlstream.axpy(1.0, x, y)
    dlstream.copy(y, x)
    dlstream.copy(y[1:], x[:-1])
    torch.cuda.synchronize()
    COUNTS.clear()
    TorchBranchPrograms.TestCase("runTest").runTest()
    print("\nprograms:", TorchBranchPrograms.TestCase.settings.max_examples, dict(sorted(COUNTS.items())))
    assert COUNTS["block torch"] > 0 and COUNTS["block torch_new"] > 0


def test_programs_with_foreign_memory_and_blocks(carried):
    COUNTS.clear()
    ForeignPrograms.TestCase("runTest").runTest()
    print("\nprograms:", ForeignPrograms.TestCase.settings.max_examples, dict(sorted(COUNTS.items())))
    for what in ("NumPy arrays", "views", "framework tensors", "record_stream", "groups", "nested groups",
                 "use_stream blocks", "block call on foreign memory"):
        assert COUNTS[what] > 0, f"the programs made no {what}"


# A NumPy array written on held stream 1, then on stream 0: only the record of foreign memory makes stream 0 wait.
NUMPY_RACE = """
M.start(2)
a = M.new_numpy(1, False)
M.hold(1)
M.fill(a, 1, 3)
M.fill(a, 0, 7)
ran(0)
M.release(1)
"""


def test_the_directed_program_agrees_with_the_model():
    """The program of the negative control below, with the record of foreign memory on: the model agrees."""
    base.run_program(ForeignPrograms, NUMPY_RACE)


def test_the_model_finds_a_mismatch_with_the_record_of_foreign_memory_off():
    """The negative control: the same programs with the record of foreign memory off (DLSTREAM_TEST_NO_FOREIGN=1)
    must disagree with the model."""
    setup = "import dlstream, conftest\ndlstream._carry._CARRIERS.append(conftest.FakeCarrier())"
    print("\n" + base.finds_a_mismatch("test_hazard_model_foreign", "ForeignPrograms",
                                      {"DLSTREAM_TEST_NO_FOREIGN": "1", "TSAN_OPTIONS": "report_bugs=0"}, NUMPY_RACE,
                                      setup))
