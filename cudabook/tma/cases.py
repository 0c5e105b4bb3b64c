"""Worked tensor-map descriptions: what check_tiled says of each (CASES), and ones whose driver verdict is still
to be learned (PROBES). The tests check the validator against them; tools/record_tma_verdicts.py asks a GPU."""

from __future__ import annotations

import numpy as np


def _strides(shape, itemsize, row_bytes=None):
    """C-order byte strides for ``shape``, optionally with rows padded to ``row_bytes``."""
    strides, step = [], itemsize
    for axis, n in reversed(list(enumerate(shape))):
        if axis == len(shape) - 2 and row_bytes is not None:
            step = row_bytes
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _case(description, expected, dtype, shape, box, row_bytes=None, strides=None, **options):
    itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize  # int8 etc. too: they are test inputs
    kwargs = dict(dtype=dtype, shape=tuple(shape),
                  strides=tuple(strides) if strides is not None else _strides(shape, itemsize, row_bytes),
                  box=tuple(box), **options)
    return (description, kwargs, expected)


# (description, check_tiled keyword arguments, expected rule or None).
# "address" is an OFFSET: a GPU test adds it to a 256-byte-aligned allocation.
# The driver does not read memory when it encodes, so shapes may be larger
# than any real allocation.
F32_256 = dict(dtype="float32", shape=(256, 256))
CASES = [
    _case("f32 256x256, 32x32 box", None, **F32_256, box=(32, 32)),
    _case("f32 rank 1, 1000 elements", None, "float32", (1000,), (256,)),
    _case("f32 rank 1, 1001 elements (odd byte size)", None, "float32", (1001,), (128,)),
    _case("rank 3 f32", None, "float32", (4, 64, 64), (2, 16, 32)),
    _case("rank 5 f32", None, "float32", (2, 2, 2, 8, 16), (1, 2, 2, 8, 16)),
    _case("rank 6", "rank_range", "float32", (2, 2, 2, 2, 8, 16), (1, 1, 2, 2, 8, 16)),
    _case("rank 0", "rank_range", "float32", (), ()),
    _case("shape, strides and box disagree", "rank_mismatch", **F32_256, box=(32, 32, 1)),
    # data types
    _case("f16 box 8 (16 B)", None, "float16", (64, 64), (8, 8)),
    _case("bf16 by name", None, "bfloat16", (64, 64), (16, 16)),
    _case("f64", None, "float64", (64, 64), (16, 16)),
    _case("uint8 inner box 16", None, "uint8", (64, 64), (16, 16)),
    _case("uint16", None, "uint16", (64, 64), (16, 8)),
    _case("uint32", None, "uint32", (64, 64), (16, 4)),
    _case("int32", None, "int32", (64, 64), (16, 4)),
    _case("uint64", None, "uint64", (64, 64), (16, 2)),
    _case("int64", None, "int64", (64, 64), (16, 2)),
    _case("int8 unsupported", "dtype_unsupported", "int8", (64, 64), (16, 16)),
    _case("complex64 unsupported", "dtype_unsupported", "complex64", (64, 64), (16, 2)),
    # option strings
    _case("unknown swizzle '256B'", "unknown_option", **F32_256, box=(32, 32), swizzle="256B"),
    _case("unknown l2_promotion", "unknown_option", **F32_256, box=(32, 32), l2_promotion="512B"),
    _case("l2_promotion none", None, **F32_256, box=(32, 32), l2_promotion="none"),
    _case("l2_promotion 256B", None, **F32_256, box=(32, 32), l2_promotion="256B"),
    # address
    _case("address +16", None, **F32_256, box=(32, 32), address=16),
    _case("address +4", "address_alignment", **F32_256, box=(32, 32), address=4),
    _case("address +8", "address_alignment", **F32_256, box=(32, 32), address=8),
    # dims
    _case("dim 2**32", None, "float32", (4, 2**32), (4, 64)),
    _case("dim 2**32+1", "dim_range", "float32", (4, 2**32 + 1), (4, 64), row_bytes=2**34 + 16),
    _case("dim 0", "dim_range", "float32", (0, 256), (32, 32)),
    # strides
    _case("row stride 1028 (257 f32)", "stride_multiple_16", "float32", (256, 257), (32, 32)),
    _case("row stride padded to 1040", None, "float32", (256, 257), (32, 32), row_bytes=1040),
    _case("outer stride 2**40", "stride_too_large", "float32", (2, 64), (2, 64), row_bytes=2**40),
    _case("outer stride 2**40-16", None, "float32", (2, 64), (2, 64), row_bytes=2**40 - 16),
    _case("innermost stride 8 for f32", "inner_stride_dense", **F32_256, box=(32, 32), strides=(2048, 8)),
    _case("negative row stride (a[::-1])", "stride_negative", **F32_256, box=(32, 32), strides=(-1024, 4)),
    # box
    _case("box 256", None, "float32", (512, 512), (256, 32)),
    _case("box 257", "box_range", "float32", (512, 512), (257, 32)),
    _case("box 0", "box_range", **F32_256, box=(0, 32)),
    _case("box larger than the tensor", None, "float32", (16, 16), (32, 32)),
    _case("f32 inner box 2 (8 B)", "box_inner_multiple_16", **F32_256, box=(32, 2)),
    _case("f32 inner box 4 (16 B)", None, **F32_256, box=(32, 4)),
    _case("f32 inner box 12 (48 B)", None, **F32_256, box=(32, 12)),
    _case("f16 inner box 4 (8 B)", "box_inner_multiple_16", "float16", (64, 64), (8, 4)),
    _case("box 128 KiB", None, **F32_256, box=(128, 256)),
    _case("box 192 KiB", None, **F32_256, box=(192, 256)),
    _case("box 227 KiB (Hopper's opt-in shared memory)", None, **F32_256, box=(227, 256)),
    _case("box 256 KiB with element stride 2 (128 KiB loaded)", None, **F32_256, box=(256, 256),
          element_strides=(2, 1)),
    _case("box 256 KiB", "box_total_bytes", **F32_256, box=(256, 256)),
    # swizzle
    _case("128B swizzle, 128 B inner box", None, **F32_256, box=(32, 32), swizzle="128B"),
    _case("128B swizzle, 256 B inner box", "box_inner_swizzle_span", **F32_256, box=(32, 64), swizzle="128B"),
    _case("64B swizzle, 64 B inner box", None, **F32_256, box=(32, 16), swizzle="64B"),
    _case("64B swizzle, 128 B inner box", "box_inner_swizzle_span", **F32_256, box=(32, 32), swizzle="64B"),
    _case("32B swizzle, 32 B inner box", None, **F32_256, box=(32, 8), swizzle="32B"),
    _case("32B swizzle, 64 B inner box", "box_inner_swizzle_span", **F32_256, box=(32, 16), swizzle="32B"),
    _case("f16 128B swizzle, 64 elements", None, "float16", (128, 128), (64, 64), swizzle="128B"),
    # element strides
    _case("element stride 8", None, **F32_256, box=(32, 32), element_strides=(8, 1)),
    _case("element stride 9", "element_stride_range", **F32_256, box=(32, 32), element_strides=(9, 1)),
    _case("element stride 0", "element_stride_range", **F32_256, box=(32, 32), element_strides=(0, 1)),
    # out-of-bounds fill
    _case("NaN fill f32", None, **F32_256, box=(32, 32), oob_fill="nan"),
    _case("NaN fill bf16", None, "bfloat16", (64, 64), (16, 16), oob_fill="nan"),
    _case("NaN fill int32", "oob_nan_needs_float", "int32", (64, 64), (16, 16), oob_fill="nan"),
    # interleave (NC/8HWC8-style f16 tensors: the innermost axis is the 16 B or 32 B channel chunk)
    _case("16B interleave rank 3", None, "float16", (4, 64, 8), (1, 64, 8), interleave="16B"),
    _case("32B interleave + 32B swizzle", None, "float16", (4, 64, 16), (1, 64, 16),
          interleave="32B", swizzle="32B"),
    _case("32B interleave, no swizzle (docs forbid, driver accepts)", None, "float16", (4, 64, 16),
          (1, 64, 16), interleave="32B"),
    _case("16B interleave rank 2", "interleave_rank", "float16", (64, 8), (64, 8), interleave="16B"),
    _case("32B interleave rank 2", "interleave_rank", "float16", (64, 16), (64, 16), interleave="32B",
          swizzle="32B"),
    _case("32B interleave, address +16", "address_alignment", "float16", (4, 64, 16), (1, 64, 16),
          interleave="32B", swizzle="32B", address=16),
    _case("32B interleave, address +32", None, "float16", (4, 64, 16), (1, 64, 16),
          interleave="32B", swizzle="32B", address=32),
    _case("32B interleave, stride 48", "stride_multiple_32", "float16", (4, 64, 16), (1, 64, 16),
          row_bytes=48, interleave="32B", swizzle="32B"),
]

# Descriptions whose driver verdict is not known yet, in the same form as
# CASES; the third item is what check_tiled says today (a guess). A GPU test
# prints what the driver says, without asserting, so the rules can be refined.
PROBES = [
    _case("overlapping rows: 512 B stride, 1024 B rows", None, **F32_256, box=(32, 32), row_bytes=512),
    _case("outer stride 0 (every row the same)", None, **F32_256, box=(32, 32), row_bytes=0),
    _case("box 228 KiB (driver accepts; more than a block's shared memory)", "box_total_bytes", **F32_256,
          box=(228, 256)),
    _case("innermost element stride 9 (docs: ignored)", "element_stride_range", **F32_256, box=(32, 32), element_strides=(1, 9)),
    _case("128B swizzle, 64 B inner box", None, **F32_256, box=(32, 16), swizzle="128B"),
    _case("32B interleave + 64B swizzle", None, "float16", (4, 64, 16), (1, 64, 16), interleave="32B",
          swizzle="64B"),
    _case("16B interleave, 256 B inner box + 32B swizzle", None, "float16", (4, 64, 128), (1, 8, 128),
          interleave="16B", swizzle="32B"),
]
