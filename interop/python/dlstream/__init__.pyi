# SPDX-License-Identifier: Apache-2.0
from ._dlstream import *  # noqa: F401,F403
from ._dlstream import __version__ as __version__
from ._dlstream import Stream, StreamLike, DeviceLike

class use_stream:
    stream: Stream | None
    def __init__(self, stream: StreamLike | None, device: DeviceLike = None) -> None: ...
    def __enter__(self) -> Stream | None: ...
    def __exit__(self, *exc: object) -> None: ...
