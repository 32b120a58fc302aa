# SPDX-License-Identifier: Apache-2.0
"""dlstream kernels inside ``jax.jit``: a dlstream Function (a built-in, a cubin/PTX module's kernel, a kernel
compiled from source) becomes a JAX function that lowers to one XLA FFI custom call. XLA runs dlstream's C handler
(``dlstream/xla.h``): on CUDA it launches on XLA's own stream, with no host sync, and may capture the launch into a
command buffer; on the CPU it runs the CPU backend's kernel before the call returns.

Imported only on use (``import dlstream.jax``); it imports JAX. See docs/jax.md.
"""
from __future__ import annotations

import math
import operator
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from . import _dlstream
from ._dlstream import Function, InvalidArgumentError, Latch, OutOfRangeError

__all__ = ["TARGET", "TARGET_NOCAPTURE", "Kernel", "image", "kernel", "latch_wait", "register", "source"]

#: The XLA FFI target dlstream calls lower to, registered for the "cpu" and "CUDA" platforms. On CUDA its handler is
#: command-buffer compatible: XLA may record the launch into a CUDA graph and replay it.
TARGET = "dlstream_launch"
#: The same handler without that trait, for calls XLA must not capture (latch waits, ``kernel(..., capture=False)``).
TARGET_NOCAPTURE = "dlstream_launch_nocapture"

# dlstream/xla.h's protocol.
_OP_LAUNCH, _OP_LATCH_WAIT = 1, 2
_CFG_LEN = 11
_FROM_OPERAND, _FROM_RESULT, _FROM_VALUE = 1, 2, 3
_DEVICE_TYPES = {"cpu": 1, "cuda": 2, "rocm": 10}

# Signature tokens, as Function.launch reads them, and the scalars' packing: (struct format, low, high, the range in
# words: Function.launch's).
_TOKENS = {"p": "p", "ptr": "p", "cp": "cp", "i32": "i32", "int": "i32", "u32": "u32", "i64": "i64", "u64": "u64",
           "size_t": "u64", "f32": "f32", "float": "f32", "f64": "f64", "double": "f64", "b": "bytes",
           "bytes": "bytes"}
_SCALARS = {"i32": ("<i", -2**31, 2**31 - 1, "-2147483648 to 2147483647"),
            "u32": ("<I", 0, 2**32 - 1, "0 to 4294967295"),
            "i64": ("<q", -2**63, 2**63 - 1, "-2**63 to 2**63 - 1"),
            "u64": ("<Q", 0, 2**64 - 1, "0 to 2**64 - 1"),
            "f32": ("<f", None, None, "a finite float32 is at most about 3.4e38; inf and nan pass"),
            "f64": ("<d", None, None, "a float64 is at most about 1.8e308; inf and nan pass")}

# DLPack's type codes, for a built-in's checks (dlstream/dlpack.h): an unknown type is one no built-in takes.
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


def _dl_type(dtype: Any) -> tuple[int, int, int]:
    """(code, bits, lanes) of a NumPy / JAX dtype, as the XLA handler reads an XLA buffer's type."""
    d = np.dtype(dtype)
    if d.name == "bfloat16":
        return 4, 16, 1
    if d.kind in _DL_CODES and d.name != "object" and not d.name.startswith("float8"):
        return _DL_CODES[d.kind], d.itemsize * 8, 1
    return 3, 0, 1

_Tracer = getattr(jax.core, "Tracer", None) or jax._src.core.Tracer
_lock = threading.Lock()
_registered = False


def register() -> None:
    """Registers dlstream's XLA FFI handlers as ``TARGET`` and ``TARGET_NOCAPTURE`` for the "cpu" and "CUDA"
    platforms, once per process (every call does it; calling it again does nothing). The handlers run at the
    instantiate stage (checks) and the execute stage (the launch); prepare and initialize are left out, so XLA
    calls nothing extra per run."""
    global _registered
    with _lock:
        if _registered:
            return
        handlers = _dlstream._xla_handlers()
        for target, platform, key in ((TARGET, "cpu", "cpu"), (TARGET, "CUDA", "cuda"),
                                      (TARGET_NOCAPTURE, "cpu", "cpu"), (TARGET_NOCAPTURE, "CUDA", "cuda_nocapture")):
            bundle = {"instantiate": handlers[key], "execute": handlers[key]}
            jax.ffi.register_ffi_target(target, bundle, platform=platform, api_version=1)
        _registered = True


def _device(obj: Any, what: str) -> tuple[int, int]:
    kind, _, index = str(obj.device).partition(":")
    if kind not in _DEVICE_TYPES:
        raise InvalidArgumentError(f"dlstream.jax: the {what} is on {obj.device}, which XLA does not run")
    return _DEVICE_TYPES[kind], int(index or 0)


def _parse_signature(sig: str | Sequence[str], name: str) -> list[str]:
    parts = [t.strip() for t in sig.split(",")] if isinstance(sig, str) else [str(t).strip() for t in sig]
    if parts == [""]:
        parts = []
    kinds = []
    for i, t in enumerate(parts):
        if t not in _TOKENS:
            raise InvalidArgumentError(f"dlstream.jax.kernel({name}, signature={sig!r}): token {i} {t!r} is not one "
                                       "of p, cp, i32, u32, i64, u64, f32, f64, bytes")
        kinds.append(_TOKENS[t])
    return kinds


def _dims(value: Any, what: str, name: str) -> tuple[int, int, int]:
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    try:
        dims = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"dlstream.jax.kernel({name}): {what}={value!r} is not an int or a tuple of 1 to 3 ints") \
            from None
    if not 1 <= len(dims) <= 3 or any(not 1 <= d < 2**32 for d in dims):
        raise InvalidArgumentError(f"dlstream.jax.kernel({name}): {what}={value!r} needs 1 to 3 dimensions, each "
                                   "in [1, 2^32)")
    return dims + (1,) * (3 - len(dims))


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.generic, bytes))


def _shape_dtype(spec: Any, what: str) -> jax.ShapeDtypeStruct:
    if not (hasattr(spec, "shape") and hasattr(spec, "dtype")):
        raise TypeError(f"{what}: {spec!r} has no shape and dtype (use jax.ShapeDtypeStruct)")
    return jax.ShapeDtypeStruct(tuple(spec.shape), spec.dtype)


def _nbytes(a: Any) -> int:
    return math.prod(a.shape) * np.dtype(a.dtype).itemsize


def _indexes(v: Any, where: str) -> tuple[int, ...]:
    """Argument indexes: one int or a sequence of them (as jax.jit's donate_argnums), sorted, each once."""
    try:
        items = [v] if hasattr(v, "__index__") else list(v)
        if any(isinstance(i, (str, bytes)) for i in items):
            raise TypeError
        return tuple(sorted({operator.index(i) for i in items}))
    except TypeError:
        raise TypeError(f"{where}: expected argument indexes: an int or a sequence of ints") from None


class Kernel:
    """A dlstream Function as a JAX function; made by :func:`kernel`."""

    def __init__(self, function: Any, out_shapes: Any = None, *, grid: Any = 1, block: Any = 1,
                 in_place: int | Sequence[int] = (), signature: str | Sequence[str] | None = None,
                 shared_mem: int = 0, vmap_method: str = "sequential", capture: bool = True) -> None:
        function = self._per_device_kernel(function)
        if not isinstance(function, Function):
            raise TypeError(f"dlstream.jax.kernel(function={function!r}): expected a dlstream.Function "
                            "(Module.function, dlstream.builtin_function), a built-in's name, source(...), "
                            "image(...) or a function of the device")
        self.function = function  # kept alive: its module too
        name = function.name
        sig = function.signature if signature is None else signature
        if sig is None:
            raise InvalidArgumentError(f"dlstream.jax.kernel({name}): the function has no signature; give one, "
                                       "e.g. signature='u64,f32,cp,p'")
        self.kinds = _parse_signature(sig, name)
        self.in_place = _indexes(in_place, f"dlstream.jax.kernel({name}, in_place={in_place!r})")
        for i in self.in_place:
            if not 0 <= i < len(self.kinds) or self.kinds[i] != "p":
                raise InvalidArgumentError(f"dlstream.jax.kernel({name}, in_place={self.in_place}): argument {i} "
                                           f"is not a 'p' argument of the signature {','.join(self.kinds)}")
        # The caller passes every argument but the outputs: 'p' arguments not in place, which XLA allocates.
        self.outputs = [i for i, k in enumerate(self.kinds) if k == "p" and i not in self.in_place]
        self.passed = [i for i in range(len(self.kinds)) if i not in self.outputs]
        self.out_shapes, self.grid, self.block = out_shapes, grid, block
        if self.outputs and out_shapes is None:
            raise InvalidArgumentError(f"dlstream.jax.kernel({name}): arguments {self.outputs} are outputs ('p' "
                                       "and not in_place): give out_shapes")
        if not self.outputs and out_shapes is not None and not (isinstance(out_shapes, (list, tuple))
                                                                 and not out_shapes):
            raise InvalidArgumentError(f"dlstream.jax.kernel({name}): out_shapes given, but the kernel has no outputs "
                                       f"(every 'p' argument of {','.join(self.kinds)} is in_place); leave it out")
        self.shared_mem = operator.index(shared_mem)
        if not 0 <= self.shared_mem < 2**32:
            raise InvalidArgumentError(f"dlstream.jax.kernel({name}): shared_mem={shared_mem!r} is out of range")
        if grid is None:  # the core's own grid: a built-in's, chosen at each execution
            if not function._builtin:
                raise InvalidArgumentError(f"dlstream.jax.kernel({name}, grid=None): only a built-in runs on the "
                                           "core's own grid; give this kernel a grid and a block")
            if block != 1 or self.shared_mem != 0:
                raise InvalidArgumentError(f"dlstream.jax.kernel({name}, grid=None, block={block!r}, shared_mem="
                                           f"{shared_mem!r}): with grid=None the core chooses the grid and the block; "
                                           "leave block and shared_mem out")
        elif not callable(grid):
            _dims(grid, "grid", name)
        if not callable(block):
            _dims(block, "block", name)
        self.vmap_method = vmap_method
        self.target = TARGET if capture else TARGET_NOCAPTURE
        self.device = _device(function, f"function {name}")

    def __repr__(self) -> str:
        return (f"dlstream.jax.Kernel({self.function.name!r}, signature={','.join(self.kinds)!r}, "
                f"in_place={self.in_place}, outputs={self.outputs})")

    def _out_specs(self, args: tuple[Any, ...]) -> list[jax.ShapeDtypeStruct]:
        name = f"dlstream.jax.kernel({self.function.name})"
        spec = self.out_shapes(*args) if callable(self.out_shapes) else self.out_shapes
        specs = list(spec) if isinstance(spec, (list, tuple)) else [spec]
        if len(specs) != len(self.outputs):
            raise InvalidArgumentError(f"{name}: out_shapes gives {len(specs)} shapes for the {len(self.outputs)} "
                                       f"outputs (arguments {self.outputs})")
        return [_shape_dtype(s, f"{name}: out_shapes") for s in specs]

    def _value(self, kind: str, v: Any, i: int) -> bytes:
        name = f"dlstream.jax.kernel({self.function.name})"
        if isinstance(v, _Tracer):
            raise TypeError(f"{name}: argument {i} ({kind}) is a traced value; scalar arguments are compile-time "
                            "constants (a Python number), pass an array for a value computed under jit")
        if kind == "bytes":
            if not isinstance(v, (bytes, bytearray)) or not 0 < len(v) <= 4096:
                raise TypeError(f"{name}: argument {i} expects non-empty bytes (at most 4096), got {v!r}")
            return bytes(v)
        if kind in ("p", "cp"):  # a raw address (or None): passed as is, on the caller's word
            if self.function._builtin and (v is None or isinstance(v, (int, np.integer))):
                raise InvalidArgumentError(
                    f"{name}: argument {i} ({kind}) is {v!r}: a built-in takes arrays here, whose sizes and types "
                    "the handler checks it against; an address (or None) has neither (kernels of modules and from "
                    "source take one on the caller's word)")
            if v is None:
                return struct.pack("<Q", 0)
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= int(v) < 2**64:
                return struct.pack("<Q", int(v))
            raise TypeError(f"{name}: argument {i} ({kind}) expects an array, an int address or None, got {v!r}")
        fmt, lo, hi, words = _SCALARS[kind]
        if lo is None:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise TypeError(f"{name}: argument {i} ({kind}) expects a number, got {v!r}")
            try:  # Function.launch's rule: a finite value that rounds to an infinity is out of range
                return struct.pack(fmt, float(v))
            except OverflowError:
                raise OutOfRangeError(f"{name}: argument {i}={v!r} is out of range for {kind} ({words})") from None
        try:
            x = operator.index(v)
        except TypeError:
            raise TypeError(f"{name}: argument {i} ({kind}) expects an int, got {v!r}") from None
        assert hi is not None
        if not lo <= x <= hi:
            raise OutOfRangeError(f"{name}: argument {i}={x} is out of range for {kind} ({words})")
        return struct.pack(fmt, x)

    def _check_builtin(self, checked: list[Any]) -> None:
        """A built-in's own checks at trace time, on the arrays' sizes and types and the values' bytes: what the
        handler checks again at execution (argument kinds, element types, counts and descriptors inside arrays)."""
        if self.function._builtin:
            _dlstream._builtin_check(self.function.handle, f"dlstream.jax.kernel({self.function.name})",
                                     tuple(checked))

    def __call__(self, *args: Any) -> Any:
        name = f"dlstream.jax.kernel({self.function.name})"
        if len(args) != len(self.passed):
            raise TypeError(f"{name}: takes {len(self.passed)} arguments (the signature's {len(self.kinds)} less "
                            f"the outputs {self.outputs}), {len(args)} given")
        register()
        operands: list[Any] = []
        results: list[jax.ShapeDtypeStruct] = []
        aliases: dict[int, int] = {}
        entries = [0] * len(self.kinds)
        vals = bytearray()
        checked: list[Any] = []  # per argument: (nbytes, code, bits, lanes) of an array, or a value's bytes
        out_specs = iter(self._out_specs(args) if self.outputs else [])
        given = dict(zip(self.passed, args))
        for i, kind in enumerate(self.kinds):
            if i in self.outputs or i in self.in_place:
                spec = next(out_specs) if i in self.outputs else None
                if i in self.in_place:
                    a = given[i]
                    if not _is_array(a):
                        raise TypeError(f"{name}: argument {i} is in place and expects an array, got {a!r}")
                    aliases[len(operands)] = len(results)
                    operands.append(a)
                    spec = jax.ShapeDtypeStruct(tuple(a.shape), a.dtype)
                assert spec is not None
                checked.append((_nbytes(spec), *_dl_type(spec.dtype)))
                entries[i] = _FROM_RESULT | len(results) << 8
                results.append(spec)
            elif kind in ("p", "cp") and _is_array(given[i]):
                checked.append((_nbytes(given[i]), *_dl_type(given[i].dtype)))
                entries[i] = _FROM_OPERAND | len(operands) << 8
                operands.append(given[i])
            else:
                raw = self._value(kind, given[i], i)
                vals.extend(b"\0" * (-len(vals) % 8))  # each value 8-byte aligned
                entries[i] = _FROM_VALUE | len(vals) << 8 | len(raw) << 32
                vals.extend(raw)
                checked.append(raw)
        self._check_builtin(checked)
        if self.grid is None:
            grid = block = (0, 0, 0)  # the handler runs the built-in as dlstream's own calls do
        else:
            grid = _dims(self.grid(*args) if callable(self.grid) else self.grid, "grid", self.function.name)
            block = _dims(self.block(*args) if callable(self.block) else self.block, "block", self.function.name)
        handle = int(np.array(self.function.handle, np.uint64).view(np.int64))
        cfg = np.array([_OP_LAUNCH, handle, *grid, *block, self.shared_mem, *self.device], np.int64)
        attrs = {"dls_cfg": cfg, "dls_args": np.array(entries, np.int64), **self._device_table()}
        if vals:
            attrs["dls_vals"] = np.frombuffer(bytes(vals), np.uint8)
        call = jax.ffi.ffi_call(self.target, results, input_output_aliases=aliases or None,
                                vmap_method=self.vmap_method, has_side_effect=not results)
        out = call(*operands, **attrs)
        if not results:
            return None
        return out[0] if len(out) == 1 else tuple(out)


    # ---- a kernel for every device XLA runs the call on (shard_map, pmap, a sharded jit) ----

    def _per_device_kernel(self, given: Any) -> Any:
        """Notes how to make the kernel's Function on any device (a built-in's name, source(...), image(...), a
        function of the device) and returns its Function on the first device of JAX's backend; a Function is
        returned as it is (bound to its device: the handler refuses it on another)."""
        self._of_device: Callable[[str], Function] | None = None
        self._functions: dict[int, Function | None] = {}
        self._cpu_function: Function | None = None  # dls_cpu_fn's (_device_table), made at the first call
        self._cpu_asked = False
        if isinstance(given, Function) or not (isinstance(given, str) or callable(given)):
            return given
        self._of_device = (lambda d: _dlstream.builtin_function(given, d)) if isinstance(given, str) else given
        backend = jax.default_backend()
        self._kind = "cpu" if backend == "cpu" else "rocm" if "rocm" in str(jax.devices()[0].client.platform_version) \
            else "cuda"
        self._count = jax.local_device_count()
        first = self._function_of(0)
        if first is None:
            raise InvalidArgumentError(f"dlstream.jax.kernel({given!r}): no function for {self._kind}:0: "
                                       f"{self._why}")
        return first

    def _function_of(self, index: int) -> Function | None:
        if index not in self._functions:
            self._why = ""
            try:
                fn = self._of_device(f"{self._kind}:{index}") if self._of_device is not None else None
            except Exception as e:  # noqa: BLE001 - a device the kernel cannot be made for: the handler says so
                fn, self._why = None, f"{type(e).__name__}: {e}"
            if fn is not None and not isinstance(fn, Function):
                raise TypeError(f"dlstream.jax.kernel: the function of the device returned {fn!r} for "
                                f"{self._kind}:{index}, not a dlstream.Function")
            self._functions[index] = fn
        return self._functions[index]

    def _device_table(self) -> dict[str, Any]:
        """dls_fns: the function of each of JAX's devices, by XLA's ordinal (0 for one it cannot be made for); and
        where JAX's backend is a GPU's, dls_cpu_fn: the kernel's function on dlstream's CPU device (a built-in's CPU
        twin), for a call XLA runs on its CPU platform (jax.default_device(cpu), a jit on the CPU)."""
        if self._of_device is None:
            return {}
        fns = [self._function_of(i) for i in range(self._count)]
        handles = [int(np.array(f.handle if f is not None else 0, np.uint64).view(np.int64)) for f in fns]
        table = {"dls_fns": np.array(handles, np.int64)}
        if self._kind != "cpu":
            if not self._cpu_asked:
                self._cpu_asked = True
                try:
                    fn: Any = self._of_device("cpu:0")
                except Exception:  # noqa: BLE001 - no CPU kernel (from source): the handler refuses a CPU call
                    fn = None
                self._cpu_function = fn if isinstance(fn, Function) else None
            if self._cpu_function is not None:
                table["dls_cpu_fn"] = np.array([self._cpu_function.handle], np.uint64).view(np.int64)
        return table


def source(code: str, name: str, signature: str | Sequence[str] | None = None, *,
           options: str | Sequence[str] = ()) -> Callable[[str], Function]:
    """A kernel from source for :func:`kernel`, compiled for each device XLA runs it on (``Module.from_source``;
    the compile cache keeps one image per target) and found there by ``name``."""
    def of_device(device: str) -> Function:
        return _dlstream.Module.from_source(code, options=options, device=device).function(name, signature)
    return of_device


def image(data: bytes, name: str, signature: str | Sequence[str] | None = None) -> Callable[[str], Function]:
    """A kernel of a module image (cubin, fatbin or PTX bytes) for :func:`kernel`, loaded on each device XLA runs it
    on and found there by ``name``."""
    def of_device(device: str) -> Function:
        return _dlstream.Module(data, device=device).function(name, signature)
    return of_device


def kernel(function: Function | str | Callable[[str], Function], out_shapes: Any = None, *, grid: Any = 1,
           block: Any = 1, in_place: int | Sequence[int] = (), signature: str | Sequence[str] | None = None,
           shared_mem: int = 0, vmap_method: str = "sequential", capture: bool = True) -> Kernel:
    """``function`` as a JAX function usable under ``jax.jit``, ``vmap`` and with donated buffers.

    Given once for every device XLA runs the call on (``shard_map``, ``pmap``, a sharded ``jit``): a built-in's
    name (``"dls_axpy_f32"``), :func:`source`, :func:`image`, or a function of the device (a device string such
    as ``"cuda:1"`` → its ``Function``); the call then carries each device's Function and XLA's device picks its
    own. A ``Function`` is bound to its device: run on another, the call fails when XLA instantiates it.

    The kernel's arguments follow its signature (``function.signature``, or ``signature=``): ``cp`` takes an array
    (read), a scalar kind a Python number (a compile-time constant), ``bytes`` a bytes object. A ``p`` argument
    named in ``in_place`` takes an array and returns its new value (aliased to the input: XLA copies only when
    the input is not donated); every other ``p`` argument is an output: the caller passes nothing for it, and
    ``out_shapes`` (a ``jax.ShapeDtypeStruct``, a sequence of them, or a callable taking the call's arguments and
    returning them) gives its shape and dtype. The call returns the ``p`` arguments' arrays in signature order
    (one array alone, else a tuple). ``grid`` and ``block`` are ints, tuples, or callables of the call's
    arguments, evaluated at trace time (shapes are static there); for a built-in, ``grid=None`` runs it as
    dlstream's own calls do (``dlstream.fill`` ...): on the grid the core sizes to the work, through its faster
    twin where one applies (block and shared_mem then stay unset). ``vmap_method`` is ``jax.ffi.ffi_call``'s;
    "sequential" (the default) runs the kernel once per batch element, which is right for any kernel. With
    ``capture=False`` XLA never records the launch into a command buffer (a CUDA graph): the handler runs at
    every execution."""
    return Kernel(function, out_shapes, grid=grid, block=block, in_place=in_place, signature=signature,
                  shared_mem=shared_mem, vmap_method=vmap_method, capture=capture)


def latch_wait(latch: Latch, *arrays: Any, timeout: float = 10.0) -> Any:
    """Holds XLA's stream on ``latch`` (dlstream.Latch) until the host opens it, or ``timeout`` seconds pass (then
    the latch is marked timed out and the stream goes on). Returns ``arrays`` unchanged (aliased): work that uses
    them runs after the wait. For tests: it makes the order of XLA's work observable. On the CPU the call holds
    the XLA thread that runs it. XLA never captures it into a command buffer (dlstream refuses latch waits in
    captures): it lowers to ``TARGET_NOCAPTURE``."""
    if not isinstance(latch, Latch):
        raise TypeError(f"dlstream.jax.latch_wait(latch={latch!r}): expected a dlstream.Latch")
    if not 0 < timeout <= 3600:
        raise InvalidArgumentError(f"dlstream.jax.latch_wait(timeout={timeout!r}): expected seconds in (0, 3600]")
    if not arrays or not all(_is_array(a) for a in arrays):
        raise TypeError("dlstream.jax.latch_wait(latch, *arrays): give the arrays the wait orders")
    register()
    cfg = np.ones(_CFG_LEN, np.int64)
    cfg[0], cfg[1], cfg[2] = _OP_LATCH_WAIT, latch.handle, int(timeout * 1e9)
    cfg[_CFG_LEN - 2:] = _device(latch, "latch")
    results = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in arrays]
    call = jax.ffi.ffi_call(TARGET_NOCAPTURE, results, input_output_aliases={i: i for i in range(len(arrays))},
                            vmap_method="sequential", has_side_effect=True)
    out = call(*arrays, dls_cfg=cfg)
    return out[0] if len(out) == 1 else tuple(out)
