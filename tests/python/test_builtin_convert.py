# SPDX-License-Identifier: Apache-2.0
"""copy between dtypes converts as NumPy's astype does under its same_kind casting (np.copyto's default), and refuses
an unsafe cast naming the call, both dtypes and the rule (issue 31 item 4): the dls_convert built-in, its CPU twin and
(on a GPU; skipped, with the reason, without one) its CUDA kernel."""
import numpy as np
import pytest

import dlstream
from conftest import CPU, needs_cuda, settle

TYPES = ["?", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f2", "f4", "f8"]


def sample(dtype, rng, n=600):
    """Values of `dtype` that reach its edges: the extremes of integers, float16's overflow and subnormals, NaN,
    infinities, signed zeros."""
    t = np.dtype(dtype)
    if t.kind == "b":
        return rng.integers(0, 2, n).astype(t)
    if t.kind in "ui":
        info = np.iinfo(t)
        return np.concatenate([rng.integers(info.min, info.max, n - 2, dtype=t, endpoint=True),
                               np.array([info.min, info.max], t)])
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 65504, 65519.99, 65520, 6e-8, 2.9802322387695312e-08, 3e-8, 1e39,
             -1e39, 3.4028235e38, 1e-45]
    v = np.concatenate([rng.standard_normal(n // 2) * 10.0 ** rng.integers(-12, 12, n // 2),
                        rng.uniform(-70000, 70000, n // 2), edges])
    with np.errstate(all="ignore"):
        return v.astype(t)


def same(got, want):
    if got.dtype.kind == "f":
        return np.array_equal(got, want, equal_nan=True) and \
            np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))
    return np.array_equal(got, want)


@pytest.mark.parametrize("src_t", TYPES)
def test_copy_converts_as_numpy_for_every_same_kind_cast(src_t, no_leaks):
    rng = np.random.default_rng(TYPES.index(src_t))
    src = sample(src_t, rng)
    for dst_t in TYPES:
        dst = np.zeros(len(src), dst_t)
        if not np.can_cast(src_t, dst_t, "same_kind"):
            with pytest.raises(dlstream.InvalidArgumentError,
                               match=rf"^copy\(dst {dst.dtype.name}, src {src.dtype.name}\): an unsafe cast: "
                                     r"NumPy's same_kind casting"):
                dlstream.copy(dst, src)
            settle()
            assert not dst.any(), f"a refused copy {src_t} -> {dst_t} wrote"
            continue
        dlstream.copy(dst, src)
        settle()
        with np.errstate(all="ignore"):
            want = src.astype(dst_t)
        assert same(dst, want), f"{src_t} -> {dst_t}: {dst[:8]} vs {want[:8]}"


def test_the_issues_example_converts_and_the_unsafe_one_is_refused(no_leaks):
    dst = np.zeros(2, np.float32)
    dlstream.copy(dst, np.array([1, -2], np.int32))
    settle()
    np.testing.assert_array_equal(dst, [1.0, -2.0])
    ints = np.zeros(2, np.int32)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"copy\(dst int32, src float32\): an unsafe cast.*never "
                                                            r"a float into int32"):
        dlstream.copy(ints, np.array([1.5, -2.0], np.float32))
    settle()
    np.testing.assert_array_equal(ints, [0, 0])  # not the float's bits (1069547520): nothing


def test_strided_and_reversed_views_convert(no_leaks):
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    y = np.zeros((6, 4), np.float64)
    dlstream.copy(y, x.T[::-1])
    settle()
    np.testing.assert_array_equal(y, x.T[::-1].astype(np.float64))


def test_an_overlapping_conversion_gives_numpys_answer(no_leaks):
    """int16 read from bytes 0..16 of a buffer and written as int32 to bytes 4..36: staged through a temporary."""
    b = np.arange(20, dtype=np.int16)
    src = b[:8]
    want = src.astype(np.int32)
    dst = b.view(np.uint8)[4:36].view(np.int32)
    dlstream.copy(dst, src)
    settle()
    np.testing.assert_array_equal(dst, want)


def test_types_it_does_not_convert_are_refused(no_leaks):
    c = dlstream.empty(3, "complex64", device=CPU)
    f = np.zeros(3, np.float32)
    with pytest.raises(dlstream.NotSupportedError, match=r"copy\(dst float32, src complex64\): converts between bool, "
                                                         r"integers .* not complex64"):
        dlstream.copy(f, c)
    d = dlstream.empty(3, "complex64", device=CPU)
    dlstream.copy(d, c)  # one type: its bits
    settle()
    c.close()
    d.close()


def test_bfloat16_converts_as_ml_dtypes_does(no_leaks):
    ml = pytest.importorskip("ml_dtypes", reason="ml_dtypes (JAX's bfloat16) is not installed")
    rng = np.random.default_rng(5)
    for src in (sample("f8", rng), sample("f4", rng), sample("i8", rng), sample("u4", rng), sample("f2", rng)):
        t = dlstream.empty(len(src), "bfloat16", device=CPU)
        dlstream.copy(t, src)
        back = np.zeros(len(src), np.float32)
        dlstream.copy(back, t)  # bfloat16 -> float32 is exact
        settle()
        with np.errstate(all="ignore"):
            want = src.astype(ml.bfloat16).astype(np.float32)
        assert np.array_equal(back, want, equal_nan=True), src.dtype
        t.close()


GPU = "cuda:0"


def on_gpu(a):
    t = dlstream.empty(a.shape, a.dtype.name, device=GPU)
    dlstream.copy(t, a)  # one dtype: staged from the host, its bits
    return t


@needs_cuda
@pytest.mark.parametrize("src_t", TYPES)
def test_the_gpu_kernel_converts_as_numpy_for_every_same_kind_cast(src_t, no_leaks):
    rng = np.random.default_rng(100 + TYPES.index(src_t))
    src = sample(src_t, rng)
    ts = on_gpu(src)
    for dst_t in TYPES:
        td = on_gpu(np.zeros(len(src), dst_t))
        out = np.zeros(len(src), dst_t)
        if not np.can_cast(src_t, dst_t, "same_kind"):
            with pytest.raises(dlstream.InvalidArgumentError, match=r"^copy\(dst .*: an unsafe cast"):
                dlstream.copy(td, ts)
        else:
            dlstream.copy(td, ts)  # the dls_convert kernel on the GPU
        dlstream.copy(out, td)
        dlstream.synchronize(GPU)
        with np.errstate(all="ignore"):
            want = src.astype(dst_t) if np.can_cast(src_t, dst_t, "same_kind") else np.zeros(len(src), dst_t)
        assert same(out, want), f"{src_t} -> {dst_t} on {GPU}: {out[:8]} vs {want[:8]}"
        td.close()
    ts.close()


@needs_cuda
def test_the_gpu_kernel_converts_bfloat16_and_strided_views(no_leaks):
    ml = pytest.importorskip("ml_dtypes", reason="ml_dtypes (JAX's bfloat16) is not installed")
    src = sample("f8", np.random.default_rng(7))
    ts = on_gpu(src)
    tb = dlstream.empty(len(src), "bfloat16", device=GPU)
    dlstream.copy(tb, ts)
    tf = on_gpu(np.zeros(len(src), np.float32))
    dlstream.copy(tf, tb)
    back = np.zeros(len(src), np.float32)
    dlstream.copy(back, tf)
    dlstream.synchronize(GPU)
    with np.errstate(all="ignore"):
        assert np.array_equal(back, src.astype(ml.bfloat16).astype(np.float32), equal_nan=True)
    for t in (ts, tb, tf):
        t.close()
