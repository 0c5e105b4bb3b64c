"""The tensor-map validator: the rules of ``cuTensorMapEncodeTiled``, checked on the host, each broken one named.

The option tables and limits, the data types TMA knows, the description normalised (NumPy order: outermost
first, strides in bytes), and one function per rule, run in order by :func:`check_tiled`.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

MAX_RANK = 5
MAX_DIM = 2**32  # each globalDim is 1 .. 2**32
STRIDE_LIMIT = 2**40  # each globalStride is < 2**40 bytes
MAX_BOX = 256  # each boxDim is 1 .. 256
MAX_ELEMENT_STRIDE = 8  # each elementStride is 1 .. 8
# Not in the documentation: the driver (580, H100 and H200) rejected a 256 KiB box and accepted 128, 192 and
# 227 KiB boxes, and a 256 KiB box with element stride 2 (128 KiB loaded): the limit counts the elements loaded.
# A 228 KiB box was accepted too: the driver's own bound lies between 228 and 256 KiB. We stop at 227 KiB, the
# most shared memory a Hopper block can have, because a box must land in shared memory to be of any use.
MAX_BOX_BYTES = 227 * 1024

# Allowed option strings -> (driver enum name, size in bytes or None).
SWIZZLES = {
    "none": ("CU_TENSOR_MAP_SWIZZLE_NONE", None),
    "32B": ("CU_TENSOR_MAP_SWIZZLE_32B", 32),
    "64B": ("CU_TENSOR_MAP_SWIZZLE_64B", 64),
    "128B": ("CU_TENSOR_MAP_SWIZZLE_128B", 128),
}
INTERLEAVES = {
    "none": ("CU_TENSOR_MAP_INTERLEAVE_NONE", None),
    "16B": ("CU_TENSOR_MAP_INTERLEAVE_16B", 16),
    "32B": ("CU_TENSOR_MAP_INTERLEAVE_32B", 32),
}
OOB_FILLS = {
    "none": ("CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", None),
    "nan": ("CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA", None),
}
L2_PROMOTIONS = {
    "none": ("CU_TENSOR_MAP_L2_PROMOTION_NONE", None),
    "64B": ("CU_TENSOR_MAP_L2_PROMOTION_L2_64B", 64),
    "128B": ("CU_TENSOR_MAP_L2_PROMOTION_L2_128B", 128),
    "256B": ("CU_TENSOR_MAP_L2_PROMOTION_L2_256B", 256),
}

# Rules about the Python-side description that never reach the driver as such:
# an int8 or an unknown option string has no driver enum, the driver is never
# given the innermost stride, and a negative stride cannot be put in a
# cuuint64_t.  A driver cannot confirm or refute these, so tests that compare
# the validator with the driver leave them out.
HOST_ONLY_RULES = frozenset(
    {"unknown_option", "dtype_unsupported", "rank_mismatch", "stride_negative", "inner_stride_dense"}
)


class TensorMapError(ValueError):
    """A tensor-map description that TMA cannot accept.

    ``rule`` is a short stable identifier of the broken rule (for example
    ``"stride_multiple_16"``); ``driver_error`` is the ``CUresult`` name when the
    driver itself refused (``rule == "driver"``), else None.
    """

    def __init__(self, rule: str, message: str, *, driver_error: str | None = None):
        super().__init__(message)
        self.rule = rule
        self.driver_error = driver_error


# ---------------------------------------------------------------- data types


@dataclass(frozen=True)
class TmaDtype:
    name: str
    itemsize: int
    enum: str  # CUtensorMapDataType member name
    is_float: bool


def _tma(name, itemsize, suffix, is_float):
    return TmaDtype(name, itemsize, "CU_TENSOR_MAP_DATA_TYPE_" + suffix, is_float)


SUPPORTED_DTYPES = {
    "uint8": _tma("uint8", 1, "UINT8", False),
    "uint16": _tma("uint16", 2, "UINT16", False),
    "uint32": _tma("uint32", 4, "UINT32", False),
    "int32": _tma("int32", 4, "INT32", False),
    "uint64": _tma("uint64", 8, "UINT64", False),
    "int64": _tma("int64", 8, "INT64", False),
    "float16": _tma("float16", 2, "FLOAT16", True),
    "bfloat16": _tma("bfloat16", 2, "BFLOAT16", True),
    "float32": _tma("float32", 4, "FLOAT32", True),
    "float64": _tma("float64", 8, "FLOAT64", True),
}

_SAME_SIZE_HINT = {"int8": "uint8", "int16": "uint16", "bool": "uint8"}


def _unsupported_dtype(what: str, extra: str = "") -> TensorMapError:
    supported = ", ".join(SUPPORTED_DTYPES)
    return TensorMapError(
        "dtype_unsupported",
        f"dtype {what} is not a TMA data type{extra} (supported: {supported})",
    )


class TensorMapTypeError(TensorMapError, TypeError):
    """A tensor-map argument of the wrong kind (a float or a boolean where an integer belongs): both a
    TensorMapError with its ``rule`` and a TypeError."""


def tma_dtype(dtype) -> TmaDtype:
    """Map a NumPy dtype (or "bfloat16", or ml_dtypes.bfloat16) to its TMA data type."""
    if dtype is None:                      # np.dtype(None) would quietly mean float64
        raise _unsupported_dtype("None", "; name one, e.g. 'bfloat16' or np.float32")
    if isinstance(dtype, str) and dtype.strip().lower() == "bfloat16":
        return SUPPORTED_DTYPES["bfloat16"]
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise _unsupported_dtype(repr(dtype)) from None
    if dt.itemsize == 2 and dt.name == "bfloat16":  # ml_dtypes.bfloat16
        return SUPPORTED_DTYPES["bfloat16"]
    if dt.name not in SUPPORTED_DTYPES:
        hint = _SAME_SIZE_HINT.get(dt.name)
        extra = f"; for a plain copy, view the data as {hint}" if hint else ""
        raise _unsupported_dtype(dt.name, extra)
    if not dt.isnative:
        raise _unsupported_dtype(
            f"{dt.str!r}", "; the GPU reads little-endian data, convert with .astype(dtype.newbyteorder('='))"
        )
    return SUPPORTED_DTYPES[dt.name]


# ---------------------------------------------------------------- normalising input


def _option(keyword: str, value, table: dict) -> str:
    """Return the canonical spelling of an option string ("128b" -> "128B")."""
    by_lower = {key.lower(): key for key in table}
    if isinstance(value, str) and value.strip().lower() in by_lower:
        return by_lower[value.strip().lower()]
    allowed = ", ".join(repr(key) for key in table)
    raise TensorMapError("unknown_option", f"{keyword}={value!r} is not a known value; use one of {allowed}")


def _int_tuple(name: str, values) -> tuple[int, ...]:
    if isinstance(values, (int, np.integer)) and not isinstance(values, (bool, np.bool_)):
        values = (values,)
    try:
        items = tuple(values)
        if any(isinstance(v, (bool, np.bool_)) for v in items):
            raise TypeError
        return tuple(operator.index(v) for v in items)
    except TypeError:
        raise TensorMapTypeError("integer_values", f"{name} must be a sequence of integers (not floats or "
                                                   f"booleans), got {values!r}") from None


@dataclass(frozen=True)
class _Request:
    dtype: TmaDtype
    shape: tuple
    strides: tuple
    box: tuple
    element_strides: tuple
    swizzle: str
    interleave: str
    oob_fill: str
    l2_promotion: str
    address: int

    @property
    def rank(self) -> int:
        return len(self.shape)


def _request(dtype, shape, strides, box, element_strides, swizzle, interleave, oob_fill, l2_promotion, address):
    tdt = tma_dtype(dtype)
    shape = _int_tuple("shape", shape)
    if element_strides is None:
        element_strides = (1,) * len(shape)
    return _Request(
        dtype=tdt,
        shape=shape,
        strides=_int_tuple("strides", strides),
        box=_int_tuple("box", box),
        element_strides=_int_tuple("element_strides", element_strides),
        swizzle=_option("swizzle", swizzle, SWIZZLES),
        interleave=_option("interleave", interleave, INTERLEAVES),
        oob_fill=_option("oob_fill", oob_fill, OOB_FILLS),
        l2_promotion=_option("l2_promotion", l2_promotion, L2_PROMOTIONS),
        address=_address(address),
    )


def _address(address) -> int:
    if isinstance(address, (bool, np.bool_)):
        raise TensorMapTypeError("integer_values", f"address must be an integer, got {address!r}")
    try:
        a = operator.index(address)
    except TypeError:
        raise TensorMapTypeError("integer_values", f"address must be an integer, got {address!r}") from None
    if not 0 <= a < 2**64:
        raise TensorMapError("address_range", f"address {a:#x} is not a 64-bit device address (0 <= address < 2**64)")
    return a


# ---------------------------------------------------------------- the rules, one function each


def _check_lengths(r: _Request):
    lengths = {"shape": len(r.shape), "strides": len(r.strides), "box": len(r.box),
               "element_strides": len(r.element_strides)}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise TensorMapError(
            "rank_mismatch",
            f"the axis lists disagree: {listed} entries (shape, strides, box and element_strides "
            "each need one entry per axis, outermost first)",
        )


def _check_rank(r: _Request):
    if not 1 <= r.rank <= MAX_RANK:
        raise TensorMapError(
            "rank_range",
            f"rank {r.rank} is outside 1..{MAX_RANK} (a TMA tensor has 1 to 5 axes; "
            "merge contiguous axes with reshape, or give a 0-d value the shape (1,))",
        )
    if r.interleave != "none" and r.rank < 3:
        raise TensorMapError(
            "interleave_rank",
            f"interleave={r.interleave!r} needs rank >= 3, got rank {r.rank} (interleaved layouts such as "
            "NC/8HWC8 have at least 3 axes; use interleave='none' for a plain matrix)",
        )


def _address_alignment(r: _Request) -> int:
    return 32 if r.interleave == "32B" else 16


def _check_address(r: _Request):
    align = _address_alignment(r)
    if r.address % align:
        why = " with interleave='32B'" if align == 32 else ""
        raise TensorMapError(
            "address_alignment",
            f"address {r.address:#x} is not {align}-byte aligned: it is {r.address % align} bytes past a "
            f"{align}-byte boundary (TMA needs the start address to be a multiple of {align} bytes{why}; "
            f"start the tensor at an aligned element or move the data)",
        )


def _check_dims(r: _Request):
    for axis, n in enumerate(r.shape):
        if not 1 <= n <= MAX_DIM:
            raise TensorMapError(
                "dim_range",
                f"shape[{axis}] = {n} is outside 1..{MAX_DIM} (2**32) (each TMA axis has 1 to 2**32 elements; "
                + ("skip empty copies" if n < 1 else "split the axis in two") + ")",
            )


def _stride_label(axis: int, rank: int) -> str:
    return "row stride" if axis == rank - 2 else f"stride of axis {axis}"


def _pad_hint(axis: int, rank: int, padded: int) -> str:
    what = "each row" if axis == rank - 2 else f"axis {axis}"
    return f"pad {what} to {padded} bytes"


def _check_strides(r: _Request):
    for axis, s in enumerate(r.strides):
        if s < 0:
            raise TensorMapError(
                "stride_negative",
                f"strides[{axis}] = {s} bytes is negative (TMA walks every axis forwards; copy a reversed "
                "view such as a[::-1] with np.ascontiguousarray, or reverse the coordinates in the kernel)",
            )
    inner = r.strides[-1]
    if inner != r.dtype.itemsize:
        raise TensorMapError(
            "inner_stride_dense",
            f"innermost stride is {inner} bytes but one {r.dtype.name} element is {r.dtype.itemsize} bytes "
            "(TMA's innermost axis is always dense; make it contiguous with np.ascontiguousarray, or "
            "describe a view whose last axis has stride == itemsize)",
        )
    multiple = 32 if r.interleave == "32B" else 16
    for axis, s in enumerate(r.strides[:-1]):
        label = _stride_label(axis, r.rank)
        if s % multiple:
            padded = -(-s // multiple) * multiple
            need = ("with interleave='32B' TMA needs every stride but the innermost to be a multiple of 32 bytes"
                    if multiple == 32 else
                    "TMA needs every stride but the innermost to be a multiple of 16 bytes")
            raise TensorMapError(
                f"stride_multiple_{multiple}",
                f"{label} {s} bytes is not a multiple of {multiple} ({need}; {_pad_hint(axis, r.rank, padded)})",
            )
        if s >= STRIDE_LIMIT:
            raise TensorMapError(
                "stride_too_large",
                f"{label} {s} bytes is not below 2**40 = {STRIDE_LIMIT} bytes (the limit on a TMA stride; "
                "split the tensor into several tensor maps)",
            )


def _inner_box_bytes(r: _Request) -> int:
    return r.box[-1] * r.dtype.itemsize


def _check_each_in_range(rule: str, name: str, values: tuple, most: int, why: str):
    """TensorMapError(rule) for the first of `values` outside 1..most, naming its axis and saying why."""
    for axis, v in enumerate(values):
        if not 1 <= v <= most:
            raise TensorMapError(rule, f"{name}[{axis}] = {v} is outside 1..{most} ({why})")


def _check_box_range(r: _Request):
    _check_each_in_range("box_range", "box", r.box, MAX_BOX,
                         "a TMA box has 1 to 256 elements along every axis; cover a bigger tile with several copies")


def _check_box_inner_bytes(r: _Request):
    if r.interleave != "none":
        return
    size, nbytes = r.dtype.itemsize, _inner_box_bytes(r)
    if nbytes % 16:
        granule = 16 // math.gcd(16, size)
        lower, upper = (r.box[-1] // granule) * granule, (r.box[-1] // granule + 1) * granule
        choices = f"{lower} or {upper}" if lower else f"{upper}"
        raise TensorMapError(
            "box_inner_multiple_16",
            f"inner box {r.box[-1]} x {size} bytes = {nbytes} bytes is not a multiple of 16 (without "
            f"interleave a box row must be whole 16-byte chunks; use an inner box of {choices} "
            f"{r.dtype.name} elements)",
        )
    span = SWIZZLES[r.swizzle][1]
    if span is not None and nbytes > span:
        raise TensorMapError(
            "box_inner_swizzle_span",
            f"inner box {r.box[-1]} x {size} bytes = {nbytes} bytes is wider than the {r.swizzle} swizzle "
            f"span of {span} bytes (a swizzled box row must fit in one swizzle row; use at most "
            f"{span // size} {r.dtype.name} elements, or a wider swizzle)",
        )


def _check_box_total(r: _Request):
    loaded = [-(-b // max(e, 1)) for b, e in zip(r.box, r.element_strides)]   # (a bad stride is reported next)
    nbytes = math.prod(loaded) * r.dtype.itemsize
    if nbytes > MAX_BOX_BYTES:
        dims = " x ".join(str(b) for b in loaded)
        raise TensorMapError(
            "box_total_bytes",
            f"box {dims} {r.dtype.name} = {nbytes} bytes ({nbytes / 1024:g} KiB) is larger than 227 KiB "
            "(not in the documentation: the driver rejected a 256 KiB box and accepted 227 KiB, the most shared "
            "memory a Hopper block can have; the box lands in shared memory, so use a smaller box)",
        )


def _check_element_strides(r: _Request):
    _check_each_in_range("element_stride_range", "element_strides", r.element_strides, MAX_ELEMENT_STRIDE,
                         "TMA can step over at most 8 elements at a time; use 1 for a dense box")


def _check_oob_fill(r: _Request):
    if r.oob_fill == "nan" and not r.dtype.is_float:
        raise TensorMapError(
            "oob_nan_needs_float",
            f"oob_fill='nan' needs a floating-point dtype, but {r.dtype.name} is an integer type "
            "(use oob_fill='none', which fills out-of-bounds elements with zeros)",
        )


_RULES_IN_ORDER = (
    _check_lengths,
    _check_rank,
    _check_address,
    _check_dims,
    _check_strides,
    _check_box_range,
    _check_box_inner_bytes,
    _check_box_total,
    _check_element_strides,
    _check_oob_fill,
    # interleave='32B' with a swizzle other than '32B': the documentation says
    # 32B interleave requires 32B swizzle, but an H100 driver (580) accepted
    # SWIZZLE_NONE, so it is deliberately not rejected here.
)


def check_tiled(dtype, shape, strides, box, *, element_strides=None, swizzle="none", interleave="none",
                oob_fill="none", address=0, l2_promotion="128B"):
    """Check a tiled tensor-map description; return None, or raise TensorMapError for the first broken rule.

    ``shape``/``strides`` are ``ndarray.shape``/``ndarray.strides`` (outermost first, strides in bytes);
    ``box`` and ``element_strides`` (default all 1) are in the same order. ``address`` is the device
    address the map will point at (only its alignment is checked).

    Checked, in this order (``rule`` identifiers in brackets): option strings [unknown_option];
    data type, None included [dtype_unsupported]; integers, not floats or booleans, in every list and
    the address [integer_values]; the address a 64-bit value [address_range]; one entry per axis in every
    list [rank_mismatch]; rank 1..5 [rank_range]; interleave needs rank >= 3 [interleave_rank];
    address 16-byte aligned, 32 with
    32B interleave [address_alignment]; each axis 1..2**32 elements [dim_range]; no negative stride
    [stride_negative]; innermost stride == itemsize [inner_stride_dense]; other strides a multiple
    of 16 bytes [stride_multiple_16], of 32 with 32B interleave [stride_multiple_32], and below 2**40
    [stride_too_large]; box 1..256 per axis [box_range]; without interleave the inner box is whole
    16-byte chunks [box_inner_multiple_16] and, with swizzle, no wider than the swizzle span
    [box_inner_swizzle_span]; elements loaded <= 227 KiB, an undocumented limit measured on H100/H200
    [box_total_bytes]; element strides 1..8 [element_stride_range]; NaN fill only for floating
    types [oob_nan_needs_float].

    Not checked (the driver is not known to reject these at encode time):

    * strides that overlap: an outer stride smaller than the extent of the axis it steps over
      (e.g. a 512-byte row stride for 1024-byte rows), or an outer stride of 0;
    * a box larger than the tensor (TMA fills the out-of-bounds part);
    * 32B interleave without 32B swizzle (the docs require it; the H100 driver accepted none);
    * how big the inner box may be with interleave;
    * the exact box-size limit between 227 KiB and 256 KiB
      (the product of ``box`` is what is checked);
    * that ``address`` is device memory.

    The innermost element stride is range-checked like the others, although the documentation
    says the driver ignores it when interleave is 'none'.
    """
    r = _request(dtype, shape, strides, box, element_strides, swizzle, interleave, oob_fill, l2_promotion,
                 address)
    for rule in _RULES_IN_ORDER:
        rule(r)
    return None

