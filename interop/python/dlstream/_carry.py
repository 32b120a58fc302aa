# SPDX-License-Identifier: Apache-2.0
"""Blocks carry the frameworks with them: inside ``use_stream(s)`` and ``stream_parallel`` branches, the current
stream of each framework in play (torch, CuPy: only those the user imported, found in ``sys.modules``; never
imported here) is the block's stream, restored on exit. The framework's own ops in the block then run on the block's
stream, in order with dlstream's work there. The framework's stream is ordered once at the block's edges, not around
every call: on entry the block's stream waits for it (a fork), on exit it waits for the block's stream (a join). A
branch's fork and join are its group's (the origin) unless the framework's current stream is another one. A block
whose stream is in a capture the framework's stream is not in (a branch inside ``dlstream.capture``, torch's stream
eager) still carries it, but ties nothing at its edges: a capture is never tied to eager work (the graph's replay is
ordered where it is replayed)."""
from __future__ import annotations

from typing import Any

from . import _dlstream
from ._dlstream import StateError, Stream, capture_status


def _index(device: str, kind: str) -> int | None:
    """The index of ``device`` ('cuda:1') when it is of ``kind``, else None."""
    name, _, index = device.partition(":")
    return int(index or 0) if name == kind else None


class _Torch:
    """torch: its current stream of a device becomes an ExternalStream of the block's stream, restored on exit.

    Where the block's device is torch's current device, the stream is set and restored through torch's own setter
    (``torch._C._cuda_setStream`` with the (id, device, type) triple of a cached ExternalStream, and the triple of
    the stream before, from ``torch._C._cuda_getCurrentStream``): what ``torch.cuda.stream(...)`` does there, without
    the Python around it (its device lookups and Stream objects cost more than the rest of an empty branch). On
    another device, or a torch without those functions, ``torch.cuda.stream(...)`` itself (which also makes the
    stream's device current, and restores both)."""

    module = "torch"

    def __init__(self) -> None:
        self._external: dict[tuple[int, int], Any] = {}
        self._ids: dict[tuple[int, int], tuple[int, int, int]] = {}

    def enter(self, torch: Any, stream: Stream) -> tuple[Any, int] | None:
        cuda = torch.cuda
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        index = _index(stream.device, kind)
        if index is None or not cuda.is_initialized():
            return None  # not its device, or torch never used CUDA: it has no current stream to carry
        c = torch._C
        raw = getattr(c, "_cuda_getCurrentRawStream", None)  # the pointer, without a torch Stream object
        prev = raw(index) if raw is not None else cuda.current_stream(index).cuda_stream
        if prev == stream.ptr:
            return None  # carried already (a block inside a block of the same stream)
        key = (index, stream.ptr)
        ext = self._external.get(key)
        if ext is None:
            ext = self._external[key] = cuda.ExternalStream(stream.ptr, device=index)
        get, put = getattr(c, "_cuda_getCurrentStream", None), getattr(c, "_cuda_setStream", None)
        if get is not None and put is not None and raw is not None and c._cuda_getDevice() == index:
            ids = self._ids.get(key)
            if ids is None:
                ids = self._ids[key] = (ext.stream_id, ext.device_index, ext.device_type)
            before = get(index)  # (stream id, device index, device type)
            put(*ids)
            return (put, before), prev
        ctx = cuda.stream(ext)
        ctx.__enter__()
        return ctx, prev

    def exit(self, token: tuple[Any, int]) -> None:
        if isinstance(token[0], tuple):  # (torch's setter, the stream before)
            put, before = token[0]
            put(*before)
        else:
            token[0].__exit__(None, None, None)


class _CuPy:
    """CuPy: its current stream of the current device becomes an ExternalStream of the block's stream (a ``with``
    of it: CuPy's stack of current streams restores the one before)."""

    module = "cupy"

    def __init__(self) -> None:
        self._external: dict[tuple[int, int], Any] = {}

    def enter(self, cupy: Any, stream: Stream) -> tuple[Any, int] | None:
        cuda = cupy.cuda
        kind = "rocm" if getattr(cuda.runtime, "is_hip", False) else "cuda"
        index = _index(stream.device, kind)
        if index is None or cuda.runtime.getDevice() != index:
            return None  # CuPy's work runs on its current device: a block on another one does not carry it
        prev = cuda.get_current_stream(index)
        if prev.ptr == stream.ptr:
            return None  # carried already
        key = (index, stream.ptr)
        ext = self._external.get(key)
        if ext is None:
            ext = self._external[key] = cuda.ExternalStream(stream.ptr, index)
        ext.__enter__()
        return ext, prev.ptr

    def exit(self, token: tuple[Any, int]) -> None:
        token[0].__exit__(None, None, None)


def _tie(waiter: Stream | int, target: Stream | int, device: str) -> None:
    """``waiter`` waits for ``target`` (an int: a pointer of a stream of ``device``), unless one of them is in a
    capture the other is not in: the core refuses that wait, queueing nothing (StateError), and nothing is tied."""
    try:
        (Stream.wrap(waiter, device) if isinstance(waiter, int) else waiter).wait(target)
    except StateError:
        status = [capture_status(Stream.wrap(s, device) if isinstance(s, int) else s) for s in (waiter, target)]
        if status == ["none", "none"]:
            raise


# The frameworks a block may carry, each taken only when its module is in sys.modules. Tests add stand-ins.
_CARRIERS: list[Any] = [_Torch(), _CuPy()]


# enter(stream, origin) makes ``stream`` the current stream of every framework in play; ``stream`` first waits for
# each one's current stream unless that is ``origin`` (a branch's group forked from it) or ``stream`` itself; it
# returns what exit(carried, stream, origin) restores (None: nothing). exit restores last first; each framework's
# stream then waits for ``stream`` unless it is ``origin`` (the group's end joins it) or ``stream`` itself; the first
# failure is raised once all are restored. Both are C (interop/python/carry.c): they loop over _CARRIERS, calling
# a carrier only when its module is in sys.modules, and call _tie where a framework's stream is tied.
_dlstream._set_carry(_CARRIERS, _tie)
enter = _dlstream._carry_enter
exit = _dlstream._carry_exit  # noqa: A001 - the module's enter/exit pair
