# SPDX-License-Identifier: Apache-2.0
"""A stateful property test (hypothesis.stateful): random programs that create, use and close tensors, streams,
events, latches and captures, with hostile arguments - objects whose __bool__, __index__, __float__, __dlpack__ or
__cuda_stream__ close one of those objects, finalizers that close them when the garbage collector runs at random
moments, and calls from a second thread while the first closes what they use. Every call completes or raises a
dlstream error with a message; nothing crashes (CI runs this under AddressSanitizer too), no capture is left open and
nothing leaks once everything is closed.

Run time: the profile named by DLSTREAM_HYPOTHESIS_PROFILE ("ci", the default, a few seconds; "thorough", minutes)."""
import gc
import os
import threading

import numpy as np
import pytest

import dlstream
from conftest import CPU, Closes, settle

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (scripts/deps.sh installs it)")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule  # noqa: E402

settings.register_profile("ci", max_examples=25, stateful_step_count=30, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("thorough", max_examples=400, stateful_step_count=60, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
PROFILE = settings.get_profile(os.environ.get("DLSTREAM_HYPOTHESIS_PROFILE", "ci"))

DTYPES = ["float32", "float64", "int8", "uint8", "int32", "int64", "bool", "float16"]
LATCH_TIMEOUT = 0.2  # a held stream is released by then even if no rule opens its latch
plain_values = (st.integers(min_value=-2**70, max_value=2**70) | st.floats(allow_nan=True, allow_infinity=True) |
                st.sampled_from([None, "a", b"x", (1, 2), [3], object(), True, -1, 0, 2**64, 2**40]))


class Finalizer:
    """Cyclic garbage whose finalizer closes `victim` whenever the collector gets to it."""

    def __init__(self, victim):
        self.victim = victim
        self.me = self

    def __del__(self):
        try:
            self.victim.close()
        except dlstream.Error:
            pass


def clean(fn, *args, **kw):
    """fn() completes or raises a dlstream error with a message; anything else fails the test."""
    try:
        return fn(*args, **kw)
    except dlstream.Error as e:
        assert str(e), f"{type(e).__name__} without a message"
        return None


class Programs(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        dlstream._dlstream._clear_caches()
        settle()
        self.before = dlstream._dlstream._live_handles()
        self.streams, self.tensors, self.events, self.latches, self.graphs = [], [], [], [], []

    # ---- objects ----

    def everything(self):
        return self.streams + self.tensors + self.events + self.latches + self.graphs

    def pick(self, data, pool):
        """One of `pool`. The draw does not depend on the pool's size: which calls succeed depends on when the
        collector runs finalizers, and hypothesis needs the same draws to replay a program."""
        i = data.draw(st.integers(min_value=0, max_value=1023))
        return pool[i % len(pool)] if pool else None

    def argument(self, data):
        """A plain value, an object of the program, or a hostile object closing one of them."""
        kind = data.draw(st.sampled_from(["plain", "object", "hostile"]))
        if kind == "plain" or not self.everything():
            return data.draw(plain_values)
        if kind == "object":
            return self.pick(data, self.everything())
        value = data.draw(st.sampled_from([0, 1, 2, 7, 1.5, -1, 2**40]))
        return Closes(self.pick(data, self.everything()), value, np.ones(4, np.float32))

    @rule(pooled=st.booleans())
    def make_stream(self, pooled):
        self.streams.append((dlstream.Stream.acquire if pooled else dlstream.Stream)(CPU))

    @rule(data=st.data(), n=st.integers(0, 16), dtype=st.sampled_from(DTYPES))
    def make_tensor(self, data, n, dtype):
        stream = self.pick(data, self.streams) if data.draw(st.booleans()) else None
        t = clean(dlstream.empty, n, dtype, device=CPU, stream=stream)  # refused when the stream was closed
        self.tensors.append(t if t is not None else dlstream.empty(n, dtype, device=CPU))

    @rule(data=st.data())
    def make_event(self, data):
        e = dlstream.Event(device=CPU)
        self.events.append(e)
        clean(e.record, self.pick(data, self.streams))

    @rule(data=st.data())
    @precondition(lambda self: self.streams)
    def hold_a_stream(self, data):
        latch = dlstream.Latch(CPU)
        self.latches.append(latch)
        clean(latch.wait, self.pick(data, self.streams), timeout=LATCH_TIMEOUT)

    @rule(data=st.data())
    @precondition(lambda self: self.everything())
    def close_something(self, data):
        obj = self.pick(data, self.everything())
        clean(obj.close)

    @rule(data=st.data())
    @precondition(lambda self: self.everything())
    def plant_a_finalizer(self, data):
        Finalizer(self.pick(data, self.everything()))

    @rule()
    def collect_garbage(self):
        gc.collect()

    # ---- uses ----

    @rule(data=st.data())
    @precondition(lambda self: self.tensors)
    def fill(self, data):
        clean(dlstream.fill, self.pick(data, self.tensors), self.argument(data),
              stream=self.argument(data) if data.draw(st.booleans()) else None)

    @rule(data=st.data())
    @precondition(lambda self: self.tensors)
    def axpy_and_copy(self, data):
        x, y = self.pick(data, self.tensors), self.pick(data, self.tensors)
        clean(dlstream.axpy, self.argument(data), x, y)
        clean(dlstream.copy, y, self.argument(data) if data.draw(st.booleans()) else x)

    @rule(data=st.data(), count=st.integers(1, 16))
    def launch(self, data, count):
        """A built-in through the generic launch, hostile everywhere but in the count and the destination: a raw
        pointer is the caller's word, and the bounds of a count beyond its tensor are the core's to check."""
        f = dlstream.builtin_function("dls_fill", CPU, signature=None if data.draw(st.booleans()) else "p,u64,u32,u64")
        dst = np.zeros(16, np.int32)
        grid, block, pattern = self.argument(data), data.draw(st.sampled_from([1, (1, 1), 2**40])), self.argument(data)
        clean(f.launch, grid, block, dst, count, 4, pattern)

    @rule(data=st.data())
    @precondition(lambda self: self.tensors)
    def read_a_tensor(self, data):
        t = self.pick(data, self.tensors)
        for what in ("shape", "strides", "dtype", "device", "nbytes", "data_ptr", "read_only"):
            clean(getattr, t, what)
        repr(t)
        kw = data.draw(st.sampled_from(["copy", "max_version", "dl_device", "stream", None]))
        arg = {"max_version": (self.argument(data), 0), "dl_device": (1, self.argument(data))}.get(kw)
        cap = clean(t.__dlpack__, **({kw: arg if arg is not None else self.argument(data)} if kw else {}))
        if cap is not None:
            clean(dlstream.from_dlpack, cap)

    @rule(data=st.data())
    @precondition(lambda self: self.streams or self.events)
    def synchronize(self, data):
        obj = self.pick(data, self.streams + self.events)
        clean(obj.synchronize)
        clean(obj.query)

    @rule(data=st.data())
    @precondition(lambda self: self.streams)
    def wait_and_record(self, data):
        s, arg = self.pick(data, self.streams), self.argument(data)
        e, arg2 = self.pick(data, self.events), self.argument(data)
        clean(s.wait, arg)
        recorded = clean(s.record)
        if recorded is not None:
            recorded.close()
        if e is not None:
            clean(e.record, arg2)

    @rule(data=st.data())
    @precondition(lambda self: self.streams)
    def capture(self, data):
        s = self.pick(data, self.streams)
        given, mode = data.draw(st.booleans()), data.draw(st.sampled_from(["global", "relaxed", 5, None]))
        value = self.argument(data) if data.draw(st.booleans()) else None
        leave_a_group_open = data.draw(st.booleans())
        replay_on = self.argument(data) if data.draw(st.booleans()) else None
        t = clean(dlstream.empty, 4, "float32", device=CPU, stream=s)
        cap = clean(dlstream.capture, s if given else None, mode=mode, device=CPU)
        if cap is None or t is None:
            return
        try:
            with cap:
                clean(dlstream.fill, t, 1.0)
                if value is not None:
                    clean(dlstream.fill, t, value)
                if leave_a_group_open:
                    group = clean(dlstream.Group, cap.stream)  # the end is refused and the capture discarded
                    del group
        except dlstream.Error:
            pass
        if cap.graph is not None:
            self.graphs.append(cap.graph)
            clean(cap.replay, replay_on)
        clean(cap.close)
        # Memory a graph uses but did not allocate must outlive its replays (docs/semantics.md, "Eager memory used
        # in a capture"): the replay may still be running on another stream.
        dlstream.synchronize(CPU)
        t.close()

    @rule(data=st.data())
    @precondition(lambda self: self.everything())
    def from_another_thread(self, data):
        """A second thread uses an object while this one closes things."""
        target = self.pick(data, self.streams + self.events + self.tensors)
        if target is None:
            return
        errors = []

        def use():
            try:
                if isinstance(target, dlstream.Tensor):
                    dlstream.fill(target, 1)
                    target.shape
                else:
                    target.synchronize()
            except dlstream.Error:
                pass
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        th = threading.Thread(target=use)
        th.start()
        clean(self.pick(data, self.everything()).close)
        gc.collect()
        th.join(30)
        assert not th.is_alive() and not errors, errors

    @invariant()
    def no_capture_left_open(self):
        for s in self.streams:
            if not s.closed:
                assert dlstream.capture_status(s) == "none"

    def teardown(self):
        for latch in self.latches:
            clean(latch.close)
        for obj in self.everything():
            clean(obj.close)
        self.streams = self.tensors = self.events = self.latches = self.graphs = []
        gc.collect()
        dlstream._dlstream._clear_caches()
        settle()
        assert dlstream._dlstream._live_handles() == self.before
        assert dlstream._dlstream._deferred_pending() == 0


Programs.TestCase.settings = PROFILE
TestPrograms = Programs.TestCase
