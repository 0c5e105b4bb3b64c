"""Talking to the driver: a checked description turned into ``cuTensorMapEncodeTiled``'s arguments (innermost
first, in one place: :func:`driver_args`), and the tensor map built by the driver, or by the CPU emulator while
it runs a kernel (cudabook.device.emulator()). ``cuda.bindings`` is imported inside the functions that use it.
"""

from __future__ import annotations

import ctypes

from .validator import INTERLEAVES, L2_PROMOTIONS, OOB_FILLS, SWIZZLES, TensorMapError, _request, check_tiled


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
    from .. import device
    emulator = device.emulator()
    if emulator is not None:           # a kernel run on the CPU (cudabook.emulate): check_tiled is the driver
        return emulator.encode_tiled(dtype, shape, strides, box, address, **options)
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
