"""How many blocks of a kernel share one SM, by the occupancy rules, from what its cubin and launch say (no GPU).

On a GPU, cuOccupancyMaxActiveBlocksPerMultiprocessor answers this (nvrtc.Kernel.blocks_per_sm); without one, a
lesson can still count it with the rules of the CUDA Programming Guide's occupancy calculation, for compute
capability 9.0 (H100, H200) only:

- shared memory: 228 KiB an SM, given in units of 128 bytes; a block takes its static and dynamic shared
  memory plus 1 KiB the system reserves for each block;
- registers: 65,536 an SM in four sub-partitions of 16,384; a warp lives in one of them and takes its
  registers in units of 256 (a thread's count rounded up so that 32 threads fill whole units), at most 255 a
  thread; and a block whose warps, rounded up to a multiple of four, would need more than the SM's 65,536 does
  not launch at all;
- threads: at most 2,048 an SM; blocks: at most 32 an SM.

An sm_90 cubin's own count of static shared memory (cuobjdump's "shared", `nvrtc.resource_usage`) already holds
that 1 KiB for a kernel that uses shared memory: one that declares only `extern __shared__` reports 1,024 bytes,
one that declares 256 bytes reports 1,280 (an sm_80 cubin reports 0 and 256). `for_kernel` takes a cubin's count
and does not add the reservation twice; an H200's driver agrees with it where counting it twice would lose a
block (tests/machinery/test_occupancy.py).
"""
from __future__ import annotations

from dataclasses import dataclass

SMEM_PER_SM = 228 * 1024
SMEM_RESERVED_PER_BLOCK = 1024
SMEM_UNIT = 128
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256              # registers are given to a warp in units of this many
SUBPARTITIONS = 4                # an SM's register file is split in four; a warp's registers come from one
THREADS_PER_SM = 2048
BLOCKS_PER_SM = 32


@dataclass(frozen=True)
class Occupancy:
    blocks: int          # blocks an SM holds at once: the least of the limits below and BLOCKS_PER_SM
    by_shared: int
    by_registers: int | None     # None: the kernel uses no registers, no limit
    by_threads: int

    @property
    def limit(self) -> str:
        """What sets `blocks`: every resource that allows no more ("shared memory and registers" when both do)."""
        names = [name for name, n in (("shared memory", self.by_shared), ("registers", self.by_registers),
                                      ("threads", self.by_threads), ("blocks an SM", BLOCKS_PER_SM))
                 if n == self.blocks]
        return " and ".join(names)


def blocks_per_sm(registers: int, threads: int, shared_bytes: int) -> Occupancy:
    """The blocks of one kernel an sm_90 SM holds at once: `registers` a thread (the cubin's), `threads` a block,
    `shared_bytes` of shared memory a block (static + dynamic)."""
    if not (0 < threads <= 1024 and 0 <= registers <= 255 and shared_bytes >= 0):
        raise ValueError(f"occupancy: need 1 <= threads <= 1024, 0 <= registers <= 255, shared_bytes >= 0; got "
                         f"threads={threads}, registers={registers}, shared_bytes={shared_bytes}")
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_shared = SMEM_PER_SM // (-(-(shared_bytes + SMEM_RESERVED_PER_BLOCK) // SMEM_UNIT) * SMEM_UNIT)
    if not per_warp:
        by_registers = None                      # no registers: not a limit
    elif per_warp * -(-warps // SUBPARTITIONS) * SUBPARTITIONS > REGISTERS_PER_SM:
        by_registers = 0                         # the block does not launch
    else:                                        # warps that fit in each sub-partition, over the block's warps
        by_registers = REGISTERS_PER_SM // SUBPARTITIONS // per_warp * SUBPARTITIONS // warps
    by_threads = THREADS_PER_SM // (warps * 32)
    limits = [by_shared, by_threads, BLOCKS_PER_SM] + ([by_registers] if by_registers is not None else [])
    return Occupancy(min(limits), by_shared, by_registers, by_threads)


def for_kernel(usage: dict, threads: int, dynamic_shared: int = 0) -> Occupancy:
    """blocks_per_sm for an sm_90 kernel from its cubin's resource usage ({"registers", "shared", ...} as
    nvrtc.resource_usage gives it) and its launch: `threads` a block, `dynamic_shared` bytes a block. The cubin's
    "shared" already includes the 1 KiB reserved for each block (0 when the kernel uses no shared memory), so
    it is taken out before the rules add it."""
    if 0 < usage["shared"] < SMEM_RESERVED_PER_BLOCK:
        raise ValueError(f"occupancy.for_kernel: the cubin reports {usage['shared']} bytes of shared memory, less "
                         f"than the {SMEM_RESERVED_PER_BLOCK} an sm_90 cubin counts for a block that uses any: not "
                         f"an sm_90 cubin? These rules are for compute capability 9.0 only")
    static = max(usage["shared"] - SMEM_RESERVED_PER_BLOCK, 0)
    return blocks_per_sm(usage["registers"], threads, static + dynamic_shared)
