"""The WGMMA shared-memory matrix descriptor, built field by field in Python (the lesson shows it beside the C++).

A `wgmma.mma_async` instruction reads its A and B tiles from shared memory through 64-bit descriptors (PTX ISA,
"Matrix Descriptor Format" for wgmma):

    bits  0-13   start address >> 4        (a shared-memory byte address, 16-byte units; 18 bits of address)
    bits 16-29   leading-dimension byte offset (LBO) >> 4
    bits 32-45   stride-dimension byte offset (SBO) >> 4
    bits 49-51   base offset                (0 when every swizzle atom starts at a multiple of its size)
    bits 62-63   swizzle mode: 0 none, 1 128-byte, 2 64-byte, 3 32-byte

    descriptor(address, lbo, sbo, swizzle="128B")  -> int       the same arithmetic as smem_desc in hopper.cuh
    fields(desc)                                   -> dict      the fields back out of a descriptor
    explain(desc)                                  -> str       one line per field, for the lesson
    k_tile_descriptors(a_addr, b_addr)             -> [(a, b)]  what the kernels pass to the four k16 wgmmas
                                                                of one 64-wide k-tile
    accumulator_positions(n)                       -> (rows, cols)  where each thread's accumulators sit in D
    from_registers(regs, n)                        -> D [64, n]     D from the warpgroup's registers

The GEMM kernels' tiles are 128-byte swizzled (TMA writes them so): an atom is 8 rows of 128 bytes (1024 B).
    A, [M, K] row-major, is "K-major": SBO = 1024 (the next 8 rows of M), LBO unused (a k16 slice, 32 bytes, lies
      inside one 128-byte row), and the k16 steps of a 64-wide k-tile start 32 bytes apart.
    B, [K, N] row-major, is "MN-major" (N contiguous; the instruction's transpose-B flag is 1): SBO = 1024 (the
      next 8 rows of K), LBO = the distance from one 64-wide group of N columns to the next (BK * 128 = 8192 when
      each [64 K x 64 N] TMA box follows the previous one), and the k16 steps start 16 rows = 2048 bytes apart.
"""
from __future__ import annotations

SWIZZLE_BITS = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
SWIZZLE_NAMES = {v: k for k, v in SWIZZLE_BITS.items()}
ADDRESS_MASK = 0x3FFFF          # shared memory addresses below 256 KiB: 18 bits, stored >> 4 in 14

BK = 64                         # the kernels' k-tile: one 128-byte swizzle span of bf16
A_K_MAJOR = dict(lbo=16, sbo=1024)            # LBO is ignored for a swizzled K-major operand; 16 by convention
B_MN_MAJOR = dict(lbo=BK * 128, sbo=1024)     # 64-wide N atoms BK * 128 bytes apart
K16_STEP_A = 32                 # bytes between the k16 slices of a K-major 128B-swizzled tile
K16_STEP_B = 16 * 128           # ... of an MN-major one: 16 rows of 128 bytes


def _field(name, value, limit):
    if not (0 <= value <= limit) or value % 16:
        raise ValueError(f"{name} = {value} must be a multiple of 16 between 0 and {limit} bytes")
    return value >> 4


def descriptor(address: int, lbo: int, sbo: int, swizzle: str = "128B", base_offset: int = 0) -> int:
    """The 64-bit descriptor of a tile at shared-memory byte `address` (16-byte aligned; only its low 18 bits
    are kept, as `addr & 0x3FFFF` does in hopper.cuh), with byte offsets `lbo` and `sbo`."""
    if swizzle not in SWIZZLE_BITS:
        raise ValueError(f"swizzle must be one of {sorted(SWIZZLE_BITS)}, got {swizzle!r}")
    if not 0 <= base_offset <= 7:
        raise ValueError("base_offset is 3 bits (0..7)")
    start = _field("address", address & ADDRESS_MASK, ADDRESS_MASK)
    return (start
            | _field("LBO", lbo, ADDRESS_MASK) << 16
            | _field("SBO", sbo, ADDRESS_MASK) << 32
            | base_offset << 49
            | SWIZZLE_BITS[swizzle] << 62)


def fields(desc: int) -> dict:
    """{"address", "lbo", "sbo", "base_offset", "swizzle"} of a descriptor (byte values)."""
    return dict(address=(desc & 0x3FFF) << 4, lbo=(desc >> 16 & 0x3FFF) << 4, sbo=(desc >> 32 & 0x3FFF) << 4,
                base_offset=desc >> 49 & 7, swizzle=SWIZZLE_NAMES[desc >> 62 & 3])


def explain(desc: int) -> str:
    """The descriptor in hex and its fields, one a line."""
    f = fields(desc)
    return "\n".join([
        f"descriptor 0x{desc:016x}",
        f"  bits  0-13  start address >> 4 = {f['address'] >> 4:#x}   -> address {f['address']:#x}",
        f"  bits 16-29  LBO >> 4           = {f['lbo'] >> 4:#x}   -> {f['lbo']} bytes (leading dimension)",
        f"  bits 32-45  SBO >> 4           = {f['sbo'] >> 4:#x}   -> {f['sbo']} bytes (8-row groups)",
        f"  bits 49-51  base offset        = {f['base_offset']}",
        f"  bits 62-63  swizzle            = {SWIZZLE_BITS[f['swizzle']]}   -> {f['swizzle']}",
    ])


def k_tile_descriptors(a_addr: int, b_addr: int, bk: int = BK) -> list[tuple[int, int]]:
    """(desc_a, desc_b) for each k16 step of one k-tile, exactly as the kernels build them: A K-major at
    `a_addr` (a warpgroup's 64 rows), B MN-major at `b_addr` (the stage's BN/64 boxes of [bk x 64])."""
    return [(descriptor(a_addr + K16_STEP_A * kk, **A_K_MAJOR),
             descriptor(b_addr + K16_STEP_B * kk, lbo=bk * 128, sbo=1024)) for kk in range(bk // 16)]


def accumulator_positions(n: int):
    """(rows, cols), int arrays [128, n / 2]: where thread t's accumulator register i sits in D [64 x n], the PTX
    ISA's wgmma D fragment (m64nNk16 and m64nNk32 alike): warp w owns rows 16 w .. 16 w + 15; lane l's register
    4 j + 2 h + e is row 16 w + l / 4 + 8 h, column 8 j + 2 (l % 4) + e."""
    import numpy as np
    thread, i = np.meshgrid(np.arange(128), np.arange(n // 2), indexing="ij")
    w, lane = thread // 32, thread % 32
    j, h, e = i // 4, (i // 2) % 2, i % 2
    return 16 * w + lane // 4 + 8 * h, 8 * j + 2 * (lane % 4) + e


def from_registers(regs, n: int, dtype=None):
    """D [64 x n] from the warpgroup's accumulator registers regs [128, n / 2] (accumulator_positions)."""
    import numpy as np
    regs = np.asarray(regs).reshape(128, n // 2)
    d = np.full((64, n), np.nan, dtype or regs.dtype)
    rows, cols = accumulator_positions(n)
    d[rows, cols] = regs
    return d
