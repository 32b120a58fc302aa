# SPDX-License-Identifier: Apache-2.0
"""dlstream.copy of a contiguous view runs the core's twin of dls_copy_strided or dls_convert, a kernel with small
arguments (plugin/kernels/builtin_table.h's DLS__TWINS); a strided view runs the descriptor kernel. Both give NumPy's
astype (a copy: the source's bytes) for every pair of types with a loop of its own (convert.h's DLS__CV_PAIRS) and
between one type, at every element offset in 16 bytes on each side, for lengths 0 to 70 and longer ones, and leave
the bytes around as they were: on the CPU backend here (bfloat16's pairs on a GPU only: NumPy exports no bfloat16;
tests/c/test_builtin_contig.c runs them on the CPU), on a GPU through torch's tensors (skipped, with the reason,
without one). The negative control: with DLSTREAM_TEST_BREAK_TWINS=1 (the twins get one element, a copy's one byte,
fewer) the contiguous calls miss their last element and the strided ones do not, so the contiguous calls ran through
the twins."""
import numpy as np
import pytest

import dlstream
from conftest import needs_torch_cuda, run_python, settle
from test_builtin_convert import sample, same

# The pairs of DLS__CV_PAIRS NumPy has types for (bfloat16's: through ml_dtypes, where it is installed), and copies.
PAIRS = [("f4", "f2"), ("f2", "f4"), ("f4", "f8"), ("f8", "f4"), ("f8", "f2"), ("f2", "f8"), ("?", "f4"),
         ("u1", "f4"), ("i1", "f4"), ("i4", "f4"), ("i8", "f4"), ("i4", "f8"), ("i8", "f8"), ("i4", "i8"),
         ("i8", "i4")]
BF16_PAIRS = [("f4", "bf16"), ("bf16", "f4"), ("f8", "bf16"), ("bf16", "f8"), ("f2", "bf16"), ("bf16", "f2")]
COPIES = [("u1", "u1"), ("u2", "u2"), ("f4", "f4"), ("f8", "f8")]
LENGTHS = list(range(71)) + [257, 4099]


def dtype_of(name):
    if name == "bf16":
        return np.dtype(pytest.importorskip("ml_dtypes", reason="ml_dtypes (bfloat16) is not installed").bfloat16)
    return np.dtype(name)


def values(dtype, n, rng):
    """n values of dtype reaching its edges (test_builtin_convert's sample), bfloat16 through float32."""
    if dtype.name == "bfloat16":
        with np.errstate(all="ignore"):
            return sample("f4", rng, max(n, 40))[:n].astype(dtype)
    return np.resize(sample(dtype.str, rng, max(n, 40)), n)


def placed(n, dtype, offset, fill=0):
    """An array of n elements of dtype, `offset` elements past a 16-byte boundary, inside a buffer of `fill` bytes
    (returned too: the bytes around must stay)."""
    buf = np.full(n * dtype.itemsize + 48, fill, np.uint8)
    start = (-buf.ctypes.data) % 16 + offset * dtype.itemsize
    return buf[start:start + n * dtype.itemsize].view(dtype), buf


def batches(src_t, dst_t, strided, run_copy, rng):
    """Every length at every pair of offsets, through run_copy(dst, src); yields (what, got, want, buffer, before)
    for each, after one synchronization."""
    out = []
    for doff in range(16 // dst_t.itemsize):
        for soff in range(16 // src_t.itemsize):
            for n in LENGTHS:
                if strided and (n < 4 or n % 2):
                    continue
                src, _ = placed(n, src_t, soff)
                src[:] = values(src_t, n, rng)
                dst, buf = placed(n, dst_t, doff, fill=0xa5)
                before = buf.copy()
                if strided:  # the same elements, walked column by column: not contiguous
                    run_copy(dst.reshape(2, n // 2).T, src.reshape(2, n // 2).T)
                else:
                    run_copy(dst, src)
                out.append((f"{src_t} -> {dst_t}, {n} elements, dst at +{doff}, src at +{soff}", dst, src, buf, before))
    return out


def check(items, dst_t):
    for what, dst, src, buf, before in items:
        at, nbytes = dst.ctypes.data, dst.nbytes
        with np.errstate(all="ignore"):
            want = src.astype(dst_t)
        if dst_t.name == "bfloat16":  # compared as float32 (exact): NumPy's own functions know no bfloat16
            dst, want = dst.astype(np.float32), want.astype(np.float32)
        ok = same(dst, want) if dst.dtype.kind == "f" else np.array_equal(dst, want)
        assert ok, f"{what}: {dst[-4:]} vs {want[-4:]}"
        lo = at - buf.ctypes.data
        mask = np.ones(len(buf), bool)
        mask[lo:lo + nbytes] = False
        assert np.array_equal(buf[mask], before[mask]), f"{what}: a byte around the destination changed"


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("pair", PAIRS + COPIES, ids="->".join)
def test_both_paths_give_numpys_bits_at_every_offset_and_length(pair, strided, no_leaks):
    src_t, dst_t = dtype_of(pair[0]), dtype_of(pair[1])
    items = batches(src_t, dst_t, strided, dlstream.copy, np.random.default_rng(len(pair[0]) * 7 + len(pair[1])))
    settle()
    check(items, dst_t)


NEGATIVE = """
import numpy as np, dlstream
src = np.arange(1, 35, dtype=np.float32)
contig, strided = np.zeros(34, np.float16), np.zeros(34, np.float16)
copy = np.zeros(34, np.float32)
dlstream.copy(contig, src)
dlstream.copy(strided.reshape(2, 17).T, src.reshape(2, 17).T)
dlstream.copy(copy, src)
dlstream.current_stream("cpu").synchronize()
print(contig[-1], strided[-1], int(copy[-1] == 34), int((contig[:-1] == src[:-1]).all()))
"""


def test_the_contiguous_calls_run_through_the_twins():
    plain = run_python(NEGATIVE)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.split() == ["34.0", "34.0", "1", "1"]
    broken = run_python(NEGATIVE, env={"DLSTREAM_TEST_BREAK_TWINS": "1"})
    assert broken.returncode == 0, broken.stderr
    assert broken.stdout.split() == ["0.0", "34.0", "0", "1"], \
        "negative control: with the twins one element short, the contiguous calls still wrote their last element"


@needs_torch_cuda
@pytest.mark.parametrize("pair", PAIRS + BF16_PAIRS + [c for c in COPIES if c[0] != "u2"], ids="->".join)
def test_the_gpu_twins_give_numpys_bits_at_every_offset_and_length(pair, no_leaks):
    import torch
    src_t, dst_t = dtype_of(pair[0]), dtype_of(pair[1])

    def as_torch(a):  # a host array's bytes as a tensor of its type, on the GPU
        return torch.from_numpy(a.view(np.uint8).copy()).cuda().view(getattr(torch, a.dtype.name))

    def run_copy(dst, src):  # the same call on the GPU, each side at its host array's offset in 16 bytes
        views = []
        for a in (dst, src):
            g = torch.empty(len(a) * a.itemsize + 32, dtype=torch.uint8, device="cuda")  # 256-byte aligned
            at = a.ctypes.data % 16
            v = g[at:at + a.nbytes].view(getattr(torch, a.dtype.name))
            if a.size:  # torch views no empty host bytes as another type
                v.copy_(as_torch(a))
            views.append(v)
        dlstream.copy(views[0], views[1])  # on torch's current stream, before the read back below
        if dst.size:
            dst[:] = views[0].cpu().view(torch.uint8).numpy().view(dst.dtype)

    items = batches(src_t, dst_t, False, run_copy, np.random.default_rng(3))
    torch.cuda.synchronize()
    check(items, dst_t)
