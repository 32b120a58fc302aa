# SPDX-License-Identifier: Apache-2.0
"""A stand-in `cupy` over _dls_fake_cupy (tests/python/fake_cupy.c), for scripts/callgrind-python and the tests
of dlstream's CuPy path on the null driver. Only on sys.path where a test puts it. DLS_FAKE_CUPY_C_API=1 makes it
a CuPy 14.3 with the public C API capsule `cupy._public_c_api`; otherwise it is a CuPy 14.2, without one."""
import os
import types

import _dls_fake_cupy as _fc

ndarray = _fc.ndarray
__version__ = "14.2.0"
if os.environ.get("DLS_FAKE_CUPY_C_API") == "1":
    __version__ = "14.3.0"
    _public_c_api = _fc.public_c_api

cuda = types.ModuleType("cupy.cuda")
cuda.Stream = _fc.Stream
cuda.ExternalStream = _fc.Stream
cuda.get_current_stream = _fc.get_current_stream
cuda.runtime = types.SimpleNamespace(is_hip=False, getDevice=_fc.get_device)
