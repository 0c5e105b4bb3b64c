"""What the GEMM track's Hopper rungs (05, 06, 07) share on the host: the padding rule, their tensor maps, the
compiler messages the lab grader reads, and one launch path.

TMA rows must be multiples of 16 bytes, so K and N are padded to multiples of 8 bf16 (Problem.aligned) and C's
[M, N] corner is copied back after the kernel. `map_args` describes the maps as check_tiled arguments;
`enqueue` merges a rung's parameters, refuses where this GPU cannot run it, and runs the launch closure that
`build` makes once per (problem, kernel text, parameters); `warp_specialized` makes that closure for 06 and 07,
which differ only in their constants, their maps and their grid.
"""
from __future__ import annotations

import ctypes
import hashlib
import weakref

from .. import device
from ..kit.rung import WGMMA_LOG_MISTAKES, cached_launch, tensor_map

BK = 64
ALIGN = 8              # TMA rows must be multiples of 16 bytes: K and N padded to multiples of 8 bf16
ARG_TYPES = (None, None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int)
WATCHDOG_S = 20        # tma.cuh's WATCHDOG_NS: a wait that never ends traps after this long (the grader says so)
COMPILE_LOG_MISTAKES = WGMMA_LOG_MISTAKES   # what ptxas says of a learner's wgmma code (cudabook.labs reads it)

def padded(M: int, N: int, K: int) -> tuple[int, int]:
    """(Kp, Np): K and N rounded up to a multiple of 8, as Problem.aligned(8) makes them."""
    return -(-K // ALIGN) * ALIGN, -(-N // ALIGN) * ALIGN


def map_args(M, N, K, *, bm, bn, padded_rows=True, store_box=None, l2_promotion="256B") -> dict:
    """The tensor maps of a GEMM rung as check_tiled keyword arguments: {"A": ..., "B": ... [, "C": ...]}.
    A [M, K] with box [bm x 64]; B [K, N] with box [64 x 64] (BN/64 of them per stage); C [M, N] with box
    store_box (07's TMA store). All bf16, 128-byte swizzle. padded_rows=False: the unpadded matrices."""
    Kp, Np = padded(M, N, K) if padded_rows else (K, N)
    maps = {
        "A": dict(dtype="bfloat16", shape=(M, Kp), strides=(Kp * 2, 2), box=(bm, BK), swizzle="128B",
                  l2_promotion=l2_promotion),
        "B": dict(dtype="bfloat16", shape=(Kp, Np), strides=(Np * 2, 2), box=(BK, 64), swizzle="128B",
                  l2_promotion=l2_promotion),
    }
    if store_box is not None:
        maps["C"] = dict(dtype="bfloat16", shape=(M, Np), strides=(Np * 2, 2), box=tuple(store_box),
                         swizzle="128B", l2_promotion="none")
    return maps


def pointer(array) -> int:
    """An array's device address (the host address of a simulator array while the CPU emulator runs)."""
    return device.address(array)


def launch_registers(threads: int) -> int:
    """The registers a thread of a block of `threads` starts with under __launch_bounds__(threads, 1): the
    register file (65,536) shared out, capped at 255 and rounded down to a step of 8, so at most 248 (168 for 384
    threads)."""
    return min(255, 65536 // threads) // 8 * 8


def check_registers(stage: str, consumers: int, producer_regs: int, consumer_regs: int):
    """ValueError unless setmaxnreg's counts are legal and the warpgroups' registers fit the block's own pool.
    setmaxnreg.inc takes registers only from the pool of its block (PTX ISA, setmaxnreg): the registers the
    block was launched with, launch_registers(threads) a thread. A split that asks for more than that waits in
    setmaxnreg.inc for ever (40 + 2 x 232 = 504 = 3 x 168 fits; 32 + 2 x 240 = 512 does not)."""
    regs_ok = all(24 <= r <= 256 and r % 8 == 0 for r in (producer_regs, consumer_regs))
    threads = 128 * (consumers + 1)
    each = launch_registers(threads)
    pool = threads * each
    if not regs_ok or 128 * (producer_regs + consumers * consumer_regs) > pool:
        raise ValueError(f"{stage}: producer_regs and consumer_regs must be multiples of 8 in 24..256 with "
                         f"128 * (producer_regs + consumers * consumer_regs) <= {pool:,} (the block's register "
                         f"pool: {threads} threads x {each} registers; setmaxnreg.inc takes "
                         f"only from it), got producer_regs={producer_regs}, consumer_regs={consumer_regs}, "
                         f"consumers={consumers}")


def enqueue(rung, defaults: dict, cache: dict, p, kernel, params: dict, build):
    """Launch a Hopper GEMM rung on the legacy default stream (no synchronisation): its parameters merged,
    refused with the reason where this GPU cannot run it, and build(p, kernel, params) -> the launch closure,
    made once per (problem, kernel text, parameters) and reused while the problem's arrays are the same."""
    params = rung.params(defaults, params)
    rung.require()
    key = (id(p), None if kernel is None else hashlib.sha256(kernel.encode()).hexdigest(),
           tuple(sorted(params.items())))
    cached_launch(cache, key, (p, p.a, p.b, p.c), lambda: build(p, kernel, params))


def prepare(rung, kernel_name, p, kernel, cfg, smem, *, bm, bn, store_box=None):
    """What a Hopper GEMM launch needs first: the kernel compiled and loaded for these constants, the padded
    arrays (Problem.aligned) and the encoded tensor maps of A and B (and of C, with a store box).
    Returns (kernel, C as the kernel writes it, Kp, Np, [maps])."""
    M, N, K = p.shape
    kern = rung.prepare(rung.text(kernel), cfg, kernel_name, smem=smem)[kernel_name]
    a, b, c, Kp, Np = p.aligned(ALIGN)
    maps = map_args(M, N, K, bm=bm, bn=bn, store_box=store_box)
    encoded = [tensor_map(maps[name], pointer(x)) for name, x in (("A", a), ("B", b), ("C", c)) if name in maps]
    return kern, c, Kp, Np, encoded


def warp_specialized(rung, kernel_name, arg_types, p, kernel, cfg, smem, grid, *, store_box=None, extra_args=()):
    """The launch closure of a warp-specialised rung (06, 07): a producer warpgroup and cfg["CONSUMERS"]
    consumer warpgroups a block (BM = 64 * CONSUMERS rows of C), prepared as `prepare` does, on the grid that
    grid(kernel, M, Np) gives; the arguments are the maps, C, M, Np and Kp, then extra_args."""
    M, N, K = p.shape
    kern, c, Kp, Np, maps = prepare(rung, kernel_name, p, kernel, cfg, smem, bm=64 * cfg["CONSUMERS"],
                                    bn=cfg["BN"], store_box=store_box)
    blocks = grid(kern, M, Np)
    args = [*maps, pointer(c), M, Np, Kp, *extra_args]
    threads = 128 * (cfg["CONSUMERS"] + 1)
    return launcher(p, c, lambda: kern.launch(blocks, threads, args, arg_types, shared=smem))


def launcher(p, c_padded, launch_fn):
    """launch_fn, then (when C was padded) the copy of its [M, N] corner into p.c. Holds p only weakly."""
    if c_padded is p.c:
        return launch_fn
    pref = weakref.ref(p)

    def run():
        launch_fn()
        pref().copy_back(c_padded)
    return run
