# SPDX-License-Identifier: Apache-2.0
"""Kernels from source: dlstream.compile without a GPU (NVRTC), the kernel cache across processes (hits, damaged
files, concurrent writers, the off switch), errors (the compiler's log, a missing NVRTC, unknown kernel names), and
Module.from_source on torch tensors and CuPy arrays on a GPU."""
import concurrent.futures
import hashlib
import json
import struct

import numpy as np
import pytest

import dlstream
from conftest import HAVE_CUDA, cupy, needs_cuda, needs_cupy_cuda, needs_torch_cuda, run_python, torch

try:
    NVRTC = dlstream.compiler_version("cuda")
    NVRTC_WHY = ""
except dlstream.UnavailableError as e:
    NVRTC, NVRTC_WHY = None, str(e)
needs_nvrtc = pytest.mark.skipif(NVRTC is None, reason=f"no NVRTC here: {NVRTC_WHY}")

SOURCE = r"""
extern "C" __global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template <typename T> __global__ void scale(T *p, T s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= s;
}
"""

# A child process that compiles SOURCE and prints the cache counters as JSON.
CHILD = f"""
import json, dlstream
img = dlstream.compile({SOURCE!r}, "sm_80")
assert img[:4] == b"\\x7fELF", img[:4]
print(json.dumps(dlstream._dlstream._compile_stats()))
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets an empty cache folder and an empty in-process cache."""
    d = tmp_path / "kernels"
    monkeypatch.setenv("DLSTREAM_CACHE_DIR", str(d))
    monkeypatch.delenv("DLSTREAM_CACHE", raising=False)
    dlstream._dlstream._compile_cache_clear()
    yield d
    dlstream._dlstream._compile_cache_clear()


def child(cache_dir, **env):
    r = run_python(CHILD, env={"DLSTREAM_CACHE_DIR": str(cache_dir), **env})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def cache_files(d):
    return sorted(p for p in d.iterdir()) if d.exists() else []


# ---- compiling without a GPU ----

@needs_nvrtc
def test_compile_gives_a_cubin_or_ptx():
    cubin = dlstream.compile(SOURCE, "sm_90")
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"
    assert dlstream.compile(SOURCE) == cubin, "sm_90 is the default arch"
    ptx = dlstream.compile(SOURCE, arch="compute_80")
    text = ptx.decode()
    assert ".entry axpy" in text and ".target sm_80" in text and not text.endswith("\0")


@needs_nvrtc
def test_compile_error_carries_the_log_with_file_and_line():
    src = "__global__ void k(int *p) {\n  *p = undefined_thing;\n}\n"
    with pytest.raises(dlstream.InvalidArgumentError) as ei:
        dlstream.compile(src, "sm_80", program_name="mine.cu")
    msg = str(ei.value)
    assert msg.startswith("compile: dls_compile(arch=\"sm_80\"): NVRTC")
    assert 'mine.cu(2): error: identifier "undefined_thing" is undefined' in msg
    assert "mine.cu(2)" in ei.value.log and isinstance(ei.value, ValueError)
    with pytest.raises(dlstream.InvalidArgumentError, match="NVRTC_ERROR_INVALID_OPTION"):
        dlstream.compile(SOURCE, "sm_80", options=["--not-an-option"])


@needs_nvrtc
def test_name_expressions_give_lowered_names():
    img, names = dlstream.compile(SOURCE, "sm_80", name_expressions=("scale<float>", "scale<double>"))
    assert img[:4] == b"\x7fELF"
    assert names == {"scale<float>": "_Z5scaleIfEvPT_S0_i", "scale<double>": "_Z5scaleIdEvPT_S0_i"}
    # A single str is one name expression (as options take one str as one option).
    _, one = dlstream.compile(SOURCE, "sm_80", name_expressions="scale<int>", options="-DUNUSED=1")
    assert one == {"scale<int>": "_Z5scaleIiEvPT_S0_i"}
    with pytest.raises(dlstream.InvalidArgumentError, match="nothere<int>"):
        dlstream.compile(SOURCE, "sm_80", name_expressions=["nothere<int>"])


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="source"):
        dlstream.compile(b"bytes source")
    with pytest.raises(TypeError, match="options"):
        dlstream.compile(SOURCE, "sm_80", options=[1, 2])
    with pytest.raises(TypeError, match="name_expressions"):
        dlstream.compile(SOURCE, "sm_80", name_expressions=5)
    with pytest.raises(TypeError, match="arch=None"):
        dlstream.compile(SOURCE, None)
    with pytest.raises(TypeError, match="arch"):
        dlstream.compile(SOURCE, 90)
    with pytest.raises(dlstream.InvalidArgumentError, match="NUL"):
        dlstream.compile("__global__ void k() {}\0junk", "sm_80")
    with pytest.raises(dlstream.InvalidArgumentError, match='arch="vulkan"'):
        dlstream.compile(SOURCE, "vulkan")
    with pytest.raises(dlstream.InvalidArgumentError, match="name the target once"):
        dlstream.compile(SOURCE, "sm_80", options=["-arch=sm_90"])
    with pytest.raises(TypeError, match="unexpected keyword"):
        dlstream.compile(SOURCE, "sm_80", optoins=[])
    with pytest.raises(dlstream.InvalidArgumentError, match="kernels compile for"):
        dlstream.compiler_version("cpu")
    with pytest.raises(dlstream.NotSupportedError, match="device=cpu:0"):
        dlstream.Module.from_source(SOURCE, device="cpu")
    with pytest.raises(TypeError):
        dlstream.Module.from_source(SOURCE, "-DX")  # options are keyword-only


def test_missing_nvrtc_raises_unavailable_with_the_install_hint():
    code = f"""
import dlstream
try:
    dlstream.compile({SOURCE!r}, "sm_80")
except dlstream.UnavailableError as e:
    print("UNAVAILABLE", e)
"""
    r = run_python(code, env={"DLSTREAM_NVRTC_LIBRARY": "/nonexistent/libnvrtc.so.13"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("UNAVAILABLE"), out
    assert "DLSTREAM_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.13" in out
    assert "pip install nvidia-cuda-nvrtc" in out and "CUDA toolkit" in out
    assert isinstance(dlstream.UnavailableError("x"), RuntimeError)


# ---- the cache ----

@needs_nvrtc
def test_in_process_cache_hit(private_cache):
    dlstream.compile(SOURCE, "sm_80")
    dlstream.compile(SOURCE, "sm_80")
    s = dlstream._dlstream._compile_stats()
    assert s["compiles"] == 1 and s["memory_hits"] == 1 and s["disk_writes"] == 1
    dlstream.compile(SOURCE, "sm_80", options=["-DOTHER=1"])
    assert dlstream._dlstream._compile_stats()["compiles"] == 2, "other options are another key"


@needs_nvrtc
def test_cache_file_format_and_a_second_process_hits(private_cache):
    first = child(private_cache)
    assert first["compiles"] == 1 and first["disk_writes"] == 1
    (f,) = cache_files(private_cache)
    data = f.read_bytes()
    magic, version, header, key, length, checksum = struct.unpack_from("<8sII32sQ32s", data)
    assert magic == b"DLSKERN\0" and version == 1 and header == 96
    assert f.name == key.hex() + ".bin"
    assert length == len(data) - 96
    assert hashlib.sha256(data[96:]).digest() == checksum, "the checksum is SHA-256 of the payload"
    second = child(private_cache)
    assert second["compiles"] == 0 and second["disk_hits"] == 1


def damage_flip(f):
    data = bytearray(f.read_bytes())
    data[300] ^= 0xFF
    f.write_bytes(bytes(data))


def damage_truncate(f):
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def damage_header(f):
    f.write_bytes(f.read_bytes()[:20])


def damage_empty(f):
    f.write_bytes(b"")


@needs_nvrtc
@pytest.mark.parametrize("damage", [damage_flip, damage_truncate, damage_header, damage_empty],
                         ids=["flipped", "truncated", "cut-in-header", "empty"])
def test_damaged_cache_file_is_recompiled_not_a_crash(private_cache, damage):
    child(private_cache)
    (f,) = cache_files(private_cache)
    damage(f)
    after = child(private_cache)
    assert after["compiles"] == 1 and after["disk_corrupt"] == 1 and after["disk_writes"] == 1
    again = child(private_cache)
    assert again["compiles"] == 0 and again["disk_hits"] == 1, "the replacement file is good"


@needs_nvrtc
def test_forged_file_with_a_valid_checksum_but_wrong_contents_is_recompiled(private_cache):
    """A file whose header and checksum hold but whose payload does not answer the compile (no lowered name where
    one was asked for) is not trusted: the lowered names are never read past what was asked."""
    code = f"""
import json, dlstream
img, names = dlstream.compile({SOURCE!r}, "sm_80", name_expressions=["scale<float>"])
assert names == {{"scale<float>": "_Z5scaleIfEvPT_S0_i"}}, names
print(json.dumps(dlstream._dlstream._compile_stats()))
"""
    env = {"DLSTREAM_CACHE_DIR": str(private_cache)}
    assert run_python(code, env=env).returncode == 0
    (f,) = cache_files(private_cache)
    data = f.read_bytes()
    kind, nlowered, size = struct.unpack_from("<IIQ", data, 96)
    assert nlowered == 1
    payload = struct.pack("<IIQ", kind, 0, size) + data[112:112 + size]  # drop the lowered name
    header = bytearray(data[:96])
    struct.pack_into("<Q32s", header, 48, len(payload), hashlib.sha256(payload).digest())
    f.write_bytes(bytes(header) + payload)
    r = run_python(code, env=env)
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    assert stats["disk_corrupt"] == 1 and stats["compiles"] == 1


@needs_nvrtc
def test_concurrent_processes_writing_one_key(private_cache):
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda _: child(private_cache), range(6)))
    assert sum(r["compiles"] for r in results) >= 1
    assert all(r["compiles"] + r["disk_hits"] == 1 for r in results)
    files = cache_files(private_cache)
    assert len(files) == 1 and files[0].suffix == ".bin", f"one file, no temporaries: {files}"
    assert child(private_cache)["disk_hits"] == 1


@needs_nvrtc
def test_cache_off_switches(private_cache):
    off = child(private_cache, DLSTREAM_CACHE="0")
    assert off["compiles"] == 1 and off["disk_writes"] == 0 and not cache_files(private_cache)
    dlstream.compile(SOURCE, "sm_80", cache=False)
    dlstream.compile(SOURCE, "sm_80", cache=False)
    s = dlstream._dlstream._compile_stats()
    assert s["compiles"] == 2 and s["memory_hits"] == 0 and not cache_files(private_cache)


# ---- on a GPU ----

@pytest.fixture
def gpu_module():
    if not HAVE_CUDA:
        pytest.skip("no CUDA device: " + dlstream.backend_available("cuda")[1])
    if NVRTC is None:
        pytest.skip(f"no NVRTC here: {NVRTC_WHY}")
    return dlstream.Module.from_source(SOURCE, name_expressions=["scale<float>"], device="cuda:0")


@needs_cuda
def test_from_source_repeat_is_a_cache_hit_and_names_resolve(gpu_module):
    again = dlstream.Module.from_source(SOURCE, name_expressions=["scale<float>"], device="cuda:0")
    assert again is not gpu_module, "a Module of its own on the same image (test_module_sharing.py)"
    assert dlstream._dlstream._compile_stats()["module_hits"] >= 1
    assert again.function("scale<float>").name == "scale<float>"
    assert gpu_module.function("scale<float>").name == "scale<float>"
    assert gpu_module.get_function("axpy").name == "axpy"
    with pytest.raises(dlstream.NotFoundError, match=r"it has: .*axpy.*name expressions: scale<float> \(_Z5scale"):
        gpu_module.function("axpyy")
    gpu_module.close()
    assert not again.closed and again.function("axpy").name == "axpy"
    fresh = dlstream.Module.from_source(SOURCE, name_expressions=["scale<float>"], device="cuda:0")
    assert fresh is not gpu_module and not fresh.closed, "a closed module is not handed out again"


@needs_torch_cuda
def test_from_source_on_torch_tensors(gpu_module):
    n = 10_000
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.ones(n, device="cuda", dtype=torch.float32)
    axpy = gpu_module.function("axpy", "f32,cp,p,i32")
    scale = gpu_module.function("scale<float>", "p,f32,i32")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # runs on torch's current stream, ordered like a torch op
        axpy.launch((n + 255) // 256, 256, 2.0, x, y, n)
        scale.launch((n + 255) // 256, 256, y, 0.5, n)
        z = y * 1
    torch.cuda.synchronize()
    assert torch.allclose(z, (2 * x + 1) * 0.5)


@needs_cupy_cuda
def test_from_source_on_cupy_arrays(gpu_module):
    n = 10_000
    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.ones(n, dtype=cupy.float32)
    axpy = gpu_module.function("axpy", "f32,cp,p,i32")
    with cupy.cuda.Stream() as s:
        axpy.launch((n + 255) // 256, 256, 3.0, x, y, n, stream=s)
        s.synchronize()
    np.testing.assert_allclose(cupy.asnumpy(y), 3 * np.arange(n, dtype=np.float32) + 1)
