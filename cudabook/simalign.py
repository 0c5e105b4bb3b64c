"""16-byte accesses in the simulator fail where a GPU would: at an address that is not a multiple of 16.

On a GPU a vector load (ld.global.v4.u32, 16 bytes) from an address that is not 16-byte aligned is a
"misaligned address" error that ends the kernel. The simulator reads NumPy arrays element by element and would
accept it, so the simulator versions of the workbook's vector helpers call `check(array, index, 16)` first.
"""
from __future__ import annotations


class MisalignedAccess(IndexError):
    """A wide access whose address is not a multiple of its width (a GPU raises "misaligned address")."""


def check(array, index, width: int, what: str = "access"):
    """Raise MisalignedAccess unless the element array[index] starts at a multiple of `width` bytes from the
    array's start (the start itself is aligned: device allocations are 256-byte aligned)."""
    shape = array.shape
    if len(index) != len(shape):
        return                       # not one index a dimension: the access itself raises the clearer error
    flat = 0                         # np.ravel_multi_index's C-order flat index in plain Python, a third of that
    for i, n in zip(index, shape):   # call's time: it runs at every wide access of every simulated thread
        i = int(i)
        if not 0 <= i < n:
            return                   # out of bounds: the access itself raises the clearer IndexError
        flat = flat * n + i
    offset = flat * array.dtype.itemsize
    if offset % width:
        raise MisalignedAccess(
            f"a {width}-byte {what} at element {tuple(int(i) for i in index)} starts {offset} bytes into the array, "
            f"not a multiple of {width}: on a GPU this is a misaligned address error. Wide accesses need an "
            f"index that is a multiple of {width // array.dtype.itemsize} elements (and rows whose length keeps it so)")
