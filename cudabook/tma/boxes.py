"""What a tiled load brings: the TMA unit's tiled mode, computed with NumPy.

Which element each position of a box comes from, what out-of-bounds positions hold, and where each byte lands
in shared memory with a swizzle. The lessons draw boxes and swizzles with it, and cudabook.emulate fills (and
stores) the boxes of a kernel run on a CPU with it.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .validator import OOB_FILLS, SWIZZLES, TensorMapError


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


def gather(memory: np.ndarray, offsets, inside, itemsize, fill_nan):
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
    data = gather(memory, offsets - low, inside, a.itemsize, oob_fill == "nan" and a.dtype.kind == "f")
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

