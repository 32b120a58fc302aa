# SPDX-License-Identifier: Apache-2.0
"""stream_parallel: fork/join groups of concurrent branches on pooled streams, with no host sync."""
from __future__ import annotations

import contextvars
import sys
from typing import TYPE_CHECKING

from . import _carry, _dlstream
from ._dlstream import Group, StateError, Stream

if TYPE_CHECKING:
    from ._dlstream import _DeviceLike, _StreamLike

_group_var: contextvars.ContextVar[stream_parallel | None] = contextvars.ContextVar("dlstream.stream_parallel",
                                                                                    default=None)
_branch_var: contextvars.ContextVar[stream_parallel | None] = contextvars.ContextVar("dlstream.branch", default=None)
_stream_var = _dlstream._stream_var
_group_set = _group_var.set  # bound once: read by every group
_group_reset = _group_var.reset


def _framework_current_stream(device: _DeviceLike) -> Stream | None:
    """The current stream of a framework already imported (torch, then CuPy), as a Stream, or None."""
    torch = sys.modules.get("torch")
    if torch is not None and (device is None or str(device).startswith("cuda")):
        try:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                return Stream.wrap(torch.cuda.current_stream())
        except Exception:  # noqa: BLE001 - a broken framework must not hide the fallback
            pass
    cupy = sys.modules.get("cupy")
    if cupy is not None and (device is None or str(device).startswith("cuda")):
        try:
            return Stream.wrap(cupy.cuda.get_current_stream())
        except Exception:  # noqa: BLE001
            pass
    return None


def _launch_stream(device: _DeviceLike) -> Stream:
    """The stream a launch with no stream= and no tensor argument would pick: use_stream, then a framework's
    current stream, then the legacy default stream."""
    cur = _stream_var.get(None)
    if cur is not None:
        return cur
    modules = sys.modules
    if "torch" in modules or "cupy" in modules:
        s = _framework_current_stream(device)
        if s is not None:
            return s
    return Stream.legacy(device)  # None: the default device


# ``with g.branch() as s:`` — launches in the block default to the branch stream ``s``, and so do the ops of the
# frameworks the program imported (torch's and CuPy's current stream is ``s`` in the block: ``_carry``). The block is
# C (interop/python/branch.c): an empty branch is mostly its block's cost. It reads the group of ``block._group``
# (None: ended or not begun), its origin of ``block.origin``, and what the hooks below hand it.
_Branch = _dlstream._Branch
_dlstream._set_branch_hooks(_group_var, _branch_var)


class stream_parallel:
    """``with dlstream.stream_parallel(origin=None):`` forks from ``origin`` and joins back into it.

    Each ``with dlstream.branch():`` (or ``with g.branch():``) inside runs its launches on a new pooled stream
    that starts after the work queued on ``origin`` before the block; at the end of the block ``origin``'s later
    work waits for every branch. The host never waits (``origin.synchronize()`` or ``dlstream.synchronize()``
    does, before results are read on the host). ``origin`` defaults to the stream a launch would pick
    here (``use_stream``, else torch's or CuPy's current stream, else the legacy default stream), so the block
    works inside ``with torch.cuda.stream(s):``. Groups nest: a ``stream_parallel`` inside a branch forks from
    that branch and must end first (it does, being inside)."""

    __slots__ = ("origin", "_device", "_group", "_token", "_ended")

    def __init__(self, origin: _StreamLike | None = None, device: _DeviceLike = None) -> None:
        self.origin: Stream | None = None if origin is None else Stream.wrap(origin, device)
        self._device = device
        self._group: Group | None = None
        self._token: contextvars.Token[stream_parallel | None] | None = None
        self._ended: int | None = None  # the branches it had, once ended

    def __repr__(self) -> str:
        head = f"dlstream.stream_parallel(origin={self.origin!r}, device={self._device!r})"
        if self._group is None and self._ended is None:
            return f"{head}: not begun"
        n = self._group.branches if self._group is not None else self._ended
        return f"{head}: {'open' if self._group is not None else 'ended'}, {n} branch{'' if n == 1 else 'es'}"

    def __enter__(self) -> stream_parallel:
        if self._group is not None:
            raise StateError("stream_parallel: this block is already open (make a new stream_parallel per block)")
        origin = self.origin
        if origin is None:
            origin = _launch_stream(self._device)
        self._group = Group(origin)
        self.origin = origin
        self._token = _group_set(self)
        return self

    def branch(self, stream: _StreamLike | None = None) -> _Branch:
        """A context for one branch of this group; ``with g.branch() as s:`` gives its Stream: a pooled one, or the
        caller's ``stream`` (it starts after the fork point and the origin waits for it at the end of the group;
        it stays the caller's)."""
        return _Branch(self, stream)

    @property
    def branches(self) -> int:
        return self._group.branches if self._group is not None else 0

    def __exit__(self, *exc: object) -> None:
        token, self._token = self._token, None
        if token is not None:
            _group_reset(token)
        group, self._group = self._group, None
        if group is not None:
            self._ended = group.branches
            group.end()  # joins even when the block raised: the origin never runs ahead of its branches


# ``with dlstream.branch():`` — a new branch of the innermost open ``stream_parallel`` block, on a pooled stream or on
# the caller's ``stream`` (C: it reads the group variable above, as _Branch does).
branch = _dlstream.branch
