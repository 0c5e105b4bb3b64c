"""16-byte accesses in the simulator fail where a GPU would: at an address that is not a multiple of 16.

On a GPU a vector load (ld.global.v4.u32, 16 bytes) from an address that is not 16-byte aligned is a
"misaligned address" error that ends the kernel. The simulator reads NumPy arrays element by element and would
accept it, so the simulator versions of the workbook's vector helpers call `check(array, index, 16)` first.
"""
from __future__ import annotations

import numpy as np


class MisalignedAccess(IndexError):
    """A wide access whose address is not a multiple of its width (a GPU raises "misaligned address")."""


def check(array, index, width: int, what: str = "access"):
    """Raise MisalignedAccess unless the element array[index] starts at a multiple of `width` bytes from the
    array's start (the start itself is aligned: device allocations are 256-byte aligned)."""
    try:
        flat = int(np.ravel_multi_index(tuple(int(i) for i in index), array.shape))
    except ValueError:
        return                       # out of bounds: the access itself raises the clearer IndexError
    offset = flat * array.dtype.itemsize
    if offset % width:
        raise MisalignedAccess(
            f"a {width}-byte {what} at element {tuple(int(i) for i in index)} starts {offset} bytes into the array, "
            f"not a multiple of {width}: on a GPU this is a misaligned address error. Wide accesses need an "
            f"index that is a multiple of {width // array.dtype.itemsize} elements (and rows whose length keeps it so)")
