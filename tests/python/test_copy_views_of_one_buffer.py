# SPDX-License-Identifier: Apache-2.0
"""dlstream.copy between two views of one buffer, for every pair of types NumPy's same_kind casting converts: the
views overlap partly, exactly or not at all, with steps of 1, 2 or -1 elements on each side and a broadcast source
(stride 0), at any offset of 8 bytes; each gives NumPy's answer (np.copyto from a copy of the source: the source as
it was before the call) and leaves every other byte of the buffer as it was. Contiguous views run the twins
(builtin_table.h's DLS__TWINS), the others the descriptor kernels, a partial overlap through a staged source. A
randomized sweep of 700 layouts, fixed seed (a regression guard: it found nothing on the CPU backend)."""
import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

import dlstream

TYPES = ["u1", "i2", "f2", "f4", "i4", "f8", "i8"]


def view(buf, offset, n, step, t):
    t = np.dtype(t)
    return as_strided(buf[offset:].view(t), shape=(n,), strides=(step * t.itemsize,))


def layouts(rng, isz, jsz):
    """(dst offset, dst step, src offset, src step, n) within a 512-byte buffer, 8-byte aligned."""
    while True:
        n = int(rng.integers(0, 20))
        dstep, sstep = int(rng.choice([1, 1, 2, -1])), int(rng.choice([1, 1, 2, -1, 0]))
        doff = int(rng.integers(0, 8)) * 8 + (-dstep * (n - 1) * isz if dstep < 0 and n else 0)
        soff = int(rng.integers(0, 8)) * 8 + (-sstep * (n - 1) * jsz if sstep < 0 and n else 0)
        if doff + max(n, 1) * isz * abs(dstep) <= 480 and soff + max(n, 1) * jsz * max(abs(sstep), 1) <= 480:
            return doff, dstep, soff, sstep, n


def test_views_of_one_buffer_give_numpys_answer(no_leaks):
    rng = np.random.default_rng(7)
    bad = []
    for dt, st in itertools.product(TYPES, TYPES):
        if not np.can_cast(np.dtype(st), np.dtype(dt), "same_kind"):
            continue
        for _ in range(25):
            doff, dstep, soff, sstep, n = layouts(rng, np.dtype(dt).itemsize, np.dtype(st).itemsize)
            base = rng.integers(0, 60, 512).astype(np.uint8)
            want, got = base.copy(), base.copy()
            with np.errstate(all="ignore"):
                np.copyto(view(want, doff, n, dstep, dt), view(want, soff, n, sstep, st).copy(), casting="same_kind")
            dlstream.copy(view(got, doff, n, dstep, dt), view(got, soff, n, sstep, st))
            dlstream.current_stream("cpu").synchronize()
            if not np.array_equal(got, want):
                bad.append(f"{st} -> {dt}, n={n}: dst at {doff} step {dstep}, src at {soff} step {sstep}")
    assert not bad, bad[:10]
