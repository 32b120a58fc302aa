# SPDX-License-Identifier: Apache-2.0
"""The built-ins on the core's own grid across several tiles (issue 34 item 5): the GPU kernels' fast paths move a
tile a block (plugin/kernels/grid.cuh: 256 threads, each with 8 vectors of 16 bytes for a fill, 2 for an axpy or a
copy, 1 or 2 items of 16 narrow-side bytes for a conversion), and the core sizes the grid to the work, a block a
tile (core/builtin.c); strided copies move 2 or 4 elements a thread on a grid capped at what the device holds, so
large views loop. Lengths here sit just below, at and past whole tiles, and well past a capped grid, at starts that
do and do not share their place in 16 bytes, and are compared element by element with torch's (or NumPy's) answer.

On the CPU the twins run the same calls (NumPy arrays, the smaller lengths); the GPU cases need torch with CUDA and
skip, with the reason, without it (tests/c/test_kernels_on_host.cpp runs the CUDA kernels' own tiles on the host)."""
import numpy as np
import pytest

import dlstream
from conftest import CPU, needs_torch_cuda, settle, torch

GPU = "cuda:0"
DEVICES = [CPU, pytest.param(GPU, marks=needs_torch_cuda)]
# Elements: around one tile of a float32 axpy or copy (2048) and fill (8192), several tiles and a partial one, and
# (GPU only) more than a capped grid of 270,336 threads holds.
LENGTHS = [2047, 2048, 2049, 8191, 8195, 3 * 8192 + 7]
LONG = [(1 << 20) + 11, (1 << 22) + 1]
STARTS = [(0, 0), (1, 3), (4, 2)]  # element offsets of destination and source into their own bases


def lengths(device):
    return LENGTHS + (LONG if device != CPU else [])


def arrays(device, n, dtype, offsets, seed, exact=False):
    """Arrays of n elements at element offsets into their own bases: NumPy on the CPU, torch on a GPU. `exact`: small
    integers (an axpy of them is exact, fused or not)."""
    rng = np.random.default_rng(seed)
    out = []
    for off in offsets:
        if np.dtype(dtype).kind == "f" and not exact:
            base = (rng.standard_normal(n + 8) * 100).astype(dtype)
        else:
            base = rng.integers(0, 100, n + 8).astype(dtype)
        out.append(base[off:off + n] if device == CPU else torch.from_numpy(base).to("cuda")[off:off + n])
    return out


def host(a):
    return a.cpu().numpy() if hasattr(a, "cpu") else np.asarray(a)


def done(device):
    if device == CPU:
        settle()
    else:
        torch.cuda.synchronize()


@pytest.mark.parametrize("device", DEVICES)
def test_fill_axpy_copy_across_tiles(device, no_leaks):
    for n in lengths(device):
        for do, so in STARTS:
            f, = arrays(device, n, np.float32, (do,), n)
            b, = arrays(device, n, np.uint8, (so,), n + 1)
            dlstream.fill(f, 2.5)
            dlstream.fill(b, 7)
            x, y = arrays(device, n, np.float32, (so, do), n + 2, exact=True)
            want = np.float32(0.5) * host(x) + host(y)
            dlstream.axpy(0.5, x, y)
            x64, y64 = arrays(device, n, np.float64, (so, do), n + 3, exact=True)
            want64 = 0.5 * host(x64) + host(y64)
            dlstream.axpy(0.5, x64, y64)
            d, s = arrays(device, n, np.float32, (do, so), n + 4)
            dlstream.copy(d, s)
            done(device)
            what = f"n={n}, starts +{do}, +{so}"
            assert (host(f) == 2.5).all() and (host(b) == 7).all(), f"fill {what}"
            np.testing.assert_array_equal(host(y), want, err_msg=f"axpy float32 {what}")
            np.testing.assert_array_equal(host(y64), want64, err_msg=f"axpy float64 {what}")
            np.testing.assert_array_equal(host(d), host(s), err_msg=f"copy {what}")


# Conversions with a loop of their own (convert.h's DLS__CV_PAIRS), items of 8 to 16 elements: (destination, source).
PAIRS = [("float16", "float32"), ("float32", "float16"), ("float32", "uint8"), ("float16", "float64"),
         ("float32", "int64"), ("int32", "int64")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", PAIRS, ids="<-".join)
def test_convert_across_tiles(device, pair, no_leaks):
    dst_t, src_t = pair
    for n in lengths(device):
        for do, so in STARTS:
            d, = arrays(device, n, dst_t, (do,), n)
            s, = arrays(device, n, src_t, (so,), n + 1)
            dlstream.copy(d, s)
            done(device)
            with np.errstate(all="ignore"):
                want = host(s).astype(dst_t)
            np.testing.assert_array_equal(host(d), want, err_msg=f"{src_t} -> {dst_t} n={n}, starts +{do}, +{so}")


@needs_torch_cuda
def test_bfloat16_across_tiles(no_leaks):
    for n in LENGTHS + LONG:
        for do, so in STARTS:
            s = torch.randn(n + 8, device="cuda")[so:so + n]
            d = torch.empty(n + 8, dtype=torch.bfloat16, device="cuda")[do:do + n]
            dlstream.copy(d, s)
            torch.cuda.synchronize()
            assert torch.equal(d, s.to(torch.bfloat16)), f"float32 -> bfloat16 n={n}, starts +{do}, +{so}"


# Strided views: (rows, columns) transposed, and every other element, of one-word elements (2 and 4 a thread).
SHAPES = [(45, 47), (517, 1029), (2050, 33)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int8", "float32", "float64"])
def test_strided_copies_across_tiles(device, dtype, no_leaks):
    for rows, cols in SHAPES + ([(1500, 1501)] if device != CPU else []):
        m, = arrays(device, rows * cols, dtype, (1,), rows)
        m = m.reshape(rows, cols)
        t, = arrays(device, rows * cols, dtype, (0,), cols)
        t = t.reshape(cols, rows)
        dlstream.copy(t, m.T)
        every, = arrays(device, rows * cols, dtype, (3,), rows + 1)
        half, = arrays(device, (rows * cols + 1) // 2, dtype, (0,), cols + 1)
        dlstream.copy(half, every[::2])
        done(device)
        np.testing.assert_array_equal(host(t), host(m).T, err_msg=f"transpose {rows}x{cols} {dtype}")
        np.testing.assert_array_equal(host(half), host(every)[::2], err_msg=f"every other of {rows * cols} {dtype}")
