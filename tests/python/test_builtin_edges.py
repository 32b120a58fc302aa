# SPDX-License-Identifier: Apache-2.0
"""The memory-bound built-ins (fill, axpy, copy_strided, convert) at their edges (issue 34 item 5): starts at every
place in their 16 bytes, lengths that are not a multiple of the kernels' vector width, source and destination that
sit differently in their 16 bytes, strided, reversed and broadcast views, every kind of grid a launch can give
(one thread, a few, 2-D and 3-D grids and blocks, the core's own), and, on a GPU, more than 2^31 and 2^32 elements.

Each case runs the built-in on a byte arena through raw addresses (Function.launch, any grid) or on views (the
high-level calls, whose grid the core sizes) and compares every byte of the arena with NumPy's answer, so a write
past the end or before the start fails too. On the CPU the twins run (the grid is theirs to ignore); the GPU cases
skip, with the reason, without CUDA (tests/c/test_kernels_on_host.cpp runs the CUDA kernels' own code on the host,
thread by thread)."""
import struct

import numpy as np
import pytest

import dlstream
from conftest import CPU, HAVE_CUDA, TORCH_CUDA, needs_cuda, needs_torch_cuda, settle, torch

GPU = "cuda:0"
DEVICES = [CPU, pytest.param(GPU, marks=needs_cuda)]
# (grid, block): one thread, a few (each loops), a 2-D grid of 2-D blocks, a 3-D one, a thread per 16 bytes.
GRIDS = [(1, 1), (3, 32), ((2, 2, 1), (4, 2, 1)), ((1, 2, 2), (3, 1, 3)), None]
CODES = {"?": (6, 8), "u1": (1, 8), "u2": (1, 16), "u4": (1, 32), "u8": (1, 64), "i1": (0, 8), "i2": (0, 16),
         "i4": (0, 32), "i8": (0, 64), "f2": (2, 16), "f4": (2, 32), "f8": (2, 64)}


class Arena:
    """`size` random bytes at a 16-byte aligned address on `device` (malloc's and the driver's allocations are); `want`
    is NumPy's copy that a case edits into what the kernel must leave."""

    def __init__(self, device, size, seed):
        self.device = device
        self.host = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
        self.want = self.host.copy()
        if device == CPU:
            self.mem = self.host  # the kernel writes the host bytes themselves
            self.base = self.host.ctypes.data
        else:
            self.mem = dlstream.empty(size, "uint8", device=device)
            dlstream.copy(self.mem, self.host)
            self.base = self.mem.data_ptr
        assert self.base % 16 == 0, f"the arena is at 0x{self.base:x}: the cases count starts from a 16-byte boundary"

    def view(self, dtype, offset, count):
        """Elements of the reference at byte `offset`."""
        return np.frombuffer(self.want.data, dtype=dtype, count=count, offset=offset)

    def check(self, what):
        if self.device == CPU:
            dlstream.current_stream(CPU).synchronize()
            got = self.host
        else:
            got = np.empty_like(self.host)
            dlstream.copy(got, self.mem)
            dlstream.synchronize(self.device)
            self.mem.close()
        bad = np.flatnonzero(got != self.want)
        assert bad.size == 0, f"{what}: {bad.size} bytes differ, first at {bad[0]}: got {got[bad[:8]]}, want " \
                              f"{self.want[bad[:8]]}"


def launch(device, name, items, *args, grid=None):
    f = dlstream.builtin_function(name, device)
    g, b = grid if grid is not None else (max(1, -(-items // 256)), 256)
    f.launch(g, b, *args)


def grids_for(device):
    return GRIDS if device != CPU else [None]  # the CPU twins ignore the grid


def desc(ndim_shape, dst_strides, src_strides, elem_size=None, dst=None, src=None):
    n = len(ndim_shape)
    pad = [0] * (8 - n)
    shape, ds, ss = list(ndim_shape) + pad, list(dst_strides) + pad, list(src_strides) + pad
    if elem_size is not None:
        return struct.pack("<II8q8q8q", n, elem_size, *shape, *ds, *ss)
    return struct.pack("<I4s4sI8q8q8q", n, struct.pack("<BBH", *CODES[dst], 1), struct.pack("<BBH", *CODES[src], 1), 0,
                       *shape, *ds, *ss)


# ---- raw addresses on an arena, every grid ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [1, 2, 4, 8])
def test_fill_every_start_and_length(device, size, no_leaks):
    dt = np.dtype(f"u{size}")
    value = 0x8877665544332211 & ((1 << (8 * size)) - 1)
    for grid in grids_for(device):
        for start in range(0, 16 + 2 * size, size):
            for count in (0, 1, 2, 3, 7, 16 // size + 1, 33, 1001):
                a = Arena(device, 64 + count * size + 64, seed=start * 7 + count)
                if count:
                    a.view(dt, 64 + start, count)[:] = value
                launch(device, "dls_fill", count * size // 16 + 1, a.base + 64 + start, count, size, value, grid=grid)
                a.check(f"fill {size}-byte x {count} at +{start}, grid {grid}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_axpy_every_pair_of_starts(device, dtype, no_leaks):
    dt = np.dtype(dtype)
    name = "dls_axpy_f32" if dt.itemsize == 4 else "dls_axpy_f64"
    for grid in grids_for(device):
        for xs in range(0, 16 + dt.itemsize, dt.itemsize):
            for ys in range(0, 16 + dt.itemsize, dt.itemsize):
                for n in (1, 3, 5, 35, 1001):
                    a = Arena(device, 4096 + 2 * n * dt.itemsize, seed=xs * 31 + ys + n)
                    xo, yo = 64 + xs, 2048 + n * dt.itemsize + ys
                    small = (np.arange(n) % 97).astype(dt)  # exact in any order of rounding
                    a.view(dt, xo, n)[:] = small
                    a.view(dt, yo, n)[:] = small[::-1]
                    if device == CPU:
                        a.host[:] = a.want
                    else:
                        dlstream.copy(a.mem, a.want)
                    a.view(dt, yo, n)[:] = 2 * small + small[::-1]
                    launch(device, name, n // 4 + 1, n, 2.0, a.base + xo, a.base + yo, grid=grid)
                    a.check(f"axpy {dtype} n={n} x at +{xs}, y at +{ys}, grid {grid}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("elem", [1, 2, 4, 8, 12])
def test_contiguous_copy_every_pair_of_starts(device, elem, no_leaks):
    """A contiguous copy of any element size, dst and src at any byte of their 16 (copy_strided takes any alignment:
    16-byte words, 8, 4, or shifted 4-byte words where the two sit differently)."""
    for grid in grids_for(device):
        for ds in range(0, 17, 1 if elem == 1 else 5):
            for ss in ((0, 1, 2, 3, 4, 7, 8, 12, 15) if elem == 1 else range(0, 17, 3)):
                for n in (0, 1, 3, 17, 250):
                    a = Arena(device, 8192, seed=ds * 100 + ss * 7 + n)
                    do, so = 64 + ds, 4096 + ss
                    a.want[do:do + n * elem] = a.want[so:so + n * elem]
                    d = desc([n], [1], [1], elem_size=elem)
                    launch(device, "dls_copy_strided", n * elem // 16 + 1, a.base + do, a.base + so, d, grid=grid)
                    a.check(f"copy {n} x {elem} bytes, dst at +{ds}, src at +{ss}, grid {grid}")


VIEWS = [  # shape, dst strides, src strides (elements)
    ([37], [2], [1]), ([37], [1], [3]), ([37], [-1], [1]), ([37], [1], [0]),  # 1-D strided, reversed, broadcast
    ([6, 7], [7, 1], [1, 6]),  # a transpose
    ([5, 6], [6, 1], [10, 1]),  # rows of a wider source
    ([1, 7, 1, 3], [21, 3, 3, 1], [99, 3, 7, 1]),  # contiguous once the extents of 1 are gone
    ([3, 4, 5], [-20, 5, -1], [20, -5, 1]),
    ([2, 3], [3, 1], [0, 1]),  # broadcast rows
]


def walk(shape, strides):
    """Element offsets of a view, row-major."""
    idx = np.indices(shape).reshape(len(shape), -1)
    return (idx * np.array(strides)[:, None]).sum(axis=0)


def span(shape, strides):
    lo = sum((s - 1) * st for s, st in zip(shape, strides) if st < 0)
    return -lo


def element(buf, dtype, offset):
    """The element of `dtype` at byte `offset` of a byte array, as a writable 1-element view."""
    return np.frombuffer(buf.data, dtype, 1, offset)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", range(len(VIEWS)))
def test_strided_copy_and_convert(device, view, no_leaks):
    shape, dstr, sstr = VIEWS[view]
    pairs = [("f4", "f4"), ("u1", "u1"), ("f2", "f4"), ("f4", "f2"), ("f8", "i4"), ("i8", "u1"), ("f4", "?")]
    d_off, s_off = walk(shape, dstr), walk(shape, sstr)
    for grid in grids_for(device):
        for dst_t, src_t in pairs:
            dd, sd = np.dtype(dst_t), np.dtype(src_t)
            for shift in (0, 1):
                a = Arena(device, 8192, seed=view * 10 + shift)
                do = 64 + (span(shape, dstr) + shift) * dd.itemsize
                so = 4096 + (span(shape, sstr) + shift) * sd.itemsize
                for k, o in enumerate(s_off):  # values the source type holds (a bool is 0 or 1)
                    element(a.want, sd, so + int(o) * sd.itemsize)[0] = (k % 2 if src_t == "?" else k % 113 - 50.25
                                                                        if sd.kind == "f" else k % 113)
                if device == CPU:
                    a.host[:] = a.want
                else:
                    dlstream.copy(a.mem, a.want)
                values = np.array([element(a.want, sd, so + int(o) * sd.itemsize)[0] for o in s_off], sd)
                for o, v in zip(d_off, values.astype(dd)):
                    element(a.want, dd, do + int(o) * dd.itemsize)[0] = v
                if dst_t == src_t:
                    launch(device, "dls_copy_strided", values.size, a.base + do, a.base + so,
                           desc(shape, dstr, sstr, elem_size=dd.itemsize), grid=grid)
                else:
                    launch(device, "dls_convert", values.size, a.base + do, a.base + so,
                           desc(shape, dstr, sstr, dst=dst_t, src=src_t), grid=grid)
                a.check(f"{src_t} -> {dst_t}, view {VIEWS[view]}, shifted {shift}, grid {grid}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", [("f2", "f4"), ("f4", "f2"), ("f4", "f8"), ("f8", "f4"), ("f4", "i4"), ("f4", "u1"),
                                  ("f8", "i8"), ("i8", "i4"), ("i4", "i8"), ("f2", "u1"), ("i2", "u1")])
def test_contiguous_convert_every_pair_of_starts(device, pair, no_leaks):
    """Each side at any element of its vector (the loop converts 16 bytes of the wider side a time, the elements
    before both reach their alignment together one by one)."""
    dd, sd = np.dtype(pair[0]), np.dtype(pair[1])
    rng = np.random.default_rng(3)
    for grid in grids_for(device):
        for ds in range(0, 16 + dd.itemsize, dd.itemsize):
            for ss in range(0, 16 + sd.itemsize, sd.itemsize * 3):
                for n in (1, 2, 5, 9, 31, 700):
                    a = Arena(device, 16384, seed=ds + ss * 3 + n)
                    do, so = 64 + ds, 8192 + ss
                    src = a.view(sd, so, n)
                    if sd.kind == "f":
                        src[:] = rng.standard_normal(n) * 1000
                    if device == CPU:
                        a.host[:] = a.want
                    else:
                        dlstream.copy(a.mem, a.want)
                    with np.errstate(all="ignore"):
                        a.view(dd, do, n)[:] = src.astype(dd)
                    launch(device, "dls_convert", n // 2 + 1, a.base + do, a.base + so,
                           desc([n], [1], [1], dst=pair[0], src=pair[1]), grid=grid)
                    a.check(f"{pair[1]} -> {pair[0]} n={n}, dst at +{ds}, src at +{ss}, grid {grid}")


# ---- the high-level calls on views (the core's grid) ----

def views_of(device, n, dtype, offsets):
    """Arrays of n elements at element offsets into their own bases: NumPy on the CPU, torch on a GPU."""
    out = []
    for k, off in enumerate(offsets):
        base = (np.arange(n + 40) % 89).astype(dtype)
        if device == CPU:
            out.append(base[off:off + n])
        else:
            out.append(torch.from_numpy(base).to("cuda")[off:off + n])
    return out


def host(a):
    return a.cpu().numpy() if hasattr(a, "cpu") else np.asarray(a)


DEVICES_TORCH = [CPU, pytest.param(GPU, marks=needs_torch_cuda)]


@pytest.mark.parametrize("device", DEVICES_TORCH)
@pytest.mark.parametrize("n", [1, 3, 4, 5, 17, 1023, 4099])
def test_high_level_calls_at_offsets(device, n, no_leaks):
    for xo, yo in ((0, 1), (1, 0), (3, 3), (2, 5)):
        x, y = views_of(device, n, np.float32, (xo, yo))
        want = 2 * host(x) + host(y)
        dlstream.axpy(2.0, x, y)
        f, = views_of(device, n, np.int16, (yo,))
        dlstream.fill(f, -3)
        d, s = views_of(device, n, np.float32, (xo, yo))
        dlstream.copy(d, s)
        h, = views_of(device, n, np.float16, (xo,))
        dlstream.copy(h, s)  # float32 -> float16
        if device == CPU:
            settle()
        else:
            torch.cuda.synchronize()
        np.testing.assert_array_equal(host(y), want, err_msg=f"axpy n={n} at +{xo}, +{yo}")
        assert (host(f) == -3).all(), f"fill n={n} at +{yo}"
        np.testing.assert_array_equal(host(d), host(s), err_msg=f"copy n={n} at +{xo}, +{yo}")
        np.testing.assert_array_equal(host(h), host(s).astype(np.float16), err_msg=f"convert n={n}")


# ---- more than 2^31 and 2^32 elements (a GPU: 4 to 13 GB) ----

@needs_torch_cuda
def test_more_than_2_to_the_31_and_32_elements():
    """Indices past 32 bits: a fill and a converting copy of 2^31 + 5 elements (16-byte items, 32-bit indices; byte
    offsets past 2^32), and a strided copy of 2^32 + 3 one-byte elements (one item each: 64-bit indices)."""
    free = torch.cuda.mem_get_info()[0]
    if free < 16 << 30:
        pytest.skip(f"needs 16 GiB free on the GPU, {free >> 30} GiB are")
    n = (1 << 31) + 5
    f = torch.empty(n, dtype=torch.float32, device="cuda")
    dlstream.fill(f, 1.5)
    assert bool((f == 1.5).all()) and float(f[-1]) == 1.5
    h = torch.empty(n, dtype=torch.float16, device="cuda")
    f[-3:] = torch.tensor([1.0, 2.0, 65504.0], device="cuda")
    dlstream.copy(h, f)
    assert bool((h[:-3] == 1.5).all()) and h[-3:].tolist() == [1.0, 2.0, 65504.0]
    del f, h
    m = (1 << 32) + 3
    src = torch.randint(0, 255, (2 * m,), dtype=torch.uint8, device="cuda")
    dst = torch.zeros(m, dtype=torch.uint8, device="cuda")
    dlstream.copy(dst, src[::2])
    torch.cuda.synchronize()
    assert torch.equal(dst, src[::2])
