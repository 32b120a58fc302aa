# SPDX-License-Identifier: Apache-2.0
"""dlstream.torch's torch-free half (dlstream/_torchspec.py), without torch: the schema a Function's signature gives,
output specs and computed arguments, the refusals of a bad declaration (naming the operator and the argument), and
the generated implementation run against stand-in tensors and a recording launch."""
import pytest

import dlstream
from dlstream import _torchspec as ts


def axpy_spec(**kw):
    args = dict(params="n, a, x, y", compute={"n": ts.numel("x")}, grid=ts.cdiv("n", 256), block=256)
    args.update(kw)
    return ts.OpSpec("demo::axpy", "u64,f32,cp,p", **args)


def test_schema_from_the_signature():
    assert axpy_spec().schema() == "axpy(float a, Tensor x, Tensor(a!) y) -> ()"
    spec = ts.OpSpec("demo::k", "p,cp,p,i32,u32,i64,u64,f32,f64", params="o, i, w, a, b, c, d, e, f", grid=1,
                     block=1, outputs={"o": ts.output("i")})
    assert spec.schema() == ("k(Tensor i, Tensor(a!) w, int a, int b, int c, int d, float e, float f) -> Tensor")
    assert spec.mutated() == ["w"]
    two = ts.OpSpec("demo::two", "p,p,cp", params="u, v, x", grid=1, block=1,
                    outputs={"u": ts.output("x"), "v": ts.output(shape=(4,), dtype="int32", like=None)})
    assert two.schema() == "two(Tensor x) -> (Tensor, Tensor)"
    many = ts.OpSpec("demo::many", ",".join(["p"] * 28), grid=1, block=1)
    assert "Tensor(z!) arg25, Tensor(aa!) arg26, Tensor(ab!) arg27" in many.schema(), "distinct alias sets"


def test_signature_spellings_are_those_of_launch():
    assert ts.canonical_signature("t", "ptr, size_t, float, double, int, b") == "p,u64,f32,f64,i32,bytes"
    with pytest.raises(dlstream.InvalidArgumentError, match=r"t: signature='p,q': 'q' is not one of p, cp"):
        ts.canonical_signature("t", "p,q")


@pytest.mark.parametrize("kw, message", [
    (dict(params="n, a, x"), r"params='n, a, x' names 3 argument\(s\), the kernel's signature 'u64,f32,cp,p' has 4"),
    (dict(params="n, a, x, x"), r"names an argument twice"),
    (dict(params="n, a, x, _y"), r"parameter name '_y' is not a Python identifier"),
    (dict(params="n, a, x, lambda"), r"parameter name 'lambda'"),
    (dict(params="n, a, x, Tensor"), r"parameter name 'Tensor'"),
    (dict(params=4), r"params=4: expected names"),
    (dict(compute={"m": ts.numel("x")}), r"compute names 'm', which is not one of the kernel's arguments "
                                         r"\(n, a, x, y\)"),
    (dict(compute={"n": ts.numel("a")}), r"compute\['n'\]=dlstream.torch.numel\('a'\): 'a' is not a tensor argument"),
    (dict(compute={"n": lambda z: 1}), r"compute\['n'\] takes 'z', which is not one of the arguments it can see"),
    (dict(compute={"n": lambda *xs: 1}), r"\*xs cannot be given arguments by name"),
    (dict(outputs={"x": ts.output("y")}), r"outputs\['x'\]: the kernel's x is 'cp'; only a 'p' argument"),
    (dict(outputs={"y": ts.output("a")}), r"like='a' is not a tensor argument of the operator"),
    (dict(outputs={"y": "x"}), r"outputs\['y'\]='x': expected dlstream.torch.output"),
    (dict(outputs={"y": ts.output(shape=("q",), dtype="float32")}), r"shape names 'q', not an int argument"),
    (dict(grid=0), r"grid=0: expected an int >= 1"),
    (dict(block=(1, 2, 3, 4)), r"block=\(1, 2, 3, 4\)"),
    (dict(grid=ts.cdiv("x", 4)), r"'x' is not an int argument"),
    (dict(shared_mem=-1), r"shared_mem=-1"),
    (dict(dtypes={"a": "float32"}), r"dtypes\['a'\]: not a tensor argument of the operator \(those are x, y\)"),
    (dict(contiguous="q"), r"contiguous names 'q'"),
])
def test_bad_declarations_name_the_operator_and_the_argument(kw, message):
    with pytest.raises(dlstream.Error, match=r"dlstream.torch.op\('demo::axpy'\): .*" + message):
        axpy_spec(**kw)


def test_bad_names_and_arguments_of_the_helpers():
    for bad in ("axpy", "demo::", "de mo::axpy", "demo::axpy.default", 3):
        with pytest.raises(dlstream.InvalidArgumentError, match=r"expected 'namespace::name'"):
            ts.OpSpec(bad, "p", grid=1, block=1)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"'bytes' argument, which a schema cannot carry"):
        ts.OpSpec("demo::c", "p,cp,bytes", params="d, s, desc", grid=1, block=1)
    with pytest.raises(dlstream.InvalidArgumentError, match="give like="):
        ts.output(shape=(4,))
    with pytest.raises(dlstream.ArgumentTypeError):
        ts.output(like=3)
    with pytest.raises(dlstream.InvalidArgumentError, match="k is an int >= 1"):
        ts.cdiv("n", 0)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"the operator takes no tensor \(its arguments: n\)"):
        ts.OpSpec("demo::o", "p,u64", params="o, n", grid=1, block=1,
                  outputs={"o": ts.output(shape=("n",), dtype="float32")})


class FakeTensor:
    """What the implementation asks of a tensor: dtype, contiguity, numel, device index."""

    def __init__(self, n, dtype="f32", contiguous=True, device=0):
        self.n, self.dtype, self.contig, self.device = n, dtype, contiguous, device

    def numel(self):
        return self.n

    def is_contiguous(self):
        return self.contig

    def contiguous(self):
        return FakeTensor(self.n, self.dtype, True, self.device)

    def get_device(self):
        return self.device


class Refused(Exception):
    pass


def build(spec, per_device=False, sync=False, **env):
    """The generated implementation with recording stand-ins for what dlstream/torch.py provides."""
    calls = []
    g = dict(spec.env_names(), _ctx_get=lambda default: None, _Error=dlstream.Error, _lifted=None,
             _launch=lambda *a, **k: calls.append((a, k)), _dt_x="f32", _dt_y="f32",
             _bad_dtype=lambda n, t: (_ for _ in ()).throw(Refused(f"dtype {n}")),
             _bad_layout=lambda n, t: (_ for _ in ()).throw(Refused(f"layout {n}")),
             _failed=lambda e, grid: calls.append(("failed", str(e), grid)))
    g.update(env)
    exec(compile(spec.impl_source(per_device=per_device, sync=sync), "<impl>", "exec"), g)  # noqa: S102
    return g["impl"], calls


def test_the_implementation_computes_and_launches():
    impl, calls = build(axpy_spec(dtypes={"x": "f32", "y": "f32"}))
    x, y = FakeTensor(1000), FakeTensor(1000)
    assert impl(2.0, x, y) is None
    assert calls == [((4, 256, 1000, 2.0, x, y), {})], "grid cdiv(1000, 256), block 256, n = x.numel()"
    with pytest.raises(Refused, match="dtype y"):
        impl(2.0, x, FakeTensor(1000, dtype="f64"))
    with pytest.raises(Refused, match="layout y"):
        impl(2.0, x, FakeTensor(1000, contiguous=False))
    calls.clear()
    impl(2.0, FakeTensor(1000, contiguous=False), y)  # read only: a contiguous copy is passed
    assert calls[0][0][4].contig and calls[0][0][4] is not x
    unchecked, calls = build(axpy_spec(contiguous=False))
    unchecked(1.0, FakeTensor(8, dtype="i8", contiguous=False), y)
    assert len(calls) == 1, "no dtype or layout declared: nothing checked"


def test_functions_of_the_arguments_by_name_and_outputs():
    spec = ts.OpSpec("demo::f", "p,cp,u64,u32,f32", params="out, x, n, rows, s",
                     compute={"n": ts.numel("out"), "rows": lambda x, *, n: n // 4},
                     outputs={"out": ts.output("x", zeros=True)}, grid=lambda rows: (rows, 2), block=(32, 4),
                     shared_mem=lambda n: n * 4)
    assert spec.schema() == "f(Tensor x, float s) -> Tensor"
    made = []
    impl, calls = build(spec, _zeros_like=lambda t, memory_format: made.append(t) or FakeTensor(t.n),
                        _contiguous="contiguous", _sync=lambda: calls.append("sync"))
    x = FakeTensor(64)
    out = impl(x, 0.5)
    assert made == [x] and out.n == 64
    assert calls == [(((16, 2), (32, 4), out, x, 64, 16, 0.5), {"shared_mem": 256})]
    impl, calls = build(spec, sync=True, _zeros_like=lambda t, memory_format: FakeTensor(t.n),
                        _contiguous=None, _sync=lambda: calls.append("sync"))
    impl(x, 0.5)
    assert calls[-1] == "sync", "the CPU implementation waits for its launch"


def test_per_device_launches_and_errors_go_through_the_named_helpers():
    picked = {}

    def resolve(t):
        picked[t.get_device()] = lambda *a, **k: calls.append(("dev", t.get_device()) + a)
        return picked[t.get_device()]

    impl, calls = build(axpy_spec(), per_device=True, _launches=picked, _resolve=resolve)
    impl(1.0, FakeTensor(8, device=1), FakeTensor(8, device=1))
    impl(1.0, FakeTensor(8, device=1), FakeTensor(8, device=1))
    assert [c[:4] for c in calls] == [("dev", 1, 1, 256)] * 2 and list(picked) == [1]

    def refuse(*a, **k):
        raise dlstream.InvalidArgumentError("Function.launch(args[0]=-1): out of range for a u64 argument")

    impl, calls = build(axpy_spec(), _launch=refuse)
    impl(1.0, FakeTensor(8), FakeTensor(8))
    assert calls == [("failed", "Function.launch(args[0]=-1): out of range for a u64 argument", 1)]


def test_launch_errors_in_the_operators_words():
    spec = axpy_spec()
    assert spec.describe_error("Function.launch(args[3]=<tensor>): expected a tensor") == \
        "demo::axpy(y=<tensor>): expected a tensor"
    assert spec.describe_error("the stream was closed") == "demo::axpy: the stream was closed"


def test_the_fake_allocates_what_the_implementation_does():
    spec = ts.OpSpec("demo::g", "p,p,cp,i64", params="u, v, x, k", grid=1, block=1, dtypes={"x": "f32"},
                     outputs={"u": ts.output("x", dtype="float16"), "v": ts.output(shape=("k", 3), dtype="int32")})
    g = dict(spec.env_names(), _dt_x="f32", _odt0="half", _odt1="i32", _contiguous="c",
             _bad_dtype=lambda n, t: (_ for _ in ()).throw(Refused(n)),
             _empty_like=lambda t, dtype, memory_format: ("like", t, dtype, memory_format),
             _empty=lambda shape, dtype, device: ("empty", shape, dtype, device))
    exec(compile(spec.fake_source(), "<fake>", "exec"), g)  # noqa: S102
    x = FakeTensor(4)
    x.device = "dev"
    assert g["fake"](x, 5) == (("like", x, "half", "c"), ("empty", (5, 3), "i32", "dev"))
    with pytest.raises(Refused):
        g["fake"](FakeTensor(4, dtype="f64"), 5)


def test_the_torch_op_example_runs():
    """examples/python/torch_op.py: on CUDA where there is a device, else on the CPU backend; it says why it skips
    (no torch)."""
    import pathlib

    from conftest import run_python
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "torch_op.py"
    r = run_python(path.read_text(), timeout=600)
    assert r.returncode == 0, r.stderr
    if r.stdout.startswith("skipped:"):
        pytest.skip("examples/python/torch_op.py " + r.stdout.strip())
    assert "example::axpy_(float a, Tensor x, Tensor(a!) y) -> ()" in r.stdout
    assert "torch.compile(fullgraph=True) == eager" in r.stdout and "torch_op example: ok on" in r.stdout
