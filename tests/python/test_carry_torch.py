# SPDX-License-Identifier: Apache-2.0
"""The torch carrier of blocks (dlstream/_carry.py's _Torch) against a stand-in of the torch functions it calls, so
that its two ways run without a GPU: on torch's current device it sets and restores the current stream through
torch's setter (the (id, device, type) triples); on another device, or a torch without those functions, through
``torch.cuda.stream(...)``. On a GPU, tests/python/test_concurrent_gpu.py runs it with torch itself."""
import types

import pytest

from dlstream import _carry


class FakeTorch:
    """The parts of torch the carrier touches: one current stream per device (as its triple), a current device."""

    def __init__(self, device=0, with_setter=True):
        self.current = {0: (0, 0, 1), 1: (0, 1, 1)}  # the default stream of each device: id 0
        self.device = device
        self.calls = []
        fake = self

        class ExternalStream:
            def __init__(self, ptr, device):
                self.ptr, self.stream_id, self.device_index, self.device_type = ptr, 1000 + ptr, device, 1

        class StreamContext:
            def __init__(self, ext):
                self.ext = ext

            def __enter__(self):
                fake.calls.append("stream.__enter__")
                self.before, self.dev = fake.current[self.ext.device_index], fake.device
                fake.current[self.ext.device_index], fake.device = self._ids(), self.ext.device_index

            def _ids(self):
                return (self.ext.stream_id, self.ext.device_index, self.ext.device_type)

            def __exit__(self, *exc):
                fake.calls.append("stream.__exit__")
                fake.current[self.ext.device_index], fake.device = self.before, self.dev

        def set_stream(stream_id, device_index, device_type):
            fake.calls.append("_cuda_setStream")
            fake.current[device_index] = (stream_id, device_index, device_type)

        c = types.SimpleNamespace(
            _cuda_getCurrentRawStream=lambda i: self.current[i][0] - 1000 if self.current[i][0] else 0,
            _cuda_getDevice=lambda: self.device)
        if with_setter:
            c._cuda_getCurrentStream = lambda i: self.current[i]
            c._cuda_setStream = set_stream
        self._C = c
        self.version = types.SimpleNamespace(hip=None)
        self.cuda = types.SimpleNamespace(is_initialized=lambda: True, ExternalStream=ExternalStream,
                                          stream=StreamContext)


class Block:
    def __init__(self, device, ptr):
        self.device, self.ptr = device, ptr


@pytest.mark.parametrize("device, with_setter, way", [
    (0, True, "_cuda_setStream"),        # the block's device is torch's current device: torch's setter
    (1, True, "stream.__enter__"),       # another device: torch.cuda.stream, which makes it current and restores
    (0, False, "stream.__enter__"),      # a torch without the setter
])
def test_the_torch_carrier_sets_the_blocks_stream_and_restores_the_one_before(device, with_setter, way):
    torch = FakeTorch(device=0, with_setter=with_setter)
    carrier = _carry._Torch()
    before = dict(torch.current), torch.device
    token = carrier.enter(torch, Block(f"cuda:{device}", 7))
    assert torch.calls[0] == way
    assert torch.current[device] == (1007, device, 1) and torch._C._cuda_getCurrentRawStream(device) == 7
    assert token[1] == 0  # the framework's stream before the block: the default stream's pointer
    assert carrier.enter(torch, Block(f"cuda:{device}", 7)) is None  # carried already: nothing to do
    inner = carrier.enter(torch, Block(f"cuda:{device}", 9))  # a nested block of another stream
    assert torch.current[device] == (1009, device, 1) and inner[1] == 7
    carrier.exit(inner)
    assert torch.current[device] == (1007, device, 1)
    carrier.exit(token)
    assert (dict(torch.current), torch.device) == before
    assert carrier.enter(torch, Block("cpu:0", 7)) is None  # not torch's kind of device
