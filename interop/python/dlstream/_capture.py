# SPDX-License-Identifier: Apache-2.0
"""capture: record the work queued on a stream once, replay it many times (dls_stream_begin_capture)."""
from __future__ import annotations

from contextvars import Token
from types import TracebackType
from typing import TYPE_CHECKING

from . import _dlstream
from ._dlstream import Error, Graph, StateError, Stream

if TYPE_CHECKING:
    from ._dlstream import _DeviceLike, _StreamLike


class capture:
    """``with dlstream.capture() as g:`` records the dlstream work of the block; ``g.replay()`` runs it again.

    ``stream`` is the stream to capture (a ``Stream``, anything with ``__cuda_stream__`` or an int pointer);
    by default a pooled stream of ``device`` that the capture owns. Inside the block every dlstream call that
    names no ``stream=`` runs on it (as under ``use_stream``). ``mode`` is ``'global'`` (the default, as in
    ``torch.cuda.graph``), ``'thread_local'`` or ``'relaxed'``: which other calls the capture forbids while
    it is underway. If the block raises, the capture is ended and dropped and the exception goes on.

    Work in a capture is recorded, not run: nothing inside the block may wait for it on the host. Memory
    ``dlstream.empty`` allocates inside the block and closes inside it exists only during a replay; memory
    still open at the end is the graph's output, valid after each replay (see docs/semantics.md).

    ``replay()`` is asynchronous: it queues the work and returns. Before reading an output on the host, wait:
    ``g.stream.synchronize()`` (the captured stream, where replays go by default) or ``dlstream.synchronize()``.
    """

    __slots__ = ("_arg", "mode", "device", "stream", "graph", "_owned", "_token")

    def __init__(self, stream: _StreamLike | None = None, mode: str = "global", device: _DeviceLike = None) -> None:
        self._arg = stream
        self.mode = mode
        self.device = device
        self.stream: Stream | None = None
        self.graph: Graph | None = None
        self._owned = False
        self._token: Token[Stream | None] | None = None

    def __enter__(self) -> capture:
        if self.stream is not None or self.graph is not None:
            raise StateError("dlstream.capture: this capture was already used; make a new one")
        if self._arg is None:
            s = Stream.acquire(self.device if self.device is not None else _dlstream.default_device())
            self._owned = True
        else:
            s = Stream.wrap(self._arg, self.device)
        try:
            _dlstream._begin_capture(s, self.mode)
        except BaseException:
            if self._owned:
                s.close()
            raise
        self.stream = s
        self._token = _dlstream._stream_var_set(s)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._token is not None:
            _dlstream._stream_var.reset(self._token)
        self._token = None
        if self.stream is None:
            return
        try:
            graph = _dlstream._end_capture(self.stream)
        except Error:
            if exc_type is None:
                raise
            return  # the block's own exception says more
        if exc_type is not None:
            graph.close()
            return
        self.graph = graph

    def replay(self, stream: _StreamLike | None = None) -> None:
        """Queues one replay on ``stream`` (default: the captured stream). Asynchronous: the host does not wait;
        ``g.stream.synchronize()`` or ``dlstream.synchronize()`` does."""
        if self.graph is None:
            raise StateError("dlstream.capture.replay: the capture has not ended (replay after the with block)")
        self.graph.replay(stream)

    @property
    def replays(self) -> int:
        return 0 if self.graph is None else self.graph.replays

    def close(self) -> None:
        """Destroys the graph once its queued replays have run, and returns an owned stream to the pool."""
        if self.graph is not None:
            self.graph.close()
        if self._owned and self.stream is not None:
            self.stream.close()
            self._owned = False

    def __repr__(self) -> str:
        state = "open" if self.graph is None else f"{self.replays} replays"
        return f"<dlstream.capture on {self.stream!r}: {state}>"
