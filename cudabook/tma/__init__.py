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

The package, one module a purpose: :mod:`.validator` (the rules and check_tiled), :mod:`.encoding` (the
driver's arguments and encode_tiled), :mod:`.boxes` (what a tiled load brings: load_box, swizzle_offsets) and
:mod:`.cases` (the worked descriptions CASES and PROBES).
"""

from __future__ import annotations

from .boxes import box_elements, load_box, smem_image, swizzle_offsets
from .cases import CASES, F32_256, PROBES
from .encoding import driver_args, encode_tiled, format_driver_call, tensor_map_bytes
from .validator import (HOST_ONLY_RULES, INTERLEAVES, L2_PROMOTIONS, MAX_BOX, MAX_BOX_BYTES, MAX_DIM,
                        MAX_ELEMENT_STRIDE, MAX_RANK, OOB_FILLS, STRIDE_LIMIT, SUPPORTED_DTYPES, SWIZZLES,
                        TensorMapError, TensorMapTypeError, TmaDtype, check_tiled, tma_dtype)


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
