# SPDX-License-Identifier: Apache-2.0
"""dlstream kernels as torch operators: ``dlstream.torch.op(name, kernel, ...)`` turns a Function (a built-in, a
Module's kernel, a kernel compiled from source) into an operator of ``torch.ops``, which eager code, fake tensors,
``torch.compile(fullgraph=True)``, CUDA graphs and (with ``backward=``) autograd use like any torch operator.

The schema comes from the Function's signature (``p`` arguments are written: ``Tensor(a!)``; ``cp`` ones read:
``Tensor``; scalars ``int`` or ``float``), less the arguments the operator allocates (``outputs=``) or computes
(``compute=``). The implementation is registered through ``torch.library.Library.define`` and ``impl`` for CUDA
(ROCm builds included) and CPU, with a fake implementation made from the same output specs. The operator runs on
torch's current stream of its tensors' device, as any torch operator does (inside ``dlstream.use_stream()`` too).
This is the only module of dlstream that imports torch. See docs/torch.md."""
from __future__ import annotations

import linecache
from collections.abc import Callable, Mapping
from typing import Any

import torch

from . import Error, Function, InvalidArgumentError, InvalidDeviceError, InvalidTensorError, Stream, use_stream
from . import ArgumentTypeError, _dlstream
from ._torchspec import OpSpec, Output, canonical_signature, cdiv, numel, output

__all__ = ["op", "output", "numel", "cdiv", "remove", "Output"]

# The libraries of the operators made here, by qualified name (dropping one unregisters its operator).
_libs: dict[str, torch.library.Library] = {}
_ctx_get = _dlstream._stream_var.get


def op(name: str, kernel: Any, *, grid: Any, block: Any, params: Any = None,
       compute: Mapping[str, Any] | None = None, outputs: Mapping[str, Output] | None = None, shared_mem: Any = 0,
       dtypes: Mapping[str, Any] | None = None, contiguous: Any = True, backward: Callable | None = None,
       setup_context: Callable | None = None, signature: str | None = None) -> Any:
    """Registers ``name`` (``"namespace::name"``) as a torch operator that launches ``kernel`` and returns it
    (``torch.ops.namespace.name.default``).

    kernel: a Function (registered for its device's kind: CUDA/ROCm or CPU), or a mapping ``{"cuda": k, "cpu": k}``
        whose values are Functions or functions of a ``torch.device`` returning the Function for that device
        (called once per device, at its first use; ``signature=`` then gives the signature if no Function does).
    params: the names of the kernel's arguments, in order (a comma-separated string or a sequence).
    compute: ``{name: value}`` for kernel arguments the operator computes instead of taking: ``numel("x")``,
        ``cdiv("n", 4)`` (written inline) or a function of other arguments by their names (``lambda x: x.shape[0]``).
    outputs: ``{name: output(...)}`` for ``p`` arguments the operator allocates and returns.
    grid, block: ints, tuples of up to 3 ints, ``cdiv("n", 256)`` or functions of the arguments by their names
        (``grid=lambda n, m: (n, m)``); a grid with a 0 extent skips the launch (nothing to do).
    shared_mem: bytes of dynamic shared memory, or a function of the arguments.
    dtypes: ``{name: dtype}`` checked at each call (the kernel gets raw pointers).
    contiguous: which tensor arguments the kernel takes contiguous (True: all, the default; False: none; or names):
        a ``cp`` one that is not is copied (``x.contiguous()``), a ``p`` one is refused.
    backward, setup_context: autograd through ``torch.library.register_autograd`` (an operator that writes none
        of its arguments: its results are outputs).
    """
    kernels, sig = _kernels(name, kernel, signature)
    spec = OpSpec(name, sig, params=params, compute=compute, outputs=outputs, grid=grid, block=block,
                  shared_mem=shared_mem, dtypes=dtypes, contiguous=contiguous)
    _builtin_dtypes(spec, kernels)
    env = _common_env(spec)
    written = spec.mutated()
    if backward is not None and written:
        verb = "is a p argument" if len(written) == 1 else "are p arguments"
        raise InvalidArgumentError(f"{spec.call}: backward= needs an operator that writes none of its arguments, and "
                                   f"{', '.join(written)} {verb}: write the result into an output (outputs=) instead")
    if setup_context is not None and backward is None:
        raise InvalidArgumentError(f"{spec.call}: setup_context= without backward=")
    if name in _libs:
        raise InvalidArgumentError(f"{spec.call}: already made here; dlstream.torch.remove({name!r}) first")
    lib = torch.library.Library(spec.ns, "FRAGMENT")
    try:
        try:
            lib.define(spec.schema(), tags=_tags())
        except RuntimeError as e:
            raise InvalidArgumentError(f"{spec.call}: torch refused the schema {spec.schema()!r}: {e}") from None
        for key, k in kernels.items():
            lib.impl(spec.name, _impl(spec, key, k, sig, env), key)
        fake = _build(spec, "fake", spec.fake_source(), env)
        torch.library.register_fake(name, fake, lib=lib)
        if backward is not None:
            torch.library.register_autograd(name, backward, setup_context=setup_context, lib=lib)
    except BaseException:
        lib._destroy()
        raise
    _libs[name] = lib
    return getattr(getattr(torch.ops, spec.ns), spec.name).default


def remove(name: str) -> None:
    """Unregisters an operator made by op() (its implementations, fake and autograd registrations)."""
    lib = _libs.pop(name, None)
    if lib is None:
        raise InvalidArgumentError(f"dlstream.torch.remove({name!r}): no operator of that name was made here")
    lib._destroy()


# ---- what op() puts together ----

def _key_of(device: str) -> str:
    return "CPU" if device.startswith("cpu") else "CUDA"


def _kernels(name: str, kernel: Any, signature: str | None) -> tuple[dict[str, Any], str]:
    """{"CUDA" | "CPU": Function or factory}, and the signature they share."""
    call = f"dlstream.torch.op({name!r})"
    if isinstance(kernel, Function):
        kernels = {_key_of(kernel.device): kernel}
    elif isinstance(kernel, Mapping) and kernel:
        kernels = {}
        for k, v in kernel.items():
            key = {"cuda": "CUDA", "rocm": "CUDA", "hip": "CUDA", "cpu": "CPU"}.get(str(k).lower())
            if key is None:
                raise InvalidArgumentError(f"{call}: kernel[{k!r}]: the keys are 'cuda' (ROCm builds too) and 'cpu'")
            if isinstance(v, Function) and _key_of(v.device) != key:
                raise InvalidArgumentError(f"{call}: kernel[{k!r}] is a Function of {v.device}")
            if not isinstance(v, Function) and not callable(v):
                raise ArgumentTypeError(f"{call}: kernel[{k!r}]={v!r}: expected a Function or a function of the "
                                        "device returning one")
            kernels[key] = v
    else:
        raise ArgumentTypeError(f"{call}: kernel={kernel!r}: expected a dlstream Function or a mapping "
                                "{'cuda': ..., 'cpu': ...} of Functions or functions of the device")
    given = {f.signature for f in kernels.values() if isinstance(f, Function)}
    if None in given:
        raise InvalidArgumentError(f"{call}: the kernel has no signature: make it with one "
                                   "(Module.function(name, 'u64,f32,cp,p'))")
    sigs = {s for s in given if s is not None}
    if signature is not None:
        sigs.add(canonical_signature(call, signature))
    if len(sigs) > 1:
        raise InvalidArgumentError(f"{call}: the kernels' signatures differ: {sorted(sigs)}")
    if not sigs:
        raise InvalidArgumentError(f"{call}: signature= is needed when every kernel is a function of the device")
    return kernels, sigs.pop()


def _dtype(spec: OpSpec, where: str, d: Any) -> torch.dtype:
    if isinstance(d, torch.dtype):
        return d
    got = getattr(torch, d, None) if isinstance(d, str) else None
    if not isinstance(got, torch.dtype):
        raise ArgumentTypeError(f"{spec.call}: {where}={d!r}: expected a torch dtype or its name ('float32')")
    return got


def _builtin_dtypes(spec: OpSpec, kernels: dict[str, Any]) -> None:
    """A built-in's tensors of one element type (its table's: dls_axpy_f32's x and y are float32) are checked at
    each call, by the implementation and the fake alike, as dtypes= would check them; dtypes= or an output's dtype
    that says otherwise is refused here. (Every launch checks them too: Function.launch.)"""
    builtins = {f.name for f in kernels.values() if isinstance(f, Function) and f._builtin}
    if len(builtins) != 1:
        return
    bname = builtins.pop()
    table = next(b for b in _dlstream._builtins() if b["name"] == bname)
    for n, arg in zip(spec.params, table["args"]):
        want = arg["types"]
        t = getattr(torch, want, None) if arg["rule"] and arg["rule"][0] == "exact" else None
        if not isinstance(t, torch.dtype):
            continue  # a scalar, or types a rule gives (elem_size bytes, a descriptor's): the launch checks them
        given = spec.dtypes.get(n) if n in spec.tensors else spec.outputs[n].dtype if n in spec.outputs else None
        where = f"dtypes[{n!r}]" if n in spec.tensors else f"outputs[{n!r}].dtype"
        if given is not None and _dtype(spec, where, given) != t:
            raise InvalidArgumentError(f"{spec.call}: {where}={given!r}, but the built-in {bname} takes {want} there")
        if n in spec.tensors:
            spec.dtypes[n] = t


def _tags() -> tuple:
    # Compiled graphs hand the kernel its arguments with the strides eager code gave (contiguous stays contiguous).
    strides = getattr(torch.Tag, "needs_exact_strides", None) or torch.Tag.needs_fixed_stride_order
    return (strides, torch.Tag.pt2_compliant_tag)


def _common_env(spec: OpSpec) -> dict[str, Any]:
    """The globals of the generated implementation and fake that every dispatch key shares."""
    env = spec.env_names()
    expected = {n: _dtype(spec, f"dtypes[{n!r}]", d) for n, d in spec.dtypes.items()}
    for n, t in expected.items():
        env["_dt_" + n] = t
    for i, (n, o) in enumerate(spec.outputs.items()):
        if o.dtype is not None:
            env[f"_odt{i}"] = _dtype(spec, f"outputs[{n!r}].dtype", o.dtype)

    def bad_dtype(name: str, t: torch.Tensor) -> None:  # the generated code calls these on a refusal
        raise ArgumentTypeError(f"{spec.qualname}({name}=a {t.dtype} tensor): expected {expected[name]}")

    def bad_layout(name: str, t: torch.Tensor) -> None:
        raise InvalidTensorError(f"{spec.qualname}({name}=a tensor of shape {tuple(t.shape)} and strides "
                                 f"{t.stride()}): the kernel writes it and takes it contiguous")

    env.update(_bad_dtype=bad_dtype, _bad_layout=bad_layout, _empty=torch.empty, _zeros=torch.zeros,
               _empty_like=torch.empty_like, _zeros_like=torch.zeros_like, _contiguous=torch.contiguous_format)
    return env


def _impl(spec: OpSpec, key: str, kernel: Any, sig: str, common: dict[str, Any]) -> Callable:
    env = dict(common)
    per_device = not isinstance(kernel, Function)
    if per_device:
        launches: dict[int, Callable] = {}

        def resolve(t: torch.Tensor) -> Callable:
            f = kernel(t.device)
            if not isinstance(f, Function) or f.signature != sig:
                raise InvalidArgumentError(f"{spec.qualname}: the kernel function gave {f!r} for {t.device}: "
                                           f"expected a Function with signature {sig!r}")
            launches[t.get_device()] = f.launch
            return f.launch

        env.update(_launches=launches, _resolve=resolve)
    else:
        env["_launch"] = kernel.launch
    where = "" if per_device else kernel.device

    def failed(e: Error, grid: Any) -> None:
        if grid == 0 or (isinstance(grid, tuple) and 0 in grid):
            return  # nothing to launch (an empty tensor)
        msg = spec.describe_error(str(e))
        if isinstance(e, InvalidDeviceError) and where:
            msg += (f" (the kernel was given as a Function of {where}; give a function of the device to run on "
                    "every device: kernel={'cuda': lambda device: ...})")
        raise type(e)(msg) from None

    def lifted(impl: Callable, *args: Any) -> Any:
        with use_stream(None):
            return impl(*args)

    env.update(_ctx_get=_ctx_get, _lifted=lifted, _Error=Error, _failed=failed)
    sync = key == "CPU"
    if sync:  # a torch CPU operator's results are there when it returns; dlstream's CPU streams are threads
        env["_sync"] = Stream.legacy("cpu").synchronize
    return _build(spec, f"impl {key}", spec.impl_source(per_device=per_device, sync=sync), env)


def _build(spec: OpSpec, what: str, source: str, env: dict[str, Any]) -> Callable:
    filename = f"<dlstream.torch {spec.qualname} {what}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # readable tracebacks
    code = compile(source, filename, "exec")
    g = dict(env, __name__=f"dlstream.torch.{spec.ns}.{spec.name}")
    exec(code, g)  # noqa: S102 - the source is made from checked identifiers and ints only
    fn = g["impl" if what.startswith("impl") else "fake"]
    fn.__qualname__ = fn.__name__ = f"{spec.name}_{what.replace(' ', '_')}"
    return fn
