# SPDX-License-Identifier: Apache-2.0
# Type stubs of the package dlstream: the extension's public names, use_stream, and the pure-Python helpers
# (capture, stream_parallel, branch), whose own annotations are their types.
from ._dlstream import (
    DLPACK_STREAM_NO_SYNC as DLPACK_STREAM_NO_SYNC,
    ArgumentTypeError as ArgumentTypeError,
    BackendError as BackendError,
    BusyError as BusyError,
    _DeviceLike,
    Error as Error,
    Event as Event,
    ForkError as ForkError,
    Function as Function,
    Graph as Graph,
    Group as Group,
    InternalError as InternalError,
    InvalidArgumentError as InvalidArgumentError,
    InvalidDeviceError as InvalidDeviceError,
    InvalidHandleError as InvalidHandleError,
    InvalidTensorError as InvalidTensorError,
    Latch as Latch,
    Module as Module,
    NotFoundError as NotFoundError,
    NotSupportedError as NotSupportedError,
    OutOfMemoryError as OutOfMemoryError,
    OutOfRangeError as OutOfRangeError,
    ReadOnlyError as ReadOnlyError,
    StateError as StateError,
    Stream as Stream,
    _StreamLike,
    Tensor as Tensor,
    TimedOutError as TimedOutError,
    UnavailableError as UnavailableError,
    VersionError as VersionError,
    __version__ as __version__,
    axpy as axpy,
    backend_available as backend_available,
    builtin_function as builtin_function,
    capture as capture,
    capture_status as capture_status,
    compile as compile,
    compiler_version as compiler_version,
    copy as copy,
    current_stream as current_stream,
    default_device as default_device,
    device_count as device_count,
    empty as empty,
    empty_cache as empty_cache,
    fill as fill,
    from_dlpack as from_dlpack,
    from_ipc as from_ipc,
    kDLCPU as kDLCPU,
    kDLCUDA as kDLCUDA,
    kDLCUDAHost as kDLCUDAHost,
    kDLROCM as kDLROCM,
    register_stream_provider as register_stream_provider,
    spin as spin,
    synchronize as synchronize,
)
from ._parallel import branch as branch, stream_parallel as stream_parallel

__all__ = [
    "ArgumentTypeError", "BackendError", "BusyError", "Error", "Event", "ForkError", "Function", "InternalError",
    "InvalidArgumentError", "InvalidDeviceError", "InvalidHandleError", "InvalidTensorError", "Latch", "Module",
    "NotFoundError", "NotSupportedError", "OutOfMemoryError", "OutOfRangeError", "ReadOnlyError", "StateError", "Stream", "Tensor",
    "TimedOutError", "UnavailableError", "VersionError", "__version__", "axpy", "backend_available",
    "builtin_function", "copy", "current_stream", "default_device", "device_count", "empty", "empty_cache", "fill",
    "from_dlpack", "from_ipc", "spin", "synchronize", "use_stream", "stream_parallel", "branch", "Group", "capture",
    "capture_status", "Graph",
    "kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLROCM", "DLPACK_STREAM_NO_SYNC", "compile", "compiler_version",
    "register_stream_provider",
]

class use_stream:
    stream: Stream | None
    def __init__(self, stream: _StreamLike | None, device: _DeviceLike = None) -> None: ...
    def __enter__(self) -> Stream | None: ...
    def __exit__(self, *exc: object) -> None: ...
