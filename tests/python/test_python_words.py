# SPDX-License-Identifier: Apache-2.0
"""Messages in the caller's words: the C library's hints name C things (kDLCPU, dls_function_from_host), and a
Python caller gets the Python way to do the same (device="cpu", the built-ins). The library writes every such hint
from one table (plugin/base/hints.h), so none can reach Python untranslated."""
import pathlib
import re

import pytest

import dlstream
from conftest import HAVE_CUDA, run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The C names a hint gives for a device or a way out (a DLPack dtype code's name, in any language, is no hint).
C_WORDS = re.compile(r"\((?:kDLCPU|kDLCUDA|kDLROCM)\)|with dls_function_from_host")


def _message(call):
    with pytest.raises(dlstream.Error) as ei:
        call()
    return str(ei.value)


@pytest.mark.skipif(HAVE_CUDA, reason="this machine has a CUDA device: the CUDA backend is available")
@pytest.mark.parametrize("call", [
    lambda: dlstream.empty(4, device="cuda:0"),
    lambda: dlstream.builtin_function("dls_axpy_f32", "cuda:0"),
    lambda: dlstream.Stream("cuda"),
], ids=["empty", "builtin_function", "Stream"])
def test_cuda_unavailable_says_device_cpu(call):
    msg = _message(call)
    assert "cuda backend unavailable" in msg
    assert 'the CPU backend (device="cpu")' in msg, msg
    assert not C_WORDS.search(msg), msg


@pytest.mark.skipif(HAVE_CUDA, reason="this machine has a CUDA device: the CUDA backend is available")
def test_backend_available_gives_its_reason_in_python_words():
    ok, why = dlstream.backend_available("cuda")
    assert not ok and 'the CPU backend (device="cpu")' in why and not C_WORDS.search(why), why


@pytest.mark.skipif(dlstream.device_count("rocm") > 0, reason="this machine has a ROCm device")
def test_hip_unavailable_says_device_cpu():
    msg = _message(lambda: dlstream.empty(4, device="rocm:0"))
    assert "hip backend unavailable" in msg and 'device="cpu"' in msg, msg
    assert not C_WORDS.search(msg), msg


@pytest.mark.parametrize("call", [
    lambda: dlstream.Module.from_source('extern "C" __global__ void k() {}', device="cpu"),
    lambda: dlstream.Module(b"\x7fELF", device="cpu"),
], ids=["from_source", "Module"])
def test_kernels_on_the_cpu_point_at_what_python_can_do(call):
    msg = _message(call)
    assert "dlstream.builtin_function" in msg and "need a CUDA or ROCm device" in msg, msg
    assert not C_WORDS.search(msg), msg


def test_nvrtc_missing_says_how_to_install_it():
    r = run_python("import dlstream\n"
                   "try:\n"
                   "    dlstream.compile('extern \"C\" __global__ void k() {}', arch='sm_90')\n"
                   "except dlstream.UnavailableError as e:\n"
                   "    print(e)\n",
                   env={"DLSTREAM_NVRTC_LIBRARY": "/nonexistent/libnvrtc.so"})
    assert r.returncode == 0, r.stderr
    assert "pip install nvidia-cuda-nvrtc" in r.stdout and "DLSTREAM_NVRTC_LIBRARY" in r.stdout, r.stdout
    assert not C_WORDS.search(r.stdout), r.stdout


def test_the_library_writes_its_hints_from_the_table():
    """A hint written in C words by hand in a message would reach Python users as it is."""
    found = []
    for path in sorted((ROOT / "plugin").rglob("*.c")) + sorted((ROOT / "interop").rglob("*.c")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r'"(?:[^"\\\n]|\\.)*"', text):
            if C_WORDS.search(m.group(0)):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)}")
    assert not found, "hints in C words outside plugin/base/hints.h:\n" + "\n".join(found)
