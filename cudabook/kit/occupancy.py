"""How many blocks of a kernel share one SM, by the occupancy rules, from what its cubin and launch say (no GPU).

On a GPU, cuOccupancyMaxActiveBlocksPerMultiprocessor answers this (nvrtc.Kernel.blocks_per_sm); without one, a
lesson can still count it with the rules of the CUDA Programming Guide's occupancy calculation, for compute
capability 9.0 (H100, H200) only:

- shared memory: 228 KiB an SM, given in units of 128 bytes; a block takes its static and dynamic shared
  memory plus 1 KiB the system reserves for each block;
- registers: 65,536 an SM, given to warps in units of 256 (a thread's count rounded up so that 32 threads fill
  whole units), at most 255 a thread;
- threads: at most 2,048 an SM; blocks: at most 32 an SM.
"""
from __future__ import annotations

from dataclasses import dataclass

SMEM_PER_SM = 228 * 1024
SMEM_RESERVED_PER_BLOCK = 1024
SMEM_UNIT = 128
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256              # registers are given to a warp in units of this many
THREADS_PER_SM = 2048
BLOCKS_PER_SM = 32


@dataclass(frozen=True)
class Occupancy:
    blocks: int          # blocks an SM holds at once: the least of the three limits below and BLOCKS_PER_SM
    by_shared: int
    by_registers: int
    by_threads: int

    @property
    def limit(self) -> str:
        """Which resource sets `blocks` (the first of shared memory, registers, threads that does)."""
        for name, n in (("shared memory", self.by_shared), ("registers", self.by_registers),
                        ("threads", self.by_threads)):
            if n == self.blocks:
                return name
        return "blocks an SM"


def blocks_per_sm(registers: int, threads: int, shared_bytes: int) -> Occupancy:
    """The blocks of one kernel an sm_90 SM holds at once: `registers` a thread (the cubin's), `threads` a block,
    `shared_bytes` of shared memory a block (static + dynamic)."""
    if not (0 < threads <= 1024 and 0 <= registers <= 255 and shared_bytes >= 0):
        raise ValueError(f"occupancy: need 1 <= threads <= 1024, 0 <= registers <= 255, shared_bytes >= 0; got "
                         f"threads={threads}, registers={registers}, shared_bytes={shared_bytes}")
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_shared = SMEM_PER_SM // (-(-(shared_bytes + SMEM_RESERVED_PER_BLOCK) // SMEM_UNIT) * SMEM_UNIT)
    by_registers = REGISTERS_PER_SM // (per_warp * warps) if per_warp else BLOCKS_PER_SM
    by_threads = THREADS_PER_SM // (warps * 32)
    return Occupancy(min(by_shared, by_registers, by_threads, BLOCKS_PER_SM), by_shared, by_registers, by_threads)
