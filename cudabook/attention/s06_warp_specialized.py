"""06 Warp specialisation and overlap (CUDA C++, sm_90a): a producer warpgroup, consumers in ping-pong.

The kernel is kernels/warp_specialized.cu (read its header comment). Rung 05's pieces (the same tensor maps,
wgmma shapes and online softmax), rearranged so that nothing waits that need not:
  - one producer warpgroup (one thread) keeps rings of K and V tiles full, each tile with a "full" and an
    "empty" mbarrier, and gives its registers to the consumers (setmaxnreg);
  - each consumer warpgroup issues S_t = Q K_tᵀ and O += P_{t-1} V_{t-1} together and runs the softmax of S_t
    meaning it to run while P V is still on the tensor cores (ptxas decides: lesson 06 counts where it went);
  - with two consumers (three at d = 64), named barriers make them take turns at the tensor cores
    (ping-pong): one's softmax runs under another's wgmmas.
A causal tile stops after its last visible key tile (the tiles above the diagonal are never loaded).
  - a persistent grid: at most one block an SM, each walking work tiles (64 x consumers query rows of one head)
    with its rings running on, so that a tile's Q load and first K tile come in under the last tile's end.
"""
from __future__ import annotations

import ctypes

import numpy as np
from numba import cuda

from .. import device
from ..kit.rung import CudaRung
from . import s05_wgmma_tma as _s05
from .problem import check_config, rule_broken, start_launch

NAME = "06_warp_specialized"
TITLE = "a producer warpgroup and consumers in ping-pong (C++, sm_90a)"
PARAMS = {
    "consumers": {64: 3, 128: 2},   # consumer warpgroups a block (64 query rows each), by head dim: three at
                         # d = 64, where the softmax weighs as much as the products (lesson 06 measures
                         # both); at d = 128 three would spill (160 registers each)
    "bkv": 128,          # keys a tile: 64 or 128 (128 is faster at both d on the H100: the sweep recorded
                         # by tools/sweep_params.py in results/sweeps/)
    "stages": {64: 3, 128: 2},      # K tiles (and V tiles) in the TMA rings, by head dim
    "pingpong": True,    # the consumers take turns at the tensor cores (named barriers)
    "overlap": True,     # S_t and P_{t-1} V_{t-1} in flight together, the softmax of S_t under P V
    "persistent": True,  # one block an SM walking work tiles (False: a block a work tile); on an H200
                         # (tools/probe_attention_waves.py) it gained everywhere once causal tiles were
                         # claimed as blocks free up (lesson 06 gives the readings)
    "blocks": 0,         # persistent grid: 0 for one block an SM (no more than there are tiles), else this many
    "schedule": "dynamic",  # persistent grid: "dynamic" (a block claims its next tile from a counter as it frees
                         # up) or "static" (block b takes tiles b, b + blocks, ...); a block a tile ignores it
    "head_group": {64: 0, 128: 4},  # persistent and causal: tiles ranked longest first within groups of this
                         # many heads (0: all heads at once), by head dim; a small group keeps fewer heads' keys
                         # and values in the L2 (2 MB a head at d = 128)
}
ADDED_PARAMS = {"schedule": "static", "head_group": 0}   # what records older than these settings ran
                                                         # (results.not_today)
HEAD_DIMS = _s05.HEAD_DIMS
KERNEL_DIR = _s05.KERNEL_DIR
SOURCE = KERNEL_DIR / "warp_specialized.cu"
KERNEL = "attention_warp_specialized"
ARG_TYPES = _s05.ARG_TYPES
COMPILE_LOG_MISTAKES = _s05.COMPILE_LOG_MISTAKES
EMULATED = True               # without a GPU the CPU emulator runs it (cudabook.emulate: TMA, wgmma, named barriers)
RUNG = CudaRung(NAME, SOURCE, sm90a=True)
source, unavailable = RUNG.source, RUNG.unavailable


def config(d: int, causal: bool, consumers=PARAMS["consumers"], bkv=PARAMS["bkv"], stages=PARAMS["stages"],
           pingpong=PARAMS["pingpong"], overlap=PARAMS["overlap"], persistent=PARAMS["persistent"],
           blocks=PARAMS["blocks"], schedule=PARAMS["schedule"], head_group=PARAMS["head_group"]) -> dict:
    """The kernel's compile-time constants. A parameter given as {head dim: value} takes this d's value."""
    consumers, stages, persistent, schedule, head_group = (
        v.get(d, v[max(v)]) if isinstance(v, dict) else v
        for v in (consumers, stages, persistent, schedule, head_group))
    persistent, schedule, head_group = (v[bool(causal)] if isinstance(v, dict) else v     # by causal
                                        for v in (persistent, schedule, head_group))
    check_config(NAME, d, HEAD_DIMS, rule_broken("consumers", consumers, (1, 2, 3), "1, 2 or 3"),
                 None if consumers != 3 or d == 64 else
                 f"consumers=3 needs d=64, got d={d} (at d=128 a consumer's 160 registers spill)",
                 rule_broken("bkv", bkv, (64, 128), "64 or 128"),
                 rule_broken("stages", stages, range(1, 5), "1 to 4", whole=True),
                 *(f"{name} must be True or False, got {flag!r}"
                   for name, flag in (("pingpong", pingpong), ("overlap", overlap), ("persistent", persistent))
                   if not isinstance(flag, bool)),
                 None if isinstance(blocks, int) and not isinstance(blocks, bool) and blocks >= 0 else
                 f"blocks must be a whole number >= 0 (0: one block an SM), got {blocks!r}",
                 rule_broken("schedule", schedule, ("static", "dynamic"), '"static" or "dynamic"'),
                 None if isinstance(head_group, int) and not isinstance(head_group, bool) and head_group >= 0 else
                 f"head_group must be a whole number >= 0 (0: all heads), got {head_group!r}")
    cfg = dict(D=int(d), CONSUMERS=int(consumers), BKV=int(bkv), STAGES=int(stages), CAUSAL=int(bool(causal)),
               PINGPONG=int(pingpong), OVERLAP=int(overlap), PERSISTENT=int(persistent),
               DYNAMIC=int(schedule == "dynamic" and persistent), HEAD_GROUP=int(head_group))
    return cfg


def smem_bytes(cfg: dict) -> int:
    """Mirrors SMEM_BYTES in warp_specialized.cu: 1024 to align, Q, the K and V rings, 4 mbarriers a stage + Q's
    two (landed, released), and 8 bytes for the number of the next work tile."""
    tile = cfg["BKV"] * cfg["D"] * 2
    return 1024 + 64 * cfg["CONSUMERS"] * cfg["D"] * 2 + cfg["STAGES"] * 2 * tile + 8 * (4 * cfg["STAGES"] + 2) + 8


def tensor_maps(B, H, Nq, Nk, d, **params) -> dict:
    """The check_tiled arguments of the three maps (rung 05's, with Q boxes of 64 * consumers rows)."""
    cfg = config(d, False, **params)
    return _s05.tensor_maps(B, H, Nq, Nk, d, warpgroups=cfg["CONSUMERS"], bkv=cfg["BKV"])


def compile_cubin(arch="sm_90a", d: int = 128, causal: bool = False, source_text=None, **params) -> bytes:
    return RUNG.compile(config(d, causal, **params), arch=arch, source_text=source_text)


def launch(p, kernel=None, **params):
    """Enqueue 06 on the legacy default stream. `kernel`: the CUDA C++ text of a whole warp_specialized.cu to
    use instead (a learner's)."""
    params = start_launch(p, NAME, PARAMS, params, unavailable(), HEAD_DIMS)
    if params is None:
        return
    B, H, Nq, Nk, d = p.shape
    cfg = config(d, p.causal, **params)
    rows = 64 * cfg["CONSUMERS"]
    tiles = -(-Nq // rows) * B * H
    grid = (min(tiles, params["blocks"] or device.gpu().sms), 1) if cfg["PERSISTENT"] else None
    # the dynamic schedule's counters, zero at first; the kernel's last block sets them back to zero
    claimed = p.scratch("06_claimed", (2,), np.int32, make=lambda: cuda.to_device(np.zeros(2, np.int32)))
    _s05.launch_tma(p, RUNG, RUNG.text(kernel), KERNEL, cfg, smem_bytes(cfg), tensor_maps(*p.shape, **params),
                    rows=rows, threads=128 * (cfg["CONSUMERS"] + 1), grid=grid,
                    more=((B * H, ctypes.c_int), (device.address(claimed), ctypes.c_void_p)))
