"""Host inputs checked the way every track's `validate` checks them: a NumPy array (not a device array), of
bfloat16 where bf16 is wanted, with finite values; each error names the argument, the rule and the place."""
from __future__ import annotations

import numpy as np

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    BF16 = None


def host_array(name, x, want="a NumPy array", make="np.asarray"):
    """x, when it is a NumPy array; else a TypeError: a device array, or `name` must be `want` (`make` makes one)."""
    if hasattr(x, "copy_to_host") or hasattr(x, "__cuda_array_interface__") and not isinstance(x, np.ndarray):
        raise TypeError(f"{name} is a device array; pass a NumPy array (run() uploads it for you)")
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be {want}, got {type(x).__name__}; make one with {make}")
    return x


def require_bf16(name, x):
    """A TypeError unless x is a bfloat16 array; it says how to convert float data or view uint16 bits."""
    if BF16 is None or x.dtype != BF16:
        raise TypeError(f"{name} must be bfloat16, got {x.dtype}; convert with `{name}.astype(ml_dtypes.bfloat16)` "
                        f"(float data) or view raw bits with `{name}.view(ml_dtypes.bfloat16)` (uint16 data)")


def first(mask):
    """The index of the first True in mask, as a tuple of ints."""
    return tuple(int(i) for i in np.argwhere(mask)[0])


def finite_bf16_bits(name, x):
    """x's bf16 bits as a C-contiguous uint16 array; a ValueError at the first infinite or NaN value."""
    bits = np.ascontiguousarray(x).view(np.uint16)
    bad = (bits & 0x7F80) == 0x7F80                       # exponent all ones: infinity or NaN
    if bad.any():
        where = first(bad)
        raise ValueError(f"{name}[{', '.join(map(str, where))}] is {x[where]}; values must be finite "
                         f"({int(bad.sum()):,} such value{'s' if bad.sum() > 1 else ''})")
    return bits
