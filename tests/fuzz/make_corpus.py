#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of fuzz_import (tests/fuzz/corpus/*.bin), encoding inputs as decode() in fuzz_import.c reads them."""
import os
import struct
import sys

MODES = {"versioned": 0, "legacy": 1, "view": 2, "validate": 3}
# Index into k_device_types of fuzz_import.c, with device_id = dev // 16 - 1.
DEV = {"cpu": 16, "cpu1": 42, "cpu-1": 0, "cuda": 18, "cuda_host": 19, "cuda_managed": 20, "rocm": 21,
       "rocm_host": 22, "opencl": 23, "ext_dev": 24, "type0": 25, "type99": 26, "type-1": 27}
FLAGS = {"read_only": 1, "is_copied": 2, "padded": 4}
(kInt, kUInt, kFloat, kOpaque, kBfloat, kComplex, kBool) = range(7)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def num(v):
    """An rd_int() encoding of v."""
    if 0 <= v < 64:
        return bytes([v << 2])
    if -64 < v < 0:
        return bytes([(-v) << 2 | 1])
    return bytes([2]) + u64(v)


def data_sel(kind, arg=0):
    if kind == "arena":
        return bytes([0])
    if kind == "null":
        return bytes([1])
    if kind == "arena+":
        return bytes([2, arg])
    if kind == "raw":
        return bytes([3]) + u64(arg)
    if kind == "top":
        return bytes([4, arg])
    if kind == "low":
        return bytes([5, arg])
    raise ValueError(kind)


def tensor(mode="versioned", producer=False, deleter=True, export=False, major=1, minor=1, flags=0,
           dev="cpu", code=kFloat, bits=32, lanes=1, shape=(4, 8), strides=None, shape_null=False,
           byte_offset=0, data=("arena", 0)):
    head = MODES[mode] | (4 if producer else 0) | (0 if deleter else 8) | (16 if export else 0)
    out = bytes([head, 0 if major == 1 else 240 + major, minor])
    out += bytes([flags]) if flags < 0x80 else bytes([0x80]) + u64(flags)
    out += bytes([DEV[dev], code, bits, lanes if lanes < 255 else 255])
    if lanes >= 255:
        out += u64(lanes)
    out += struct.pack("<b", len(shape) if isinstance(shape, tuple) else shape)
    dims = shape if isinstance(shape, tuple) else ()
    out += bytes([(1 if shape_null else 0) | (2 if strides is not None else 0)])
    for n in dims:
        out += num(n)
    for s in (strides or (0,) * len(dims)):
        out += num(s)
    out += bytes([byte_offset]) if byte_offset < 255 else bytes([255]) + u64(byte_offset)
    out += data_sel(*data)
    return out


SEEDS = {
    "valid_f32": tensor(),
    "valid_f32_export": tensor(export=True, producer=True),
    "legacy_f32": tensor(mode="legacy", export=True),
    "legacy_no_deleter": tensor(mode="legacy", deleter=False),
    "view_read_only": tensor(mode="view", flags=1, export=True),
    "validate_only": tensor(mode="validate"),
    "versioned_no_deleter": tensor(deleter=False, export=True),
    "read_only_export": tensor(flags=FLAGS["read_only"], export=True),
    "int8_strided": tensor(code=kInt, bits=8, strides=(1, 4), export=True),
    "uint1_packed": tensor(code=kUInt, bits=1, shape=(3, 5)),
    "bfloat16": tensor(code=kBfloat, bits=16, byte_offset=2, export=True),
    "complex128": tensor(code=kComplex, bits=128, shape=(2, 2)),
    "bool": tensor(code=kBool, bits=8, export=True),
    "opaque64": tensor(code=kOpaque, bits=64, shape=(3,)),
    "float8_e4m3fn": tensor(code=10, bits=8, export=True),
    "float6_padded_strided": tensor(code=15, bits=6, flags=FLAGS["padded"], strides=(1, 4), export=True),
    "float4_packed": tensor(code=17, bits=4, shape=(7,)),
    "float4_x2": tensor(code=17, bits=4, lanes=2, strides=(8, 1)),
    "float16_x4": tensor(code=kFloat, bits=16, lanes=4),
    "negative_strides": tensor(shape=(8,), strides=(-1,), data=("arena+", 28), export=True),
    "broadcast": tensor(strides=(0, 1)),
    "zero_size_null": tensor(shape=(0, 5), data=("null",), export=True),
    "scalar": tensor(shape=(), shape_null=True, export=True),
    "ndim32": tensor(shape=(1,) * 31 + (3,)),
    "version2": tensor(major=2),
    "version0": tensor(major=0, minor=8),
    "newer_minor": tensor(minor=9),
    "opencl": tensor(dev="opencl"),
    "device_type_99": tensor(dev="type99"),
    "cpu_id1": tensor(dev="cpu1"),
    "cpu_id_negative": tensor(dev="cpu-1"),
    "cuda_fake_pointer": tensor(dev="cuda", data=("raw", 0x7F0000000000)),
    "cuda_host": tensor(dev="cuda_host", producer=True),
    "rocm": tensor(dev="rocm", data=("raw", 0x7F0000000000)),
    "bad_code": tensor(code=18),
    "bad_bits": tensor(code=kFloat, bits=8),
    "lanes0": tensor(lanes=0),
    "ndim_negative": tensor(shape=-1),
    "ndim_33": tensor(shape=(1,) * 33),
    "shape_null": tensor(shape_null=True),
    "shape_negative": tensor(shape=(4, -3)),
    "count_overflow_zero": tensor(shape=(0, 1 << 62, 1 << 62)),
    "stride_overflow": tensor(strides=((1 << 63) - 1, 1)),
    "null_data": tensor(data=("null",)),
    "misaligned": tensor(data=("arena+", 1)),
    "offset_overflow": tensor(byte_offset=(1 << 64) - 8),
    "below_zero": tensor(shape=(100,), strides=(-1,), data=("low", 4)),
    "past_top": tensor(shape=(1000,), data=("top", 4)),
    "packed_strided": tensor(code=17, bits=4, strides=(1, 4)),
    "flags_garbage": tensor(flags=0xFFFFFFFFFFFFFFF0, export=True),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    if len(sys.argv) > 1:
        out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, blob in SEEDS.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(blob)
    print(f"make_corpus.py: wrote {len(SEEDS)} seeds to {out}")


if __name__ == "__main__":
    main()
