# SPDX-License-Identifier: Apache-2.0
"""Numbers that cross from Python into a narrower C type are checked: out-of-range values raise OutOfRangeError (an
InvalidArgumentError, so a ValueError, and an OverflowError, as NumPy raises) naming the call, the argument, the
value and the range; nothing wraps. Messages name the call and dtypes by name, cut long reprs short, suggest what
fits what the user wrote, and keep what the user's code raised as __cause__."""
import numpy as np
import pytest

import dlstream
from conftest import CPU, settle

Range = dlstream.OutOfRangeError


def test_out_of_range_error_is_value_and_overflow_error():
    assert issubclass(Range, dlstream.InvalidArgumentError)
    assert issubclass(Range, ValueError) and issubclass(Range, OverflowError)


@pytest.mark.parametrize("dtype, value, text", [
    ("int8", 300, r"fill\(value=300\): out of range for int8 \(-128 to 127\)"),
    ("int8", -129, "int8"),
    ("uint8", -1, r"out of range for uint8 \(0 to 255\)"),
    ("int64", 2**70, r"out of range for int64"),
    ("uint64", 2**64, r"out of range for uint64 \(0 to 18446744073709551615\)"),
    ("int32", float("inf"), "an infinity has no int32 value"),
    ("int16", 1e10, "out of range for int16"),
    ("float32", 1e300, "out of range for float32"),
    ("float16", 1e5, "out of range for float16"),
    ("bfloat16", 1e39, "out of range for bfloat16"),
    ("float64", 2**1100, "out of range"),
])
def test_fill_refuses_what_numpy_refuses(dtype, value, text, no_leaks):
    t = dlstream.empty(4, dtype, device=CPU)
    with pytest.raises(Range, match=text):
        dlstream.fill(t, value)
    with pytest.raises(OverflowError):
        dlstream.fill(t, value)
    t.close()
    settle()


@pytest.mark.parametrize("dtype, value, want", [("int8", 127, 127), ("int8", -128, -128), ("uint64", 2**64 - 1, 2**64 - 1),
                                                ("int64", -2**63, -2**63), ("bool", 2**70, True), ("int32", -7.9, -7),
                                                ("float32", float("inf"), np.inf), ("uint8", np.int64(200), 200)])
def test_fill_takes_the_edges(dtype, value, want, no_leaks):
    t = dlstream.empty(4, dtype, device=CPU)
    dlstream.fill(t, value)
    settle()
    assert (np.from_dlpack(t) == np.array(want, dtype=dtype)).all()
    t.close()


def test_launch_dimensions_name_the_real_limit(no_leaks):
    spin = dlstream.builtin_function("dls_spin", CPU)
    with pytest.raises(Range, match=r"block=1099511627776\): out of range: a dimension is 1 to 4294967295"):
        spin.launch(1, 2**40, 0)
    with pytest.raises(Range, match=r"grid\[1\]=0\): out of range"):
        spin.launch((1, 0), 1, 0)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"block=1.5\): expected an int"):
        spin.launch(1, 1.5, 0)
    with pytest.raises(Range, match=r"shared_mem=-1\)"):
        spin.launch(1, 1, 0, shared_mem=-1)
    spin.launch(np.int64(1), (np.int32(1), 1), 0)  # NumPy integers are ints
    settle()


def test_launch_scalars_and_addresses(no_leaks):
    axpy = dlstream.builtin_function("dls_axpy_f32", CPU)
    x = np.ones(4, np.float32)
    with pytest.raises(Range, match=r"args\[1\]=1e\+300\): out of range for a f32 argument"):
        axpy.launch(1, 4, 4, 1e300, x, x)
    f = dlstream.builtin_function("dls_fill", CPU, signature="p,u64,u32,u64")
    with pytest.raises(Range, match=r"args\[0\]=-1\): out of range: an address"):
        f.launch(1, 1, -1, 0, 4, 0)
    with pytest.raises(Range, match=r"args\[2\]=4294967296\): out of range for a u32 argument \(0 to 4294967295\)"):
        f.launch(1, 1, 0, 0, 2**32, 0)


@pytest.mark.parametrize("call, text", [
    (lambda: dlstream.Stream(True), r"a device index is an int, not bool"),
    (lambda: dlstream.Stream((2**32 + 1, 0)), r"out of range: a DLPack device type"),
    (lambda: dlstream.Stream(("cuda", 2**70)), r"out of range: a device index is 0 to 65535"),
    (lambda: dlstream.Stream(CPU, 2**40), r"Stream\(priority=1099511627776\): out of range"),
    (lambda: dlstream.spin(-1, device=CPU), r"spin\(seconds=-1\): out of range: a spin lasts 0 to 3600 seconds"),
    (lambda: dlstream.spin(float("nan"), device=CPU), r"spin\(seconds=nan\): out of range"),
    (lambda: dlstream.spin("a", device=CPU), r"^spin\(seconds='a'\): expected a number"),
    (lambda: dlstream.Latch(CPU).wait(timeout=1e9), r"Latch.wait\(timeout=1000000000.0\): out of range"),
    (lambda: dlstream.capture(mode=5), r"capture\(mode=5\): out of range: a capture mode is 0 to 2"),
    (lambda: dlstream.capture(mode=True), r"the mode is 'global', 'thread_local' or 'relaxed'"),
])
def test_arguments_out_of_their_range(call, text, no_leaks):
    with pytest.raises((dlstream.Error, TypeError, ValueError), match=text):
        call()
    settle()


@pytest.mark.parametrize("kw, text", [
    ({"max_version": (2**70, 0)}, r"max_version\[0\]=1180591620717411303424\): out of range"),
    ({"dl_device": (1, 2**70)}, r"dl_device\[1\]=.*out of range"),
    ({"dl_device": (1, "0")}, r"dl_device\[1\]='0'\): expected an int"),
])
def test_dlpack_export_arguments(kw, text, no_leaks):
    t = dlstream.empty(4, device=CPU)
    with pytest.raises((Range, dlstream.ArgumentTypeError), match=text):
        t.__dlpack__(**kw)
    t.close()


def test_messages_name_dtypes_the_call_and_cut_reprs(no_leaks):
    x = np.ones(4, np.int32)
    with pytest.raises(dlstream.InvalidArgumentError, match=r"x must be float32 or float64 \(x: int32, 4 elements"):
        dlstream.axpy(1.0, x, x)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"^fill\(value='a'\): expected a number"):
        dlstream.fill(np.zeros(4, np.float32), "a")
    with pytest.raises(dlstream.InvalidArgumentError, match="1001 dimensions; at most 32") as info:
        dlstream.empty([1] * 1001, device=CPU)
    msg = str(info.value)
    assert msg.startswith("empty(shape=[1, 1, 1") and "..." in msg and len(msg) < 300, msg
    t = dlstream.empty(2, "complex128", device=CPU)
    with pytest.raises(dlstream.NotSupportedError, match="complex128 elements are not supported"):
        dlstream.fill(t, 0)
    t.close()


class BadRepr:
    def __repr__(self):
        raise RuntimeError("repr fails")


def test_a_repr_that_raises_still_gives_a_message(no_leaks):
    with pytest.raises(dlstream.ArgumentTypeError, match=r"fill\(dst=<.*BadRepr object at 0x"):
        dlstream.fill(BadRepr(), 1)


def test_read_only_hints_fit_what_was_written(no_leaks):
    a = np.zeros(4, np.float32)
    a.flags.writeable = False
    with pytest.raises(dlstream.ReadOnlyError, match=r"^fill\(dst\): the tensor is read-only and fill writes it$"):
        dlstream.fill(a, 1.0)
    with pytest.raises(dlstream.ReadOnlyError, match=r"axpy\(y\): .* axpy writes it"):
        dlstream.axpy(1.0, a, a)
    settle()


class CAIRaises:
    """An object whose __cuda_array_interface__ property raises: the refusal keeps the error as its cause."""

    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("the array interface is broken")


class IndexRaises:
    def __index__(self):
        raise LookupError("no index today")


def test_protocol_errors_are_chained(no_leaks):
    with pytest.raises(dlstream.ArgumentTypeError, match="expected a tensor") as info:
        dlstream.fill(CAIRaises(), 1.0)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "the array interface is broken" in str(info.value.__cause__)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"fill\(value=.*__index__ failed") as info:
        dlstream.fill(np.zeros(4, np.int32), IndexRaises())
    assert isinstance(info.value.__cause__, LookupError)
    with pytest.raises(dlstream.ArgumentTypeError, match=r"Function.launch\(block=.*") as info:
        dlstream.builtin_function("dls_spin", CPU).launch(1, IndexRaises(), 0)
    assert isinstance(info.value.__cause__, LookupError)


class Interrupts:
    def __index__(self):
        raise KeyboardInterrupt

    def __float__(self):
        raise KeyboardInterrupt


def test_keyboard_interrupt_from_user_code_is_not_wrapped(no_leaks):
    with pytest.raises(KeyboardInterrupt):
        dlstream.fill(np.zeros(4, np.int32), Interrupts())
    with pytest.raises(KeyboardInterrupt):
        dlstream.spin(Interrupts(), device=CPU)
    with pytest.raises(KeyboardInterrupt):
        dlstream.empty([Interrupts()], device=CPU)
