# SPDX-License-Identifier: Apache-2.0
"""dlstream: GPU streams, events, tensors and kernel launches shared with PyTorch, CuPy, NumPy and JAX
through DLPack, ordered like the frameworks' own work: no hidden host sync, no use-after-free across streams.

Which stream a call runs on, first that applies: its ``stream=`` argument; the stream of the innermost
``with dlstream.use_stream(s):``; what the first tensor argument says: a ``dlstream.Tensor`` its allocation
stream, another framework's tensor that framework's current stream (the DLPack C exchange API, e.g.
``torch.cuda.current_stream()``; a stream provider, e.g. ``cupy.cuda.get_current_stream()``; a version-3
``__cuda_array_interface__``'s ``stream``); the legacy default stream (inside a ``torch.cuda.graph`` capture:
torch's capturing stream, so the call is recorded with torch's work). The stream decides where work runs, never
whether it is correct: every use of memory dlstream knows is ordered after the uses it must follow, on any stream.

Calls that queue work (``fill``, ``axpy``, ``copy``, ``spin``, ``Function.launch``, ``Graph.replay`` ...) are
asynchronous: they return before the work runs. Work queued later on the same stream (a framework's too) runs
after it; the host must wait before reading results: ``dlstream.synchronize()`` (every stream dlstream holds, on
every device), ``Stream.synchronize()`` or ``Event.synchronize()``. NumPy arrays on the CPU backend included::

    x = numpy.ones(4, numpy.float32); y = numpy.zeros_like(x)
    dlstream.axpy(2.0, x, y)   # queued on the CPU device's legacy default stream
    dlstream.synchronize()     # now y is [2, 2, 2, 2]
"""
import atexit as _atexit

from . import _dlstream
from ._dlstream import (
    DLPACK_STREAM_NO_SYNC,
    ArgumentTypeError,
    BackendError,
    BusyError,
    Error,
    Event,
    ForkError,
    Function,
    InternalError,
    InvalidArgumentError,
    InvalidDeviceError,
    InvalidHandleError,
    InvalidTensorError,
    Latch,
    Module,
    NotFoundError,
    NotSupportedError,
    OutOfMemoryError,
    OutOfRangeError,
    ReadOnlyError,
    StateError,
    Stream,
    Tensor,
    TimedOutError,
    UnavailableError,
    VersionError,
    __version__,
    axpy,
    backend_available,
    builtin_function,
    capture,
    capture_status,
    copy,
    current_stream,
    default_device,
    device_count,
    empty,
    empty_cache,
    fill,
    from_dlpack,
    from_ipc,
    kDLCPU,
    kDLCUDA,
    kDLCUDAHost,
    kDLROCM,
    register_stream_provider,
    spin,
    synchronize,
)
from . import _carry
from ._parallel import branch, stream_parallel
Graph = _dlstream.Graph
Group = _dlstream.Group


# Kernels from source (NVRTC / hipRTC); Module.from_source is a class method of Module.
from ._dlstream import compile, compiler_version  # noqa: E402,A004 - dlstream.compile, as cupy/cuda.core name it

_stream_var = _dlstream._stream_var


class use_stream:
    """``with dlstream.use_stream(s):`` makes ``s`` the stream of every dlstream call in the block that names no
    ``stream=`` (a ``contextvars`` variable: per thread and per asyncio task). ``s`` is a ``Stream``, anything
    with ``__cuda_stream__`` (torch, CuPy, cuda.core) or an int pointer; ``None`` lifts an outer choice.
    Blocks nest; the innermost wins. The block carries the frameworks the program imported: inside it, torch's and
    CuPy's current stream is ``s`` too (restored on exit), so their ops run there, in order with dlstream's calls;
    ``s`` first waits for the framework's stream, which waits for ``s`` at the end of the block.
    ``dlstream.stream_parallel`` builds its branches on this."""

    __slots__ = ("stream", "_token", "_carried")

    def __init__(self, stream: object, device: object = None) -> None:
        # A Stream is used as is (current_stream() is it); anything else is wrapped.
        self.stream = stream if stream is None or isinstance(stream, Stream) else Stream.wrap(stream, device)
        self._token = None
        self._carried = None

    def __enter__(self) -> Stream | None:
        self._token = _dlstream._stream_var_set(self.stream)
        if self.stream is not None:
            try:
                self._carried = _carry.enter(self.stream, None)
            except BaseException:
                _stream_var.reset(self._token)
                self._token = None
                raise
        return self.stream

    def __exit__(self, *exc: object) -> None:
        carried, self._carried = self._carried, None
        try:
            _carry.exit(carried, self.stream, None)
        finally:
            _stream_var.reset(self._token)
            self._token = None
            _dlstream._block_release(self.stream)  # the block's calls' tensors, once the stream passes them


# CuPy's and torch's current streams, for their tensors without the DLPack C exchange API (registered by module
# name: neither is imported here).
from ._providers import cupy_current_stream as _cupy_current_stream  # noqa: E402
from ._providers import register_builtin as _register_builtin_providers  # noqa: E402

_register_builtin_providers(register_stream_provider)
# While this is the provider registered for CuPy's arrays, the extension reads them and CuPy's current stream in C
# (the same answer, without the provider's Python call or the arrays' __cuda_array_interface__).
_dlstream._set_cupy_provider(_cupy_current_stream)

# Deferred releases drop references to Python objects: run them while the interpreter is whole, then tear the
# runtime down so nothing touches Python after finalization.
_atexit.register(_dlstream._shutdown)

# The helpers above are done with: only the public names (and the submodules) stay in the namespace, and they
# are the package's API (the stubs' __all__ lists them too; tests/docs/stubs.sh checks that both agree).
del _atexit, _cupy_current_stream, _register_builtin_providers
__all__ = sorted(name for name in globals() if not name.startswith("_")) + ["__version__"]
