# SPDX-License-Identifier: Apache-2.0
"""Every built-in through every way in, from the built-ins' table (dlstream._dlstream._builtins(), made from
plugin/kernels/builtin_table.h): a new built-in is covered without an edit here.

Ways in: Function.launch (the general path), its launch plan (a fake exchange-API framework's tensors, the plan taken
before the bad call), dlstream.jax.kernel at trace time, the XLA handler at execution (a custom call made by hand, as
any lowering could), and dlstream.torch (skipped without torch); on a GPU, Function.launch of the GPU built-in with
dlstream tensors and the CUDA XLA handler (skipped, with the reason, without CUDA or JAX's CUDA backend).
tests/c/test_builtin_ways.c does dls_launch on the CPU and the GPU.
Cases: a wrong element type for each memory argument; too few elements (each memory argument empty in turn); counts
and descriptors that reach past every array; what a built-in reads partially overlapping what it writes. Each must
be the error of its own call, with every array left as it was.

A case that does not apply says why (pytest's skip), e.g. overlap for a built-in with one memory argument."""
import struct

import numpy as np
import pytest

import dlstream
from conftest import CPU, HAVE_CUDA, JAX_UNDER_TSAN, UNDER_TSAN, fake_exchange, settle

TABLE = {b["name"]: b for b in dlstream._dlstream._builtins()}
N = 8
SENTINEL = 7
CASES = ("wrong_dtype", "too_few", "reach_past", "overlap")
WAYS = ("launch", "plan", "jax", "xla", "torch", "launch_gpu", "xla_gpu")
GPU = "cuda:0"
_DL = {"i": 0, "u": 1, "f": 2, "b": 6}


def dl_of(dtype):
    d = np.dtype(dtype)
    return _DL[d.kind], d.itemsize * 8


def np_of(code, bits):
    return np.dtype({0: f"i{bits // 8}", 1: f"u{bits // 8}", 2: f"f{bits // 8}", 6: "?"}[code])


def memory(b):
    return [i for i, a in enumerate(b["args"]) if a["kind"] in ("p", "cp")]


def valid_dtype(a):
    """An element type the argument takes (the table's rule): a descriptor's and a size argument's are float32."""
    rule = a["rule"]
    if rule[0] == "exact":
        return np_of(rule[1], rule[2])
    if rule[0] == "int":
        return np.dtype(f"i{rule[1] // 8}")
    return np.dtype(np.float32)


def wrong_dtype(a):
    """One it does not take: of the same size where the rule names a type (float32 -> int32: the garbage case)."""
    rule = a["rule"]
    if rule[0] == "exact":
        return np_of(0 if rule[1] == 2 else 2, rule[2])
    if rule[0] == "int":
        return np.dtype(f"f{rule[1] // 8}")
    if rule[0] == "sized":
        return np.dtype(np.float64)  # 8 bytes where the size argument says 4
    return np.dtype(np.int32)  # the descriptor names float32


def desc_bytes(struct_name, n, src_stride=1):
    """A descriptor of `n` float32 elements (src_stride 0: a broadcast source, the shape of issue 31's overflow)."""
    shape, dst, src = [n] + [0] * 7, [1] + [0] * 7, [src_stride] + [0] * 7
    if struct_name == "dls_copy_desc_t":
        return struct.pack("<II8q8q8q", 1, 4, *shape, *dst, *src)
    if struct_name == "dls_convert_desc_t":
        f32 = struct.pack("<BBH", 2, 32, 1)
        return struct.pack("<I4s4sI8q8q8q", 1, f32, f32, 0, *shape, *dst, *src)
    raise AssertionError(f"no descriptor maker for {struct_name}: add one here for the table's new struct")


def scalars(b, count=N, desc_n=N, src_stride=1):
    """The values of a valid call: a size argument 4 (float32), counts `count`, other integers N, floats 1.0."""
    sized = {a["rule"][1] for a in b["args"] if a["rule"] and a["rule"][0] == "sized"}
    out = {}
    for i, a in enumerate(b["args"]):
        k = a["kind"]
        if k == "bytes":
            out[i] = desc_bytes(a["struct"], desc_n, src_stride)
        elif k in ("f32", "f64"):
            out[i] = 1.0
        elif k in ("i32", "u32", "i64", "u64"):
            out[i] = 4 if i in sized else count if a["count"] else N
    return out


class Call:
    """One call's arrays (each N elements of a valid type, filled with SENTINEL) and values, made bad by a case."""

    def __init__(self, b, case, arg=None):
        self.b, self.case, self.arg = b, case, arg
        mem = memory(b)
        self.values = scalars(b, **({"count": N * 1000, "desc_n": N * 1000, "src_stride": 0}
                                    if case == "reach_past" else {}))
        self.arrays = {i: np.full(N, SENTINEL, valid_dtype(b["args"][i])) for i in mem}
        if case == "wrong_dtype":
            self.arrays[arg] = np.full(N, SENTINEL, wrong_dtype(b["args"][arg]))
        elif case == "too_few":
            self.arrays[arg] = self.arrays[arg][:0]
        elif case == "overlap":  # the written one is the read one a element on: a partial overlap
            w, r = self.pair()
            base = np.full(N + 1, SENTINEL, valid_dtype(b["args"][w]))
            self.arrays[w], self.arrays[r] = base[1:], base[:-1]
            self.base = base
        self.before = {i: a.copy() for i, a in self.arrays.items()}

    def pair(self):
        args = self.b["args"]
        w = [i for i in memory(self.b) if args[i]["kind"] == "p" and not args[i]["ordered_as_read"]]
        r = [i for i in memory(self.b) if args[i]["kind"] == "cp"]
        return w[0], r[0]

    def ordered(self, arrays=None):
        arrays = self.arrays if arrays is None else arrays
        return [arrays[i] if i in arrays else self.values[i] for i in range(len(self.b["args"]))]

    def unchanged(self):
        settle()
        for i, a in self.arrays.items():
            np.testing.assert_array_equal(a, self.before[i], err_msg=f"{self.b['name']} wrote its {i}")

    def expected(self):
        """What the message says: the argument's name and the wrong type, or the bounds, or the overlap."""
        if self.case == "wrong_dtype":
            a = self.b["args"][self.arg]
            return rf"{a['name']}\b.*\b{np.dtype(wrong_dtype(a)).name}\b"
        if self.case == "overlap":
            return "partially overlaps"
        return r"(?:needs bytes|NULL memory)"


def applies(b, case):
    """None, or why the case does not apply to the built-in."""
    mem = memory(b)
    if not mem:
        return f"{b['name']} takes no memory"
    if case == "reach_past" and not any(a["count"] or a["kind"] == "bytes" for a in b["args"]):
        return f"no count or descriptor of {b['name']} says how much memory it reaches"
    if case == "overlap":
        args = b["args"]
        if not any(args[i]["kind"] == "p" and not args[i]["ordered_as_read"] for i in mem) or \
                not any(args[i]["kind"] == "cp" for i in mem):
            return f"{b['name']} does not read one memory argument while it writes another"
    return None


def cells():
    for name, b in TABLE.items():
        for case in CASES:
            why = applies(b, case)
            targets = [i for i in memory(b) if b["args"][i]["rule"]] if case == "wrong_dtype" else \
                memory(b) if case == "too_few" else [None]
            for arg in targets or [None]:
                for way in WAYS:
                    label = f"{name}-{case}" + (f"-{b['args'][arg]['name']}" if arg is not None else "") + f"-{way}"
                    yield pytest.param(name, case, arg, way, why, id=label)


def test_the_table_covers_every_builtin_and_way():
    """The grid below is built from the table: every built-in, every way in."""
    names = {p.values[0] for p in cells()}
    assert names == set(TABLE) and len(TABLE) >= 8
    assert {p.values[3] for p in cells()} == set(WAYS)


# ---- the ways in ----

def way_launch(call):
    f = dlstream.builtin_function(call.b["name"], CPU)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"^Function\.launch\(.*" + call.expected()):
        f.launch(1, 1, *call.ordered())


def way_plan(call):
    if any(a["kind"] == "bytes" for a in call.b["args"]):
        pytest.skip("a bytes argument is never planned: the general path (the launch way) takes every such call")
    fx = fake_exchange()
    fx.set_current_stream(0)

    def fakes(arrays):
        return {i: fx.FakeTensor(a, a.ctypes.data, a.shape, *dl_of(a.dtype)) for i, a in arrays.items()}

    f = dlstream.builtin_function(call.b["name"], CPU)
    good = {i: np.full(N, SENTINEL, valid_dtype(call.b["args"][i])) for i in call.arrays}
    values = call.values
    call.values = scalars(call.b)  # the plan is made by a valid call, and the bad one has its shape
    f.launch(1, 1, *call.ordered(fakes(good)))
    settle()
    assert f._planned, "the valid call made no plan"
    if call.case == "reach_past":  # the plan's scalars are the valid call's: its arrays are what fall short
        call.arrays = {i: a[: N // 2] for i, a in call.arrays.items()}
        call.before = {i: a.copy() for i, a in call.arrays.items()}
    else:
        call.values = values
    bad = call.ordered(fakes(call.arrays))
    with pytest.raises(dlstream.InvalidArgumentError, match=r"^Function\.launch\(.*" + call.expected()):
        f.launch(1, 1, *bad)
    assert f._planned, "the bad call did not meet the plan"


def _jax():
    if UNDER_TSAN:
        pytest.skip(JAX_UNDER_TSAN)
    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax): dlstream.jax needs it")
    return jax, pytest.importorskip("dlstream.jax")


def _on_cpu_x64(jax):
    """JAX's CPU device with 64-bit types (a float64 stays a float64), in a block."""
    import contextlib
    stack = contextlib.ExitStack()
    stack.enter_context(jax.default_device(jax.devices("cpu")[0]))
    if hasattr(jax, "enable_x64"):
        stack.enter_context(jax.enable_x64(True))
    else:
        from jax.experimental import enable_x64
        stack.enter_context(enable_x64())
    return stack


def way_jax(call):
    jax, dj = _jax()
    if call.case == "overlap":
        pytest.skip("XLA's arrays never partially overlap (an in-place result is its own operand); "
                    "tests/c/test_xla.c hands the handler overlapping buffers")
    f = dlstream.builtin_function(call.b["name"], CPU)
    mem = memory(call.b)
    k = dj.kernel(f, in_place=[i for i in mem if call.b["args"][i]["kind"] == "p"])
    with _on_cpu_x64(jax):
        arrays = {i: jax.numpy.asarray(a) for i, a in call.arrays.items()}
        with pytest.raises(dlstream.InvalidArgumentError,
                           match=rf"^dlstream\.jax\.kernel\({call.b['name']}\).*" + call.expected()):
            jax.jit(lambda *xs: k(*call.ordered(dict(zip(arrays, xs)))))(*arrays.values())


def way_xla(call, device=None, platform="cpu"):
    """The handler itself, past dlstream.jax's trace-time checks: a custom call written by hand."""
    jax, dj = _jax()
    if call.case == "overlap":
        pytest.skip("XLA's arrays never partially overlap; tests/c/test_xla.c hands the handler overlapping buffers")
    dj.register()
    f = dlstream.builtin_function(call.b["name"], CPU if platform == "cpu" else GPU)
    entries, vals, operands, results = [], bytearray(), [], []
    for i, a in enumerate(call.b["args"]):
        if a["kind"] == "cp":
            entries.append(1 | len(operands) << 8)
            operands.append(call.arrays[i])
        elif a["kind"] == "p":
            entries.append(2 | len(results) << 8)
            results.append(jax.ShapeDtypeStruct(call.arrays[i].shape, call.arrays[i].dtype))
        else:
            fmt = {"i32": "<i", "u32": "<I", "i64": "<q", "u64": "<Q", "f32": "<f", "f64": "<d"}.get(a["kind"])
            raw = call.values[i] if fmt is None else struct.pack(fmt, call.values[i])
            vals.extend(b"\0" * (-len(vals) % 8))
            entries.append(3 | len(vals) << 8 | len(raw) << 32)
            vals.extend(raw)
    device_type = 1 if platform == "cpu" else 2
    attrs = {"dls_cfg": np.array([1, f.handle, 1, 1, 1, 1, 1, 1, 0, device_type, 0], np.int64),
             "dls_args": np.array(entries, np.int64)}
    if vals:
        attrs["dls_vals"] = np.frombuffer(bytes(vals), np.uint8)
    with _on_cpu_x64(jax), jax.default_device(device or jax.devices("cpu")[0]):
        ops = [jax.numpy.asarray(a) for a in operands]
        run = jax.jit(lambda *xs: jax.ffi.ffi_call(dj.TARGET, results, has_side_effect=True)(*xs, **attrs))
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match=rf"INVALID_ARGUMENT: dlstream XLA call \({platform}\): dls_launch\(.*" +
                           call.expected()):
            jax.block_until_ready(run(*ops))
        for a, o in zip(operands, ops):
            np.testing.assert_array_equal(np.asarray(o), a)


def way_launch_gpu(call):
    """The GPU built-in with dlstream tensors on the GPU (their dtypes known); an overlap as raw addresses."""
    if not HAVE_CUDA:
        pytest.skip("no CUDA device: " + dlstream.backend_available("cuda")[1])
    f = dlstream.builtin_function(call.b["name"], GPU)
    tensors = {}
    for i, a in call.arrays.items():
        tensors[i] = dlstream.empty(a.shape, a.dtype.name, device=GPU)
        if a.size:
            dlstream.copy(tensors[i], a)
    args = dict(tensors)
    if call.case == "overlap":
        base = dlstream.empty(call.base.shape, call.base.dtype.name, device=GPU)
        dlstream.copy(base, call.base)
        w, r = call.pair()
        args[w], args[r] = base.data_ptr + call.base.itemsize, base.data_ptr
    try:
        with pytest.raises(dlstream.InvalidArgumentError, match=r"^Function\.launch\(.*" + call.expected()):
            f.launch(1, 1, *call.ordered(args))
        for i, a in call.arrays.items():
            if a.size:
                back = np.empty_like(a)
                dlstream.copy(back, tensors[i])
                dlstream.synchronize(GPU)
                np.testing.assert_array_equal(back, call.before[i], err_msg=f"{call.b['name']} wrote its {i} on {GPU}")
        if call.case == "overlap":
            back = np.empty_like(call.base)
            dlstream.copy(back, base)
            dlstream.synchronize(GPU)
            np.testing.assert_array_equal(back, call.base)
            base.close()
    finally:
        for t in tensors.values():
            t.close()


def way_xla_gpu(call):
    jax, dj = _jax()
    try:
        gpus = jax.devices("gpu") if HAVE_CUDA else []
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("no CUDA device for dlstream" if not HAVE_CUDA else "this JAX has no CUDA backend")
    way_xla(call, device=gpus[0], platform="cuda")


def way_torch(call):
    torch = pytest.importorskip("torch", reason="torch is not installed: CI runs this suite again with torch (CPU)")
    dt = pytest.importorskip("dlstream.torch")
    b = call.b
    names = [a["name"] for a in b["args"]]
    descs = {a["name"]: call.values[i] for i, a in enumerate(b["args"]) if a["kind"] == "bytes"}
    op_name = f"dls_ways::{b['name']}_{call.case}_{call.arg}"
    compute = {n: (lambda v=v: v) for n, v in descs.items()}
    op = dt.op(op_name, dlstream.builtin_function(b["name"], CPU), params=names, compute=compute or None, grid=1,
               block=1, contiguous=False)
    try:
        tensors = {i: torch.from_numpy(a) for i, a in call.arrays.items()}
        if call.case == "overlap":  # views of one storage
            base = torch.from_numpy(call.base)
            w, r = call.pair()
            tensors[w], tensors[r] = base[1:], base[:-1]
        inputs = [tensors[i] if i in tensors else call.values[i] for i, a in enumerate(b["args"])
                  if a["kind"] != "bytes"]
        with pytest.raises(dlstream.Error, match=rf"{b['name']}|{op_name}"):
            op(*inputs)
    finally:
        dt.remove(op_name)


@pytest.mark.parametrize("name, case, arg, way, why", list(cells()))
def test_every_builtin_every_way(name, case, arg, way, why, no_leaks):
    if why is not None:
        pytest.skip(why)
    call = Call(TABLE[name], case, arg)
    globals()[f"way_{way}"](call)
    call.unchanged()
    if case == "overlap":
        np.testing.assert_array_equal(call.base, np.full(N + 1, SENTINEL, call.base.dtype))


def test_the_high_level_calls_stage_an_overlap_instead():
    """The own calls are not refused for an overlap: they copy the source through a temporary (NumPy's answer)."""
    x = np.arange(N + 1, dtype=np.float32)
    want = x.copy()
    want[1:] = want[:-1].astype(np.float64)
    dlstream.copy(x[1:], x[:-1])
    settle()
    np.testing.assert_array_equal(x, want)
