# SPDX-License-Identifier: Apache-2.0
"""Several devices: tensors on device 1 with its framework's current stream, mixed-device arguments refused,
export from device 1, stream_parallel on device 1, a stream of device 0 waiting on an event of device 1, copies
between devices, and a two-process torch.distributed (NCCL) run. Each test runs on two CUDA devices when there are
two, and on two CPU devices when the CPU backend offers them (DLSTREAM_CPU_DEVICES=2; the last test runs this file
so); otherwise it is skipped with the reason. Ordering is shown with latches and negative controls."""
import os
import subprocess
import sys

import numpy as np
import pytest

import dlstream
from conftest import torch

TIMEOUT = 20.0
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _count(kind):
    try:
        return dlstream.device_count(kind)
    except dlstream.Error:
        return 0


NCUDA = _count("cuda")
NCPU = _count("cpu")
TORCH2 = torch is not None and NCUDA >= 2 and torch.cuda.is_available() and torch.cuda.device_count() >= 2


@pytest.fixture(params=["cpu", "cuda"])
def kind(request):
    if request.param == "cuda" and NCUDA < 2:
        pytest.skip(f"needs 2 CUDA devices, this machine has {NCUDA}")
    if request.param == "cpu" and NCPU < 2:
        pytest.skip("needs 2 CPU devices: DLSTREAM_CPU_DEVICES=2 with a CPU backend that offers several "
                    "(test_cpu_devices_run_this_file sets it)")
    return request.param


@pytest.fixture(autouse=True, scope="module")
def _torch_kernels_loaded():
    """CUDA lazy loading may make a kernel's first launch wait for the whole device: load torch's first."""
    if TORCH2:
        for d in (0, 1):
            x = torch.ones(8, device=f"cuda:{d}")
            (x * 2).sum().item()
            x.fill_(1.0)
        torch.cuda.synchronize()


def held(stream, device):
    latch = dlstream.Latch(device)
    latch.wait(stream, timeout=TIMEOUT)
    return latch


def release(latch, *streams):
    latch.open()
    for s in streams:
        s.synchronize()
    latch.check()
    latch.close()


def host(t):
    """A dlstream tensor's values (the export makes the host wait for its work)."""
    if t.device.startswith("cpu"):
        return np.from_dlpack(t).copy()
    out = np.zeros(t.shape, np.float32)
    dlstream.copy(out, t, stream=dlstream.Stream.legacy(t.device))
    return out


def test_own_tensor_on_device_1_runs_on_its_stream(kind, no_leaks):
    d1 = f"{kind}:1"
    s = dlstream.Stream(d1)
    t = dlstream.empty(64, "float32", device=d1, stream=s)
    dlstream.fill(t, 1.0)
    s.synchronize()
    latch = held(s, d1)
    dlstream.fill(t, 2.0)  # no stream=: t's allocation stream on device 1
    dlstream.Stream.legacy(d1).synchronize()
    assert not s.query(), "the fill waits behind the latch on s"
    release(latch, s)
    assert (host(t) == 2).all()
    latch = held(s, d1)
    dlstream.fill(t, 3.0, stream=dlstream.Stream.legacy(d1))  # negative control: another stream
    dlstream.Stream.legacy(d1).synchronize()
    release(latch, s)
    assert (host(t) == 3).all()
    t.close()
    s.close()


def test_framework_stream_of_device_1(kind, fx, no_leaks):
    """cpu: the fake exchange-API framework says its current stream of cpu:1 is s; cuda: torch's current
    stream of cuda:1 under torch.cuda.stream(side)."""
    d1 = f"{kind}:1"
    axpy = dlstream.builtin_function("dls_axpy_f32", d1)
    if kind == "cpu":
        s = dlstream.Stream(d1)
        x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
        fxx = fx.FakeTensor(x, x.ctypes.data, x.shape, 2, 32, dlstream.kDLCPU, 1)
        fyy = fx.FakeTensor(y, y.ctypes.data, y.shape, 2, 32, dlstream.kDLCPU, 1)
        for framework_says_s in (True, False):
            y[:] = 0
            fx.set_current_stream(s.ptr if framework_says_s else 0)
            latch = held(s, d1)
            axpy.launch(1, 64, 64, 2.0, fxx, fyy)
            dlstream.Stream.legacy(d1).synchronize()
            assert bool((y == 0).all()) == framework_says_s, "negative control: the legacy stream does not wait"
            release(latch, s, dlstream.Stream.legacy(d1))
            assert (y == 2).all()
        fx.set_current_stream(0)
        s.close()
        dlstream._dlstream._clear_caches()
        return
    if not TORCH2:
        pytest.skip("needs torch with 2 CUDA devices")
    x = torch.ones(1024, device="cuda:1")
    y = torch.zeros(1024, device="cuda:1")
    with torch.cuda.device(1):
        side = torch.cuda.Stream()
    torch.cuda.synchronize(1)
    latch = held(dlstream.Stream.wrap(side), d1)
    with torch.cuda.device(1), torch.cuda.stream(side):
        axpy.launch(4, 256, 1024, 2.0, x, y)
    torch.cuda.current_stream(1).synchronize()
    assert not side.query(), "the launch sits on torch's current stream of cuda:1, behind the latch"
    latch.open()
    side.synchronize()
    assert torch.equal(y, torch.full_like(y, 2.0))
    latch.check()
    latch.close()
    dlstream._dlstream._clear_caches()


def test_mixed_device_arguments_are_refused(kind, no_leaks):
    x = dlstream.empty(8, "float32", device=f"{kind}:0")
    y = dlstream.empty(8, "float32", device=f"{kind}:1")
    with pytest.raises(dlstream.InvalidDeviceError, match=f"{kind}:0|{kind}:1") as ei:
        dlstream.axpy(1.0, x, y)
    assert "axpy" in str(ei.value)
    if kind == "cuda" and TORCH2:
        tx = torch.ones(8, device="cuda:0")
        ty = torch.zeros(8, device="cuda:1")
        with pytest.raises(dlstream.InvalidDeviceError, match="cuda:0.*cuda:1|cuda:1.*cuda:0"):
            dlstream.axpy(1.0, tx, ty)
        assert ty.sum().item() == 0
    x.close()
    y.close()


def test_export_from_device_1(kind, no_leaks):
    d1 = f"{kind}:1"
    s = dlstream.Stream(d1)
    t = dlstream.empty(16, "float32", device=d1, stream=s)
    latch = held(s, d1)
    dlstream.fill(t, 5.0)
    assert t.__dlpack_device__()[1] == 1
    if kind == "cuda" and TORCH2:
        with torch.cuda.device(1):
            c = torch.cuda.Stream()
            with torch.cuda.stream(c):
                u = torch.from_dlpack(t)  # c waits for s
                v = u * 2
        assert u.device.index == 1
        assert not c.query(), "torch's stream of cuda:1 waits for ours"
        release(latch, s)
        c.synchronize()
        assert torch.equal(v, torch.full_like(v, 10.0))
        del u, v
    else:
        release(latch, s)
        assert (host(t) == 5).all()
    t.close()
    s.close()


def test_stream_parallel_on_device_1(kind, no_leaks):
    d1 = f"{kind}:1"
    origin = dlstream.Stream(d1)
    x = dlstream.empty(64, "float32", device=d1, stream=origin)
    y = dlstream.empty(64, "float32", device=d1, stream=origin)
    z = dlstream.empty(64, "float32", device=d1, stream=origin)
    dlstream.fill(x, 1.0)
    dlstream.fill(y, 0.0)
    dlstream.fill(z, 0.0)
    with dlstream.stream_parallel(origin):
        with dlstream.branch() as b1:
            assert b1.device == d1
            dlstream.axpy(2.0, x, y)
        with dlstream.branch():
            dlstream.axpy(3.0, x, z)
    origin.synchronize()
    assert (host(y) == 2).all() and (host(z) == 3).all()
    for t in (x, y, z):
        t.close()
    origin.close()


def test_stream_of_device_0_waits_on_an_event_of_device_1(kind, no_leaks):
    d0, d1 = f"{kind}:0", f"{kind}:1"
    s1 = dlstream.Stream(d1)
    waiter, control = dlstream.Stream(d0), dlstream.Stream(d0)
    latch = held(s1, d1)
    e = s1.record()  # recorded behind the latch
    waiter.wait(e)
    dlstream.spin(0, stream=waiter)
    dlstream.spin(0, stream=control)
    control.synchronize()  # negative control: a stream of device 0 that does not wait runs at once
    assert not waiter.query(), "the stream of device 0 waits for the event of device 1"
    release(latch, s1, waiter)
    for o in (e, waiter, control, s1):
        o.close()


def test_copy_between_devices(kind, no_leaks):
    """dlstream.copy(dst on device 1, src on device 0): ordered after src's producer on device 0, and src's
    memory is not reused on device 0 before the copy has read it."""
    d0, d1 = f"{kind}:0", f"{kind}:1"
    s0 = dlstream.Stream(d0)
    src = dlstream.empty(1 << 16, "float32", device=d0, stream=s0)
    dst = dlstream.empty(1 << 16, "float32", device=d1)
    dlstream.fill(dst, 0.0)
    latch = held(s0, d0)
    dlstream.fill(src, 7.0)  # on s0, behind the latch
    dlstream.copy(dst, src)  # on dst's stream of device 1: waits for s0
    src.close()  # freed in stream order: device 0 waits for the copy
    u = dlstream.empty(1 << 16, "float32", device=d0, stream=s0)
    dlstream.fill(u, 9.0)  # would overwrite src's memory if it were reused early
    release(latch, s0, dlstream.Stream.legacy(d1))
    assert (host(dst) == 7).all()
    u.close()
    s0.close()
    dst.close()
    if kind == "cuda" and TORCH2:
        a = torch.arange(1024, dtype=torch.float32, device="cuda:0")
        b = torch.zeros(1024, device="cuda:1")
        dlstream.copy(b, a)  # on torch's current stream of cuda:1
        torch.cuda.synchronize(1)
        assert torch.equal(b.cpu(), a.cpu())
    if kind == "cpu":
        # a NumPy array of device 1's memory (host memory: its producer is asked with stream=None, not for a
        # stream value CPU devices do not have), copied to device 0 and ordered after device 1's fill
        t1 = dlstream.empty(64, "float32", device=d1)
        dlstream.fill(t1, 5.0)
        t0 = dlstream.empty(64, "float32", device=d0)
        dlstream.copy(t0, np.from_dlpack(t1))
        assert (host(t0) == 5).all()
        t0.close()
        t1.close()
    with pytest.raises(dlstream.InvalidArgumentError, match="contiguous|one shape"):
        x = dlstream.empty((4, 4), "float32", device=d0)
        y = dlstream.empty((4, 5), "float32", device=d1)
        try:
            dlstream.copy(y, x)
        finally:
            x.close()
            y.close()


@pytest.mark.parametrize("rule_on", [True, False])
def test_copy_between_devices_waits_for_dsts_earlier_write(kind, rule_on, no_leaks):
    """dst (device 1) is filled with 3 on s1b (held), then dlstream.copy(dst, src from device 0) runs on s1a: the copy
    must wait for the fill (write after write), so dst ends with src's -2. The negative control turns the hazard
    rule off (dlstream._dlstream._test_hazards): the copy then lands first and the fill's 3 remains. The model-based
    test (test_hazard_model.py, two CPU devices) found this one."""
    d0, d1 = f"{kind}:0", f"{kind}:1"
    s1a, s1b = dlstream.Stream(d1), dlstream.Stream(d1)
    src = dlstream.empty(1024, "float32", device=d0)
    dst = dlstream.empty(1024, "float32", device=d1, stream=s1a)
    dlstream.fill(src, -2.0)
    dlstream.fill(dst, 0.0)
    dlstream.synchronize()
    was = dlstream._dlstream._test_hazards(rule_on)
    try:
        latch = held(s1b, d1)
        dlstream.fill(dst, 3.0, stream=s1b)   # behind the latch
        dlstream.copy(dst, src, stream=s1a)
        if rule_on:
            assert s1a.query() is False, "the copy on s1a waits for the fill on s1b"
        else:
            s1a.synchronize()                 # nothing holds s1a: the copy lands first
        release(latch, s1b, s1a)
    finally:
        dlstream._dlstream._test_hazards(was)
    assert (host(dst) == (-2.0 if rule_on else 3.0)).all()
    for o in (src, dst, s1a, s1b):
        o.close()


@pytest.mark.skipif(not TORCH2, reason="needs torch with 2 CUDA devices and NCCL")
def test_distributed_example():
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", "distributed.py")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all_reduce results match" in r.stdout


@pytest.mark.skipif(os.environ.get("DLSTREAM_CPU_DEVICES") is not None, reason="already running with CPU devices")
def test_cpu_devices_run_this_file():
    """The tests above on two CPU devices, in a fresh interpreter (the CPU backend reads DLSTREAM_CPU_DEVICES
    once)."""
    env = dict(os.environ, DLSTREAM_CPU_DEVICES="2", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cpu",
                        os.path.abspath(__file__)], capture_output=True, text=True, timeout=300, env=env, cwd=HERE)
    assert r.returncode in (0, 5), r.stdout[-4000:] + r.stderr[-2000:]
    if " passed" not in r.stdout:
        pytest.skip("this build's CPU backend has one device: " + r.stdout.strip().splitlines()[-1])
