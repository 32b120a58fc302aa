# SPDX-License-Identifier: Apache-2.0
"""The stream providers dlstream registers for frameworks without the DLPack C exchange API: the current stream of
the framework that made a tensor, asked the framework's own way. ``dlstream.register_stream_provider`` adds more
(and replaces these). JAX has no current stream: its ``__dlpack__(stream=)`` handshake orders its arrays."""
from __future__ import annotations

import sys


def cupy_current_stream(array):
    """``cupy.cuda.get_current_stream()`` of the array's device (``with cupy.cuda.Stream():`` sets it)."""
    cuda = sys.modules["cupy"].cuda
    device = array.device
    try:
        return cuda.get_current_stream(device.id).ptr
    except TypeError:  # a CuPy whose get_current_stream takes no device
        with device:
            return cuda.get_current_stream().ptr


def torch_current_stream(tensor):
    """``torch.cuda.current_stream(tensor.device)`` for tensors on a GPU (torch's ROCm builds report HIP streams
    there too); None for the others. Used by torch builds without the DLPack C exchange API."""
    device = tensor.device
    if device.type != "cuda":
        return None
    return sys.modules["torch"].cuda.current_stream(device).cuda_stream


def register_builtin(register):
    register("cupy", cupy_current_stream)
    register("torch", torch_current_stream)
