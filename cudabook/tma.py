"""Describe a tensor to the Hopper TMA engine, and say why a description is wrong.

A TMA copy needs a *tensor map*: a 128-byte descriptor built on the host by
``cuTensorMapEncodeTiled``.  The driver answers a bad description with a bare
``CUDA_ERROR_INVALID_VALUE``.  This module checks the same rules first and names
the one that was broken, with the numbers and a fix.

Conventions (the NumPy ones, not the driver's):

* ``shape`` and ``strides`` are exactly ``ndarray.shape`` and ``ndarray.strides``:
  outermost axis first, strides in **bytes**.  ``box`` and ``element_strides``
  use the same order.
* The driver wants everything **innermost first** and drops the innermost
  stride (it is always one element).  :func:`driver_args` does that conversion,
  in one place, and :func:`encode_tiled` uses it.

Only numpy is imported here; ``cuda.bindings`` is imported inside the functions
that talk to the driver, so the checks run on a machine without a GPU.
"""

from __future__ import annotations

import ctypes
import math
import operator
from dataclasses import dataclass

import numpy as np

__all__ = [
    "TensorMapError",
    "TmaDtype",
    "tma_dtype",
    "check_tiled",
    "driver_args",
    "encode_tiled",
    "tensor_map_bytes",
    "box_elements",
    "load_box",
    "swizzle_offsets",
    "smem_image",
    "HOST_ONLY_RULES",
    "CASES",
    "PROBES",
]

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


def _check_box_range(r: _Request):
    for axis, b in enumerate(r.box):
        if not 1 <= b <= MAX_BOX:
            raise TensorMapError(
                "box_range",
                f"box[{axis}] = {b} is outside 1..{MAX_BOX} (a TMA box has 1 to 256 elements along every axis; "
                "cover a bigger tile with several copies)",
            )


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
    for axis, e in enumerate(r.element_strides):
        if not 1 <= e <= MAX_ELEMENT_STRIDE:
            raise TensorMapError(
                "element_stride_range",
                f"element_strides[{axis}] = {e} is outside 1..{MAX_ELEMENT_STRIDE} (TMA can step over at most "
                "8 elements at a time; use 1 for a dense box)",
            )


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


# ---------------------------------------------------------------- talking to the driver


def _rank1_dummy_stride(n: int, itemsize: int) -> int:
    # The driver reads no stride for rank 1, but the bindings turn an empty
    # list into NULL and the driver rejects NULL.  Pass one stride it ignores:
    # the tensor's size, rounded up to 16 bytes in case a driver checks it.
    return -(-n * itemsize // 16) * 16


def driver_args(dtype, shape, strides, box, address=0, *, element_strides=None, swizzle="none",
                interleave="none", oob_fill="none", l2_promotion="128B") -> dict:
    """What ``cuTensorMapEncodeTiled`` gets, as plain ints and enum names, in the driver's order.

    Lists are innermost first; ``globalStrides`` has the rank-1 outer strides in bytes (for rank 1,
    one dummy stride that the driver ignores; see tech notes).  Nothing is validated here beyond
    what the conversion itself needs (a known dtype and option strings).
    """
    r = _request(dtype, shape, strides, box, element_strides, swizzle, interleave, oob_fill, l2_promotion,
                 address)
    outer_strides = list(reversed(r.strides[:-1]))
    if r.rank == 1:
        outer_strides = [_rank1_dummy_stride(r.shape[0], r.dtype.itemsize)]
    return {
        "tensorDataType": r.dtype.enum,
        "tensorRank": r.rank,
        "globalAddress": r.address,
        "globalDim": list(reversed(r.shape)),
        "globalStrides": outer_strides,
        "boxDim": list(reversed(r.box)),
        "elementStrides": list(reversed(r.element_strides)),
        "interleave": INTERLEAVES[r.interleave][0],
        "swizzle": SWIZZLES[r.swizzle][0],
        "l2Promotion": L2_PROMOTIONS[r.l2_promotion][0],
        "oobFill": OOB_FILLS[r.oob_fill][0],
    }


def _driver_values(drv, args: dict) -> list:
    """Wrap driver_args() for the bindings: enums by name, every integer in cuuint64_t/cuuint32_t."""
    u64 = lambda xs: [drv.cuuint64_t(x) for x in xs]  # noqa: E731
    u32 = lambda xs: [drv.cuuint32_t(x) for x in xs]  # noqa: E731
    return [
        getattr(drv.CUtensorMapDataType, args["tensorDataType"]),
        drv.cuuint32_t(args["tensorRank"]),
        args["globalAddress"],
        u64(args["globalDim"]),
        u64(args["globalStrides"]),
        u32(args["boxDim"]),
        u32(args["elementStrides"]),
        getattr(drv.CUtensorMapInterleave, args["interleave"]),
        getattr(drv.CUtensorMapSwizzle, args["swizzle"]),
        getattr(drv.CUtensorMapL2promotion, args["l2Promotion"]),
        getattr(drv.CUtensorMapFloatOOBfill, args["oobFill"]),
    ]


def format_driver_call(args: dict) -> str:
    """``cuTensorMapEncodeTiled(tensorDataType=..., ...)`` as one readable line."""
    parts = [f"{k}={v:#x}" if k == "globalAddress" else f"{k}={v}" for k, v in args.items()]
    return "cuTensorMapEncodeTiled(" + ", ".join(parts) + ")"


_DRIVER_HINTS = {
    "CUDA_ERROR_INVALID_CONTEXT": "no CUDA context is current: call cuda.core.Device(0).set_current() first",
    "CUDA_ERROR_NOT_INITIALIZED": "the driver is not initialised: call cuda.core.Device(0).set_current() first",
    "CUDA_ERROR_INVALID_VALUE": "one of the arguments breaks a tensor-map rule",
}


def _validator_opinion(kwargs: dict) -> str:
    try:
        check_tiled(**kwargs)
    except TensorMapError as exc:
        return f"; check_tiled says: {exc}"
    return "; check_tiled found no broken rule, so this one is not in its list yet"


def encode_tiled(dtype, shape, strides, box, address, *, element_strides=None, swizzle="none",
                 interleave="none", oob_fill="none", l2_promotion="128B", validate=True):
    """Check the description (unless ``validate=False``), then build the ``CUtensorMap`` with the driver.

    Needs a current CUDA context. If the driver refuses, raises TensorMapError with
    ``rule == "driver"``, the CUresult name in ``driver_error``, and the full call in the message.
    """
    options = dict(element_strides=element_strides, swizzle=swizzle, interleave=interleave,
                   oob_fill=oob_fill, l2_promotion=l2_promotion)
    from . import device
    if device.EMULATED is not None:    # a kernel run on the CPU (cudabook.emulate): check_tiled is the driver
        from . import emulate
        return emulate.encode_tiled(dtype, shape, strides, box, address, **options)
    if validate:
        check_tiled(dtype, shape, strides, box, address=address, **options)
    args = driver_args(dtype, shape, strides, box, address, **options)

    from cuda.bindings import driver as drv

    err, tmap = drv.cuTensorMapEncodeTiled(*_driver_values(drv, args))
    if err != drv.CUresult.CUDA_SUCCESS:
        name = getattr(err, "name", str(err))
        hint = _DRIVER_HINTS.get(name, "see the cuTensorMapEncodeTiled documentation")
        if name == "CUDA_ERROR_INVALID_VALUE":
            hint += _validator_opinion(dict(dtype=dtype, shape=shape, strides=strides, box=box,
                                            address=address, **options))
        raise TensorMapError("driver", f"the driver returned {name} for {format_driver_call(args)} ({hint})",
                             driver_error=name)
    return tmap


def tensor_map_bytes(tmap) -> bytes:
    """The 128 raw bytes of a ``CUtensorMap`` (what a kernel receives as a __grid_constant__ argument)."""
    return ctypes.string_at(tmap.getPtr(), 128)


# ---------------------------------------------------------------- what a tiled load brings (emulated)
# The TMA unit's tiled mode, computed with NumPy: which element each position of a box comes from, what
# out-of-bounds positions hold, and where each byte lands in shared memory with a swizzle. The lessons draw
# boxes and swizzles with it, and cudabook.emulate fills (and stores) the boxes of a kernel run on a CPU with it.


def box_elements(shape, strides, box, coords, element_strides=None):
    """Where each element of a box comes from: (byte offsets, in_bounds), arrays of the box's element counts.

    shape, strides (bytes), box, element_strides and coords are outermost first (NumPy order; a kernel's
    cp.async.bulk.tensor lists its coordinates innermost first). Along an axis the box takes
    ceil(box / element_stride) elements, at coords + j * element_stride. A position outside the tensor
    (a negative coordinate, or one past the end) is out of bounds: nothing is read there."""
    shape, strides, box = (tuple(int(v) for v in x) for x in (shape, strides, box))
    coords = tuple(int(v) for v in coords)
    es = tuple(int(v) for v in element_strides) if element_strides is not None else (1,) * len(shape)
    if not len(shape) == len(strides) == len(box) == len(coords) == len(es):
        raise ValueError(f"box_elements: shape {shape}, strides {strides}, box {box}, coords {coords} and "
                         f"element_strides {es} must have one entry per axis")
    counts = [-(-b // e) for b, e in zip(box, es)]
    offsets = np.zeros(counts, np.int64)
    inside = np.ones(counts, bool)
    for axis, (n, stride, c, e) in enumerate(zip(shape, strides, coords, es)):
        at = c + e * np.arange(counts[axis], dtype=np.int64)
        view = [1] * len(counts)
        view[axis] = counts[axis]
        at = at.reshape(view)
        inside &= (at >= 0) & (at < n)
        offsets = offsets + np.where((at >= 0) & (at < n), at, 0) * stride
    return offsets, inside


_NAN_BITS = {2: 0x7FFF, 4: 0x7FFFFFFF, 8: 0x7FFFFFFFFFFFFFFF}


def _gather(memory: np.ndarray, offsets, inside, itemsize, fill_nan):
    """The box's bytes [count..., itemsize] from a flat uint8 `memory`; out-of-bounds bytes zero (or NaN)."""
    idx = offsets[..., None] + np.arange(itemsize)
    data = np.where(inside[..., None], memory[np.where(inside[..., None], idx, 0)], 0).astype(np.uint8)
    if fill_nan:
        nan = np.frombuffer(int(_NAN_BITS[itemsize]).to_bytes(itemsize, "little"), np.uint8)
        data[~inside] = nan
    return data


def load_box(array, box, coords, *, element_strides=None, oob_fill="none"):
    """What a TMA tiled load of `box` at `coords` brings from the NumPy `array` (any rank, strides allowed):
    an array of the box's element counts and the array's dtype, zeros (or NaN with oob_fill="nan", float
    types) where the box reaches outside the tensor. Axes outermost first, as array.shape.

        load_box(np.arange(12.).reshape(3, 4), box=(2, 2), coords=(-1, 3))  ->  [[0, 0], [3, 0]]"""
    a = np.asarray(array)
    if oob_fill not in OOB_FILLS:
        raise TensorMapError("unknown_option", f"oob_fill must be one of {sorted(OOB_FILLS)}, got {oob_fill!r}")
    offsets, inside = box_elements(a.shape, a.strides, box, coords, element_strides)
    base = a.__array_interface__["data"][0]
    low = sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
    high = sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides)) + a.itemsize
    memory = np.ctypeslib.as_array((ctypes.c_ubyte * (high - low)).from_address(base + low)) if a.size else \
        np.zeros(a.itemsize, np.uint8)
    data = _gather(memory, offsets - low, inside, a.itemsize, oob_fill == "nan" and a.dtype.kind == "f")
    return data.reshape(-1).view(a.dtype).reshape(offsets.shape).copy()


def swizzle_offsets(nbytes: int, swizzle: str = "none", base: int = 0) -> np.ndarray:
    """Where the TMA unit puts byte i of a box (packed innermost first) in shared memory, relative to the
    destination `base` (a shared-memory address): with a swizzle of S bytes (32, 64 or 128) the 16-byte chunk
    index inside each S-byte span is XORed with the index of the 128-byte row, taken modulo S / 16: bits 4..6
    of the address XOR bits 7..9 for 128B. A destination aligned to the pattern's period (S * 8 bytes)
    gives the textbook picture; TMA requires 128-byte alignment and swizzles by the address itself."""
    if swizzle not in SWIZZLES:
        raise TensorMapError("unknown_option", f"swizzle must be one of {sorted(SWIZZLES)}, got {swizzle!r}")
    at = int(base) + np.arange(int(nbytes), dtype=np.int64)
    span = SWIZZLES[swizzle][1]
    if span:
        at = at ^ (((at >> 7) & (span // 16 - 1)) << 4)
    return at - int(base)


def smem_image(values: np.ndarray, swizzle: str = "none", base: int = 0) -> np.ndarray:
    """The bytes a box of `values` (from load_box) occupies in shared memory, as uint8, swizzled."""
    raw = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
    out = np.empty_like(raw)
    out[swizzle_offsets(raw.size, swizzle, base)] = raw
    return out


# ---------------------------------------------------------------- worked cases


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
