# SPDX-License-Identifier: Apache-2.0
"""The hazard rule against a sequential model: hypothesis writes random programs of dlstream calls on dlstream's
own tensors (allocations on one stream first written on another, fill, axpy, copy, the built-in axpy through
Function.launch, use_stream, closing tensors, trims of the caching allocator, graphs:
one of those calls captured on a stream and replayed on any, later, even after its tensors were closed, round
trips: a tensor exported to NumPy or torch and imported back, an alias of its memory, and the NumPy array or torch
tensor of such an export itself, passed straight to the calls as another alias) spread over
2 to 4 streams (on 2 CPU devices when the CPU backend offers them), with latches holding random streams at random
moments so that work really runs out of program order unless dlstream orders it. Every check reads every tensor
and compares it with the same program run one call at a time in NumPy.

DLSTREAM_HAZARD_PROGRAMS sets how many programs (CI: 2000). The negative controls run the same machine with the
rule off (DLSTREAM_TEST_NO_HAZARDS=1, in a child process), and with the caching allocator handing memory to another
stream without its wait (DLSTREAM_TEST_CACHE_NO_WAIT=1): hypothesis must then find a mismatch.

Out of the model: raw pointers, which dlstream does not order (docs/semantics.md)."""
import os
import sys

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (scripts/deps.sh installs it)")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, multiple, precondition, rule  # noqa: E402

import dlstream  # noqa: E402

N = 16
PROGRAMS = int(os.environ.get("DLSTREAM_HAZARD_PROGRAMS", "300"))
if "tsan" in os.environ.get("LD_PRELOAD", ""):  # ThreadSanitizer looks for races, not breadth, at 5-15x the time
    PROGRAMS = min(PROGRAMS, 200)


def _torch_cpu():
    if os.environ.get("DLSTREAM_HAZARD_TORCH", "1") != "1":
        return None
    try:
        import torch
        return torch
    except ImportError:
        return None


# The round trip goes through NumPy, and through torch too where torch is installed (its CPU tensors).
VIAS = ["numpy"] + (["torch"] if _torch_cpu() is not None else [])


def devices():
    n = dlstream.device_count("cpu")
    return ["cpu:0", "cpu:1"] if n >= 2 else ["cpu:0"]


class Programs(RuleBasedStateMachine):
    tensors = Bundle("tensors")
    graphs = Bundle("graphs")

    @initialize(nstreams=st.integers(2, 4))
    def start(self, nstreams):
        devs = devices()
        self.streams = [dlstream.Stream(devs[i % len(devs)]) for i in range(nstreams)]
        # a second handle of each stream (two frameworks' objects of one stream): the same party to the rule
        self.handles = [dlstream.Stream.wrap(s.ptr, s.device) for s in self.streams]
        self.latches = {}    # stream index -> Latch holding it
        self.live = {}       # id -> (Tensor, model array, stream index)
        self.next_id = 0
        self.axpy = {d: dlstream.builtin_function("dls_axpy_f32", d) for d in devs}
        self.graphs = {}     # id -> (capture, device, what one replay does to the model), or None

    @staticmethod
    def _device(t):
        """Where a call may use `t`: its device (for an array passed straight, the one its DLPack export names)."""
        if isinstance(t, dlstream.Tensor):
            return str(t.device)
        kind, index = t.__dlpack_device__()
        return ("cuda:%d" if int(kind) == 2 else "cpu:%d") % index  # kDLCUDA: a torch tensor of the GPU variant

    def _stream(self, i, t=None):
        """A stream of the tensor's device (a launch may not mix devices), through its first handle or its second."""
        k = i % len(self.streams)
        if t is not None and self.streams[k].device != self._device(t):
            k = next(j for j, x in enumerate(self.streams) if x.device == self._device(t))
        return (self.handles if (i // len(self.streams)) % 2 else self.streams)[k]

    @rule(target=tensors, si=st.integers(0, 3), v=st.integers(-3, 3))
    def new(self, si, v):
        s = self._stream(si)
        t = dlstream.empty(N, "float32", device=s.device, stream=s)
        dlstream.fill(t, float(v))  # on its allocation stream s
        k = self.next_id
        self.next_id += 1
        self.live[k] = (t, np.full(N, float(v), np.float32))
        return k

    @rule(target=tensors, si=st.integers(0, 3), sj=st.integers(0, 3), v=st.integers(-3, 3))
    def new_elsewhere(self, si, sj, v):
        """Allocated on one stream (memory a closed tensor left in the cache: its own stream's at once, another's
        after a wait for that one) and first written on another."""
        s = self._stream(si)
        t = dlstream.empty(N, "float32", device=s.device, stream=s)
        dlstream.fill(t, float(v), stream=self._stream(sj, t))
        k = self.next_id
        self.next_id += 1
        self.live[k] = (t, np.full(N, float(v), np.float32))
        return k

    @rule()
    def trim(self):
        """The cache given back (each block freed in its stream's order) while latches may hold work."""
        dlstream.empty_cache()

    @rule(k=tensors, si=st.integers(0, 3), v=st.integers(-3, 3))
    def fill(self, k, si, v):
        if k not in self.live:
            return
        t, m = self.live[k]
        dlstream.fill(t, float(v), stream=self._stream(si, t))
        m[:] = v

    @rule(x=tensors, y=tensors, si=st.integers(0, 3), a=st.integers(-2, 2), through_launch=st.booleans(),
          in_context=st.booleans())
    def axpy(self, x, y, si, a, through_launch, in_context):
        if x not in self.live or y not in self.live:
            return
        (tx, mx), (ty, my) = self.live[x], self.live[y]
        if self._device(tx) != self._device(ty):
            return
        s = self._stream(si, ty)
        if through_launch:
            self.axpy[self._device(ty)].launch(1, 32, N, float(a), tx, ty, stream=s)
        elif in_context:
            with dlstream.use_stream(s):
                dlstream.axpy(float(a), tx, ty)
        else:
            dlstream.axpy(float(a), tx, ty, stream=s)
        if x == y:
            my *= np.float32(a + 1)
        else:
            my += np.float32(a) * mx

    @rule(dst=tensors, src=tensors, si=st.integers(0, 3))
    def copy(self, dst, src, si):
        if dst not in self.live or src not in self.live or dst == src:
            return
        (td, md), (ts, ms) = self.live[dst], self.live[src]
        if md is ms:
            return  # a tensor and its alias: one memory
        dlstream.copy(td, ts, stream=self._stream(si, td))  # across devices too: a peer copy
        md[:] = ms

    @rule(k=tensors)
    def close(self, k):
        if k in self.live:
            t = self.live.pop(k)[0]
            if isinstance(t, dlstream.Tensor):
                t.close()

    @rule(target=graphs, op=st.sampled_from(["fill", "axpy", "copy"]), x=tensors, y=tensors, si=st.integers(0, 3),
          a=st.integers(-2, 2), ri=st.integers(0, 3), now=st.integers(0, 2))
    def capture(self, op, x, y, si, a, ri, now):
        """Captures one call on a stream (its tensors are eager memory the graph keeps), and replays it `now` times
        on a stream; a replay repeats it."""
        k = len(self.graphs)
        self.graphs[k] = None
        if x not in self.live or y not in self.live or (op == "copy" and x == y):
            return k
        (tx, mx), (ty, my) = self.live[x], self.live[y]
        if not (isinstance(tx, dlstream.Tensor) and isinstance(ty, dlstream.Tensor)) or tx.device != ty.device:
            return k  # another framework's tensor would tie the capture to its eager stream (refused)
        s = self._stream(si, ty)
        with dlstream.capture(s) as g:
            if op == "fill":
                dlstream.fill(ty, float(a))
            elif op == "axpy":
                dlstream.axpy(float(a), tx, ty)
            else:
                dlstream.copy(ty, tx)
        if op == "fill":
            def effect(my=my, a=a):
                my[:] = a
        elif op == "axpy":
            def effect(mx=mx, my=my, a=a):
                my[:] = my + np.float32(a) * mx  # x may be y: read before written
        else:
            def effect(mx=mx, my=my):
                my[:] = mx
        self.graphs[k] = (g, str(ty.device), effect)
        self.replay(k, ri, now)
        return k

    @rule(k=graphs, si=st.integers(0, 3), times=st.integers(1, 2))
    def replay(self, k, si, times):
        if self.graphs.get(k) is None:
            return
        g, dev, effect = self.graphs[k]
        s = next(x for x in self.streams[si % len(self.streams):] + self.streams if x.device == dev)
        for _ in range(times):
            g.replay(stream=s)
            effect()  # the model keeps a closed tensor's array: the graph still uses its memory

    def _alias(self, alias, m):
        """A new tensor of the program that shares the model array `m`: a write through either writes both."""
        k = self.next_id
        self.next_id += 1
        self.live[k] = (alias, m)
        return k

    @rule(target=tensors, k=tensors, via=st.sampled_from(VIAS))
    def round_trip(self, k, via):
        """Exports a tensor to NumPy (or torch) and imports the result back: the same memory as another tensor,
        whose uses dlstream orders against the original's."""
        if k not in self.live:
            return multiple()
        t, m = self.live[k]
        self._open_all()  # the export to the host waits, on the host, for the tensor's uses: no latch may hold one
        host = np.from_dlpack(t) if via == "numpy" else _torch_cpu().from_dlpack(t)
        return self._alias(dlstream.from_dlpack(host), m)

    @rule(target=tensors, k=tensors, via=st.sampled_from(VIAS))
    def straight(self, k, via):
        """Exports a dlstream tensor to NumPy (or torch) and keeps what comes out: the calls get that array
        straight (no import), an alias whose uses dlstream orders against the original's all the same."""
        if k not in self.live or not isinstance(self.live[k][0], dlstream.Tensor):
            return multiple()
        t, m = self.live[k]
        self._open_all()  # the export to the host waits, on the host, for the tensor's uses
        return self._alias(np.from_dlpack(t) if via == "numpy" else _torch_cpu().from_dlpack(t), m)

    @precondition(lambda self: len(self.latches) < len(self.streams) - 1)
    @rule(si=st.integers(0, 3))
    def hold(self, si):
        i = si % len(self.streams)
        if i not in self.latches:
            latch = dlstream.Latch(self.streams[i].device)
            latch.wait(self.streams[i], timeout=30.0)
            self.latches[i] = latch

    @rule(si=st.integers(0, 3))
    def release(self, si):
        latch = self.latches.pop(si % len(self.streams), None)
        if latch is not None:
            latch.open()
            latch.close()

    def _open_all(self):
        for latch in self.latches.values():
            latch.open()
            latch.close()
        self.latches.clear()

    @rule()
    def check(self):
        """Reads every tensor (after every latch opened: reading waits for the tensor's streams) against the model."""
        self._open_all()
        if any(not isinstance(t, dlstream.Tensor) for t, _ in self.live.values()):
            dlstream.synchronize()  # reading an array passed straight waits for nothing: every stream first
        for k, (t, m) in self.live.items():
            got = np.from_dlpack(t)  # for a dlstream tensor, the export waits, on the host, for every use of t
            assert np.array_equal(got, m), f"tensor {k}: dlstream {got[:4]}..., the sequential model {m[:4]}..."

    def teardown(self):
        self.check()
        for g in self.graphs.values():
            if g is not None:
                g[0].close()
        for t, _ in self.live.values():
            if isinstance(t, dlstream.Tensor):
                t.close()
        for s in self.streams:
            s.synchronize()
            s.close()


Programs.TestCase.settings = settings(max_examples=PROGRAMS, stateful_step_count=25, deadline=None,
                                      suppress_health_check=list(HealthCheck), derandomize=True, database=None)
TestPrograms = Programs.TestCase

CHILD = """
import sys
sys.path.insert(0, {tests!r})
import test_hazard_model as m
from hypothesis import settings, HealthCheck
m.Programs.TestCase.settings = settings(max_examples={n}, stateful_step_count=25, deadline=None,
                                        suppress_health_check=list(HealthCheck), derandomize=True, database=None)
m.Programs.TestCase("runTest").runTest()
print("ok")
"""


def test_programs_on_two_cpu_devices():
    """The same programs with DLSTREAM_CPU_DEVICES=2: streams of two devices, copies between them."""
    from conftest import run_python
    tests = os.path.dirname(os.path.abspath(__file__))
    r = run_python(CHILD.format(tests=tests, n=max(PROGRAMS // 4, 50)), env={"DLSTREAM_CPU_DEVICES": "2"},
                   timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout[-1500:] + r.stderr[-3000:]


NEGATIVE = """
import sys
sys.path.insert(0, {tests!r})
import {module} as m
from test_hazard_model import program_globals
from hypothesis import settings, HealthCheck
from hypothesis import Phase
{setup}
import traceback


def found(text, how):
    if "the sequential model" not in text:
        return False
    print("MISMATCH FOUND (" + how + "):", next(l for l in text.splitlines() if "the sequential model" in l).strip())
    return True


# First the program written for this mechanism (the same in every hypothesis version)...
try:
    M = m.{machine}()
    exec({program!r}, program_globals(M))
    M.check()
except AssertionError as e:
    if found(str(e), "the directed program"):
        sys.exit(0)
    raise
# ...then the search. No shrinking: with the mechanism off a failure is a race, which need not happen again when
# replayed.
m.{machine}.TestCase.settings = settings(max_examples=1500, stateful_step_count=25, deadline=None,
                                        suppress_health_check=list(HealthCheck), derandomize=True, database=None,
                                        phases=[Phase.generate])
try:
    m.{machine}.TestCase("runTest").runTest()
except BaseException as e:  # an AssertionError, or a group of them when hypothesis saw several
    text = "".join(traceback.format_exception(e))
    if found(text, "the search"):
        sys.exit(0)
    print(text)
    sys.exit(2)
print("no mismatch found")
sys.exit(1)
"""


def program_globals(M):
    """What a directed program sees: M, and ran(i), which polls (bounded: the `passes` of the tests) until stream i
    of M has run everything queued on it. A program calls it where the race it exists for needs one stream's work
    done before a latch opens; with the mechanism on, that stream waits for the latch, and ran(i) gives up."""
    from conftest import passes
    return {"M": M, "ran": lambda i: passes(M.streams[i].query, seconds=3.0)}


def run_program(machine, program):
    """Runs `program` (statements calling the rules of M, an instance of `machine`) here, then checks every tensor
    and tears the machine down: with every mechanism on, the model must agree."""
    M = machine()
    exec(program, program_globals(M))
    M.check()
    M.teardown()


def finds_a_mismatch(module, machine, env, program, setup=""):
    """Runs, in a child with `env` (a mechanism off), first `program` (statements calling the rules of M, an
    instance of `machine`, a state machine of `module`: the program that the mechanism exists for), then, should
    that have agreed with the model, the random programs of `machine`: the message of the mismatch found; fails
    when neither found one. The program alone, which hypothesis' generation (it differs between its versions) need
    not reach, keeps the control from depending on luck."""
    from conftest import run_python
    tests = os.path.dirname(os.path.abspath(__file__))
    r = run_python(NEGATIVE.format(tests=tests, module=module, machine=machine, setup=setup, program=program),
                   env=env, timeout=600)
    assert r.returncode == 0, f"the mechanism off went unnoticed: {r.stdout[-1500:]}{r.stderr[-1500:]}"
    assert "MISMATCH FOUND" in r.stdout
    return r.stdout.strip().splitlines()[-1]


# Stream 1 held, a tensor written there, then on stream 0: only the hazard rule makes stream 0 wait. (With the rule
# off, stream 0's write has run before the latch opens: the race is certain, not left to the threads' timing.)
RACE = """
M.start(2)
a = M.new(0, 1)
M.hold(1)
M.fill(a, 1, 3)
M.fill(a, 0, 7)
ran(0)
M.release(1)
"""

# A tensor's last write held on stream 0 when it closes; a tensor of stream 1 gets its memory from the cache: only
# the cache's wait keeps the held write off the new tensor.
HANDOVER = """
M.start(2)
a = M.new(0, 1)
M.hold(0)
M.fill(a, 0, 5)
M.close(a)
b = M.new(1, 2)
ran(1)
M.release(0)
"""


def test_the_directed_programs_agree_with_the_model():
    """The programs of the negative controls below, with every mechanism on: the model agrees."""
    for program in (RACE, HANDOVER):
        run_program(Programs, program)


def test_the_model_finds_a_mismatch_with_the_rule_off():
    """The negative control: the same programs with the hazard rule off must disagree with the model."""
    from conftest import RULE_OFF
    finds_a_mismatch("test_hazard_model", "Programs", RULE_OFF, RACE)


def test_the_model_finds_a_mismatch_with_the_cache_handing_over_without_its_wait():
    """The negative control of the allocations: with the caching allocator handing a closed tensor's memory to
    another stream without that stream's wait (DLSTREAM_TEST_CACHE_NO_WAIT=1), work held on the old tensor lands on
    the new one: the model must see it."""
    if os.environ.get("DLSTREAM_DEBUG_ALLOC") == "1" or os.environ.get("DLSTREAM_CACHE_LIMIT") == "0":
        pytest.skip("the cache is off (DLSTREAM_DEBUG_ALLOC=1 or DLSTREAM_CACHE_LIMIT=0)")
    finds_a_mismatch("test_hazard_model", "Programs", {"DLSTREAM_TEST_CACHE_NO_WAIT": "1",
                                                       "TSAN_OPTIONS": "report_bugs=0"}, HANDOVER)


# ---- on a GPU, with torch tensors mixed in ----

torch = None
if os.environ.get("DLSTREAM_HAZARD_TORCH", "1") == "1":
    try:
        import torch  # noqa: F811
        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None


class TorchPrograms(Programs):
    """The same programs on cuda:0, where some tensors are torch's: torch's own ops on them run on torch's current
    stream, dlstream's calls on random dlstream streams; the model is the same NumPy program."""
    torch_tensors = Bundle("torch_tensors")

    @initialize(nstreams=st.integers(2, 4))
    def start(self, nstreams):
        self.streams = [dlstream.Stream("cuda:0") for _ in range(nstreams)]
        self.handles = [dlstream.Stream.wrap(s.ptr, s.device) for s in self.streams]
        self.latches = {}
        self.live = {}
        self.next_id = 0
        self.axpy = {"cuda:0": dlstream.builtin_function("dls_axpy_f32", "cuda:0")}
        self.graphs = {}

    @rule(target=Programs.tensors, v=st.integers(-3, 3))
    def new_torch(self, v):
        t = torch.full((N,), float(v), dtype=torch.float32, device="cuda")  # on torch's current stream
        k = self.next_id
        self.next_id += 1
        self.live[k] = (t, np.full(N, float(v), np.float32))
        return k

    @rule(k=Programs.tensors, a=st.integers(-2, 2))
    def torch_op(self, k, a):
        if k not in self.live or not isinstance(self.live[k][0], torch.Tensor):
            return
        t, m = self.live[k]
        t.mul_(float(a)).add_(1.0)  # torch's own work on its current stream
        m[:] = m * np.float32(a) + np.float32(1)

    def _stream(self, i, t=None):
        return self.streams[i % len(self.streams)]

    @rule(target=Programs.tensors, k=Programs.tensors)
    def straight(self, k):
        """Not on the GPU: torch's own ops (torch_op) on a torch tensor of dlstream memory are torch's to order."""
        return multiple()

    @rule(target=Programs.tensors, k=Programs.tensors)
    def round_trip(self, k):
        """Through torch on the GPU: torch's current stream is the export's consumer (no host wait), and torch's
        tensor comes back as an alias of the dlstream tensor."""
        if k not in self.live or isinstance(self.live[k][0], torch.Tensor):
            return multiple()
        t, m = self.live[k]
        return self._alias(dlstream.from_dlpack(torch.from_dlpack(t)), m)

    @rule(k=Programs.tensors)
    def close(self, k):
        if k in self.live:
            t = self.live.pop(k)[0]
            if not isinstance(t, torch.Tensor):
                t.close()

    @rule()
    def check(self):
        self._open_all()
        for k, (t, m) in self.live.items():
            got = (t if isinstance(t, torch.Tensor) else torch.from_dlpack(t)).cpu().numpy()
            assert np.array_equal(got, m), f"tensor {k}: dlstream {got[:4]}..., the sequential model {m[:4]}..."

    def teardown(self):
        self.check()
        for g in self.graphs.values():
            if g is not None:
                g[0].close()
        for t, _ in self.live.values():
            if not isinstance(t, torch.Tensor):
                t.close()
        for s in self.streams:
            s.synchronize()
            s.close()
        torch.cuda.synchronize()


TorchPrograms.TestCase.settings = settings(max_examples=max(PROGRAMS // 4, 50), stateful_step_count=25,
                                           deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                                           database=None)


@pytest.mark.skipif(torch is None, reason="needs torch with CUDA (the GPU variant of the model, torch tensors mixed in)")
def test_programs_on_the_gpu_with_torch_tensors():
    # torch's kernels load at their first launch, which waits for an idle device (a held latch never is): warm up.
    x = torch.ones(N, device="cuda")
    x.mul_(2.0).add_(1.0)
    torch.from_dlpack(dlstream.empty(N, "float32", device="cuda:0")).cpu()
    torch.cuda.synchronize()
    TorchPrograms.TestCase("runTest").runTest()
