# SPDX-License-Identifier: Apache-2.0
"""The torch-free half of dlstream.torch: what an operator made from a Function is (its schema from the Function's
signature, its outputs, the kernel arguments it computes, its grid and block), checked once when it is declared, and
the source of its implementation and fake (meta) functions. dlstream/torch.py registers them with torch."""
from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._dlstream import ArgumentTypeError, InvalidArgumentError

# The schema type of each scalar kind of a signature (torch's int is 64-bit, its float a double).
SCALAR_TYPES = {"i32": "int", "u32": "int", "i64": "int", "u64": "int", "f32": "float", "f64": "float"}
TENSOR_KINDS = ("p", "cp")

_OP_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)$")
# Names a schema or the generated functions give a meaning: refused as parameter names.
_RESERVED = {"Tensor", "int", "float", "bool", "str", "None", "Scalar", "SymInt", "Device", "Layout", "ScalarType",
             "MemoryFormat", "Generator", "Storage", "Stream", "complex", "Any", "True", "False"}


class Output:
    """A kernel argument of kind ``p`` that the operator allocates and returns (see :func:`output`)."""

    __slots__ = ("like", "shape", "dtype", "zeros")

    def __init__(self, like: str | None, shape: Any, dtype: Any, zeros: bool) -> None:
        self.like, self.shape, self.dtype, self.zeros = like, shape, dtype, zeros

    def __repr__(self) -> str:
        parts = [f"like={self.like!r}"] if self.like else []
        parts += [f"shape={self.shape!r}"] if self.shape is not None else []
        parts += [f"dtype={self.dtype!r}"] if self.dtype is not None else []
        parts += ["zeros=True"] if self.zeros else []
        return "dlstream.torch.output(" + ", ".join(parts) + ")"


def output(like: str | None = None, *, shape: Any = None, dtype: Any = None, zeros: bool = False) -> Output:
    """An output the operator allocates (contiguous, on the device of ``like`` or else of its first tensor argument)
    and returns: ``like`` names a tensor argument whose shape and dtype it takes unless ``shape`` and ``dtype`` say
    otherwise; ``shape`` is a tuple of ints and names of int arguments, or a function of the operator's arguments
    by their names; ``dtype`` a torch dtype or its name; ``zeros=True`` fills it with zeros first."""
    if like is not None and not isinstance(like, str):
        raise ArgumentTypeError(f"dlstream.torch.output(like={like!r}): expected the name of a tensor argument")
    if like is None and (shape is None or dtype is None):
        raise InvalidArgumentError("dlstream.torch.output(): give like= (a tensor argument's name), or shape= and "
                                   "dtype=")
    if shape is not None and not callable(shape) and not (isinstance(shape, Sequence) and not isinstance(shape, str)):
        raise ArgumentTypeError(f"dlstream.torch.output(shape={shape!r}): expected a tuple of ints and argument "
                                "names, or a function of the arguments")
    return Output(like, shape, dtype, bool(zeros))


class Expr:
    """An inline expression of the arguments (numel, cdiv): written into the implementation, no function call."""

    __slots__ = ()

    def source(self) -> str:
        raise NotImplementedError

    def deps(self) -> list[tuple[str, str]]:
        """(name, "tensor" | "int") for each argument it reads."""
        raise NotImplementedError


class numel(Expr):  # noqa: N801 - used like a function: compute={"n": dlstream.torch.numel("x")}
    """``name.numel()``: the element count of a tensor argument or output."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise ArgumentTypeError(f"dlstream.torch.numel({name!r}): expected the name of a tensor argument")
        self.name = name

    def source(self) -> str:
        return f"{self.name}.numel()"

    def deps(self) -> list[tuple[str, str]]:
        return [(self.name, "tensor")]

    def __repr__(self) -> str:
        return f"dlstream.torch.numel({self.name!r})"


class cdiv(Expr):  # noqa: N801 - used like a function: grid=dlstream.torch.cdiv("n", 256)
    """``(value + k - 1) // k``: the blocks of ``k`` that cover ``value`` (an int argument's name or a numel)."""

    __slots__ = ("value", "k")

    def __init__(self, value: str | numel, k: int) -> None:
        if not isinstance(value, (str, numel)):
            raise ArgumentTypeError(f"dlstream.torch.cdiv({value!r}, {k!r}): expected an int argument's name or "
                                    "dlstream.torch.numel(name)")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise InvalidArgumentError(f"dlstream.torch.cdiv({value!r}, {k!r}): k is an int >= 1")
        self.value, self.k = value, k

    def source(self) -> str:
        v = self.value if isinstance(self.value, str) else self.value.source()
        return f"({v} + {self.k - 1}) // {self.k}"

    def deps(self) -> list[tuple[str, str]]:
        return [(self.value, "int")] if isinstance(self.value, str) else self.value.deps()

    def __repr__(self) -> str:
        return f"dlstream.torch.cdiv({self.value!r}, {self.k})"


def _names(call: str, what: str, value: Any) -> list[str]:
    """"a, b, c" or a sequence of names."""
    if isinstance(value, str):
        return [p.strip() for p in value.split(",")] if value.strip() else []
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ArgumentTypeError(f"{call}: {what}={value!r}: expected names, as 'a, b' or a sequence of strings")


# The spellings of a signature's tokens (those of Function.launch), and the one Function.signature reports.
_TOKENS = {"p": "p", "ptr": "p", "cp": "cp", "i32": "i32", "int": "i32", "u32": "u32", "i64": "i64", "u64": "u64",
           "size_t": "u64", "f32": "f32", "float": "f32", "f64": "f64", "double": "f64", "b": "bytes",
           "bytes": "bytes"}


def canonical_signature(call: str, signature: Any) -> str:
    """A signature as Function.signature writes it ("p,cp,u64,f32")."""
    if not isinstance(signature, str):
        raise ArgumentTypeError(f"{call}: signature={signature!r}: expected a string like 'u64,f32,cp,p'")
    toks = [t.strip() for t in signature.split(",")] if signature.strip() else []
    for t in toks:
        if t not in _TOKENS:
            raise InvalidArgumentError(f"{call}: signature={signature!r}: {t!r} is not one of p, cp, i32, u32, i64, "
                                       "u64, f32, f64, bytes")
    return ",".join(_TOKENS[t] for t in toks)


class OpSpec:
    """An operator declared from a Function's signature, checked. Raises InvalidArgumentError or ArgumentTypeError
    naming the operator and the argument."""

    def __init__(self, name: str, signature: str, *, params: Any = None, compute: Mapping[str, Any] | None = None,
                 outputs: Mapping[str, Any] | None = None, grid: Any, block: Any, shared_mem: Any = 0,
                 dtypes: Mapping[str, Any] | None = None, contiguous: Any = True) -> None:
        if not isinstance(name, str) or not _OP_NAME.match(name):
            raise InvalidArgumentError(f"dlstream.torch.op(name={name!r}): expected 'namespace::name' (identifiers)")
        self.qualname = name
        self.ns, self.name = name.split("::")
        self.call = f"dlstream.torch.op({name!r})"
        signature = canonical_signature(self.call, signature)
        self.kinds = signature.split(",") if signature else []
        names = _names(self.call, "params", params) if params is not None else [f"arg{i}" for i in
                                                                                 range(len(self.kinds))]
        if len(names) != len(self.kinds):
            raise InvalidArgumentError(f"{self.call}: params={params!r} names {len(names)} argument(s), the kernel's "
                                       f"signature {signature!r} has {len(self.kinds)}")
        for n in names:
            if not isinstance(n, str) or not n.isidentifier() or keyword.iskeyword(n) or n.startswith("_") or \
                    n in _RESERVED:
                raise InvalidArgumentError(f"{self.call}: parameter name {n!r} is not a Python identifier that can "
                                           "name a schema argument (no leading '_', no keyword or type name)")
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"{self.call}: params={params!r} names an argument twice")
        self.params = names
        self.kind = dict(zip(names, self.kinds))
        self.outputs = dict(outputs or {})
        self.compute = dict(compute or {})
        for n, spec in self.outputs.items():
            self._known(n, "outputs")
            if self.kind[n] != "p":
                raise InvalidArgumentError(f"{self.call}: outputs[{n!r}]: the kernel's {n} is {self.kind[n]!r}; only "
                                           "a 'p' argument (one the kernel writes) can be an output")
            if not isinstance(spec, Output):
                raise ArgumentTypeError(f"{self.call}: outputs[{n!r}]={spec!r}: expected dlstream.torch.output(...)")
        for n in self.compute:
            self._known(n, "compute")
            if n in self.outputs:
                raise InvalidArgumentError(f"{self.call}: {n!r} is both in outputs and in compute")
        self.inputs = [n for n in names if n not in self.outputs and n not in self.compute]
        for n in self.inputs:
            if self.kind[n] == "bytes":
                raise InvalidArgumentError(f"{self.call}: the kernel's {n} is a 'bytes' argument, which a schema "
                                           "cannot carry: compute it (compute={%r: function})" % n)
        self.tensors = [n for n in self.inputs if self.kind[n] in TENSOR_KINDS]
        if not self.tensors:
            raise InvalidArgumentError(f"{self.call}: the operator takes no tensor (its arguments: "
                                       f"{', '.join(self.inputs) or 'none'}); torch picks an implementation from the "
                                       "tensors it is given, so it needs one")
        # What each value may be computed from: outputs from the inputs; computed arguments from the inputs, the
        # outputs and the computed arguments before them; grid, block and shared memory from every argument.
        self.uses: dict[str, tuple[Any, list[str], list[str], str]] = {}
        for i, (n, spec) in enumerate(self.outputs.items()):
            self._check_output(n, spec, f"_oshape{i}")
        seen = self.inputs + list(self.outputs)
        for n, fn in self.compute.items():
            self._use(f"compute[{n!r}]", fn, seen, f"_c_{n}")
            seen = seen + [n]
        self.grid, self.block, self.shared_mem = grid, block, shared_mem
        for what, v in (("grid", grid), ("block", block)):
            if callable(v) or isinstance(v, Expr):
                self._use(what, v, names, f"_f_{what}")
            elif not _dims_ok(v):
                raise InvalidArgumentError(f"{self.call}: {what}={v!r}: expected an int >= 1, a tuple of 1 to 3 of "
                                           "them, or a function of the arguments")
        if callable(shared_mem) or isinstance(shared_mem, Expr):
            self._use("shared_mem", shared_mem, names, "_f_shared_mem")
        elif not isinstance(shared_mem, int) or isinstance(shared_mem, bool) or shared_mem < 0:
            raise InvalidArgumentError(f"{self.call}: shared_mem={shared_mem!r}: expected bytes as an int >= 0 "
                                       "or a function of the arguments")
        self.dtypes = dict(dtypes or {})
        for n in self.dtypes:
            if n not in self.tensors:
                raise InvalidArgumentError(f"{self.call}: dtypes[{n!r}]: not a tensor argument of the operator "
                                           f"(those are {', '.join(self.tensors) or 'none'})")
        if contiguous is True or contiguous is False:
            self.contiguous = list(self.tensors) if contiguous else []
        else:
            self.contiguous = _names(self.call, "contiguous", contiguous)
            for n in self.contiguous:
                if n not in self.tensors:
                    raise InvalidArgumentError(f"{self.call}: contiguous names {n!r}, not a tensor argument")

    def _known(self, n: Any, where: str) -> None:
        if n not in self.kind:
            raise InvalidArgumentError(f"{self.call}: {where} names {n!r}, which is not one of the kernel's "
                                       f"arguments ({', '.join(self.params)})")

    def _use(self, what: str, fn: Any, allowed: Sequence[str], ref: str) -> None:
        """Checks a function of the arguments by name, or an inline expression, and notes the names it takes and
        the name (`ref`) the generated source calls a function by."""
        if isinstance(fn, Expr):
            for n, want in fn.deps():
                k = self.kind.get(n, "") if n in allowed else ""
                if not (k in TENSOR_KINDS if want == "tensor" else SCALAR_TYPES.get(k) == "int"):
                    article = "a" if want == "tensor" else "an"
                    raise InvalidArgumentError(f"{self.call}: {what}={fn!r}: {n!r} is not {article} {want} argument "
                                               f"it can see ({', '.join(allowed) or 'none'})")
            self.uses[what] = (fn, [], [], "")
            return
        if not callable(fn):
            raise ArgumentTypeError(f"{self.call}: {what}={fn!r}: expected a function of the arguments by name")
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            raise ArgumentTypeError(f"{self.call}: {what}={fn!r}: its parameters cannot be read ({e})") from None
        pos: list[str] = []
        kw: list[str] = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise InvalidArgumentError(f"{self.call}: {what}: *{p.name} cannot be given arguments by name")
            if p.name not in allowed:
                if p.default is not p.empty:
                    continue
                raise InvalidArgumentError(f"{self.call}: {what} takes {p.name!r}, which is not one of the "
                                           f"arguments it can see ({', '.join(allowed) or 'none'})")
            (kw if p.kind == p.KEYWORD_ONLY else pos).append(p.name)
        self.uses[what] = (fn, pos, kw, ref)

    def _check_output(self, n: str, spec: Output, ref: str) -> None:
        where = f"outputs[{n!r}]"
        if spec.like is not None and spec.like not in self.tensors:
            raise InvalidArgumentError(f"{self.call}: {where}: like={spec.like!r} is not a tensor argument of the "
                                       f"operator ({', '.join(self.tensors) or 'none'})")
        if callable(spec.shape):
            self._use(where + ".shape", spec.shape, self.inputs, ref)
        elif spec.shape is not None:
            for d in spec.shape:
                if isinstance(d, str):
                    if d not in self.inputs or SCALAR_TYPES.get(self.kind[d]) != "int":
                        raise InvalidArgumentError(f"{self.call}: {where}: shape names {d!r}, not an int argument "
                                                   "of the operator")
                elif not isinstance(d, int) or isinstance(d, bool) or d < 0:
                    raise InvalidArgumentError(f"{self.call}: {where}: shape={spec.shape!r}: extents are ints "
                                               ">= 0 or names of int arguments")

    # ---- the schema ----

    def schema(self) -> str:
        """``name(float a, Tensor x, Tensor(a!) y) -> ()``: ``p`` arguments are written, ``cp`` ones read."""
        args, alias = [], 0
        for n in self.inputs:
            k = self.kind[n]
            if k == "p":
                args.append(f"Tensor({_alias(alias)}!) {n}")
                alias += 1
            elif k == "cp":
                args.append(f"Tensor {n}")
            else:
                args.append(f"{SCALAR_TYPES[k]} {n}")
        outs = len(self.outputs)
        rets = "()" if outs == 0 else "Tensor" if outs == 1 else "(" + ", ".join(["Tensor"] * outs) + ")"
        return f"{self.name}({', '.join(args)}) -> {rets}"

    def mutated(self) -> list[str]:
        return [n for n in self.inputs if self.kind[n] == "p"]

    # ---- the generated functions ----

    def _call(self, what: str) -> str:
        fn, pos, kw, ref = self.uses[what]
        if isinstance(fn, Expr):
            return fn.source()
        return f"{ref}({', '.join(pos + [f'{k}={k}' for k in kw])})"

    def _alloc(self, n: str, i: int) -> str:
        spec = self.outputs[n]
        dtype = "" if spec.dtype is None else f", dtype=_odt{i}"
        if spec.shape is None:
            fn = "_zeros_like" if spec.zeros else "_empty_like"
            return f"{n} = {fn}({spec.like}{dtype}, memory_format=_contiguous)"
        if callable(spec.shape):
            shape = self._call(f"outputs[{n!r}].shape")
        else:
            shape = "(" + "".join(f"{d}, " for d in spec.shape) + ")"
        dev = spec.like or self.tensors[0]
        dtype = dtype or f", dtype={spec.like}.dtype"
        return f"{n} = {'_zeros' if spec.zeros else '_empty'}({shape}{dtype}, device={dev}.device)"

    def _prologue(self, checks_layout: bool) -> list[str]:
        lines = []
        for n in self.tensors:
            if n in self.dtypes:
                lines.append(f"if {n}.dtype is not _dt_{n}: _bad_dtype({n!r}, {n})")
            if checks_layout and n in self.contiguous:  # read-only: a contiguous copy will do; written: refused
                fix = f"{n} = {n}.contiguous()" if self.kind[n] == "cp" else f"_bad_layout({n!r}, {n})"
                lines.append(f"if not {n}.is_contiguous(): {fix}")
        for i, n in enumerate(self.outputs):
            lines.append(self._alloc(n, i))
        return lines

    def _returns(self) -> str:
        outs = list(self.outputs)
        return "return None" if not outs else f"return {outs[0]}" if len(outs) == 1 else f"return ({', '.join(outs)},)"

    def impl_source(self, *, per_device: bool, sync: bool) -> str:
        """The source of ``impl``, to run with the names of env_names() and dlstream/torch.py's as its globals: checks,
        outputs, computed arguments, one launch (through ``_launch``, or for ``per_device`` the launch of the first
        tensor's device), its errors in the operator's words."""
        sig = ", ".join(self.inputs)
        body = [f"if _ctx_get(None) is not None:  # use_stream(): a torch op runs on torch's current stream",
                f"    return _lifted(impl, {sig}{',' if len(self.inputs) == 1 else ''})"]
        body += self._prologue(True)
        for n, fn in self.compute.items():
            body.append(f"{n} = " + self._call(f"compute[{n!r}]"))
        dims = []
        for what, v in (("grid", self.grid), ("block", self.block)):
            if what in self.uses:
                body.append(f"_{what} = " + self._call(what))
                dims.append(f"_{what}")
            else:
                dims.append(repr(v))  # ints, checked above
        smem = ""
        if "shared_mem" in self.uses:
            smem = ", shared_mem=" + self._call("shared_mem")
        elif self.shared_mem:
            smem = f", shared_mem={int(self.shared_mem)}"
        launch = "_launch"
        if per_device:
            dev = self.tensors[0]
            body.append(f"_l = _launches.get({dev}.get_device()) or _resolve({dev})")
            launch = "_l"
        args = ", ".join(dims + self.params)
        body += ["try:",
                 f"    {launch}({args}{smem})",
                 "except _Error as _e:",
                 f"    _failed(_e, {dims[0]})"]
        if sync:
            body.append("_sync()")
        body.append(self._returns())
        return _wrap("impl", sig, body)

    def fake_source(self) -> str:
        """The source of ``fake``: the same dtype checks and outputs, no launch."""
        sig = ", ".join(self.inputs)
        return _wrap("fake", sig, self._prologue(False) + [self._returns()])

    def env_names(self) -> dict[str, Any]:
        """The functions of the arguments the generated source calls, by the names it calls them."""
        return {ref: fn for fn, _, _, ref in self.uses.values() if ref}

    def describe_error(self, message: str) -> str:
        """A launch's error message in the operator's words: Function.launch(args[i]=...) names the argument."""
        def arg(m: re.Match) -> str:
            i = int(m.group(1))
            return self.params[i] if i < len(self.params) else m.group(0)

        msg = re.sub(r"args\[(\d+)\]", arg, message)
        if msg.startswith("Function.launch"):
            return self.qualname + msg[len("Function.launch"):]
        return f"{self.qualname}: {msg}"


def _alias(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return letters[i] if i < 26 else letters[i // 26 - 1] + letters[i % 26]


def _dims_ok(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v >= 1
    return isinstance(v, tuple) and 1 <= len(v) <= 3 and all(isinstance(d, int) and not isinstance(d, bool) and
                                                             d >= 1 for d in v)


def _wrap(fname: str, sig: str, body: list[str]) -> str:
    return "\n".join([f"def {fname}({sig}):"] + ["    " + line for line in body]) + "\n"
