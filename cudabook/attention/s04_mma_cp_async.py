"""04 tensor cores + cp.async (CUDA C++, sm_80 and newer): fused attention on mma.sync, K/V double-buffered.

The kernel is kernels/flash_mma.cu (read its header comment), compiled by NVRTC for d, the causal flag and the
tile sizes. A block holds 16 * warps query rows; each warp keeps its 16 rows of Q in registers as mma
fragments and walks the keys in tiles of `bkv`: S = Q K^T on mma.sync (ldmatrix from a swizzled cp.async ring
of `stages` K/V tiles), the online softmax in registers, P rounded to bf16 in place (the accumulator layout of
S is the operand layout of P), O += P V on mma.sync. The pipeline step (the lab) issues the copies of the tile
`stages - 1` ahead, then waits for the tile it is about to read.

The tensor-core pieces (cp.async, ldmatrix, mma.sync) are the kit's, one copy: kit/include/mma_sync.cuh.
"""
from __future__ import annotations

import ctypes
import pathlib

from .. import device
from ..kit.rung import CudaRung
from .problem import check_config, rule_broken, start_launch

NAME = "04_mma_cp_async"
TITLE = "tensor cores (mma.sync) and a cp.async K/V ring (C++)"
PARAMS = {
    "warps": 4,        # warps a block; each owns 16 query rows (a block: 16 * warps rows)
    "bkv": 64,         # keys a tile (a multiple of 16)
    "stages": 2,       # K/V tiles in shared memory; stages - 1 of them in flight while one is read
}
MIN_CC = (8, 0)
EMULATED = True               # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate)
# The lab grader also runs its cases with tiles of 16 keys: its cases (1 to 37 keys) are then 2 or 3 tiles and the
# ring turns. With 64-key tiles each is one tile, which the prologue's own wait covers: every mistake in the
# pipeline step would pass.
GRADING_VARIANTS = [{"bkv": 16}, {"bkv": 16, "stages": 3}, {}]
# Mistakes the lab grader reads in the learner's text (comments removed), because no run shows them reliably: a
# commit under the if (the last STAGES - 1 passes commit nothing, so the last wait lets tile t still be in flight; a GPU
# rarely shows it), and no barrier after the wait (each thread waits for its own copies only; the emulator runs
# the threads in turn and usually lands the others' copies before a warp reads them, so it rarely shows there).
# Copies into stage s (the stage being read) do fail in the emulator, but as NaN everywhere, which says nothing.
LAB_TEXT_MISTAKES = [
    (r"\bload_kv\s*\([^;]*,\s*(?:s|\(?\s*t\s*\)?\s*%\s*STAGES)\s*\)",
     "load_kv(..., s): the copies of tile t + STAGES - 1 go into stage s = t % STAGES, the stage this pass is "
     "about to read. They go into stage (t + STAGES - 1) % STAGES, the one tile t - 1 used: every warp finished "
     "reading it at the barrier that ended the last pass"),
    (r"\bif\s*\((?:[^()]|\([^()]*\))*\)\s*(?:\{[^}]*)?cp_async_commit\s*\(|\belse\b\s*(?:\{[^}]*)?cp_async_commit\s*\(",
     "cp_async_commit() sits under an if. Commit on every pass, even when no copy was issued: then commit group "
     "g is always tile g, and cp_async_wait<STAGES - 1> counts right at the last tiles too (otherwise tile t can "
     "be read while still in flight: a race that a GPU rarely shows, so the grader looks for it here)"),
    (r"\A(?!.*\bcp_async_wait\b.*\b__syncthreads\s*\()",
     "no __syncthreads() after cp_async_wait. The wait covers this thread's own copies only, and every thread "
     "copied a share of the K and V tiles: the barrier after it is what makes everyone's copies of tile t "
     "visible before any warp reads them"),
]
HEAD_DIMS = (64, 128)
KERNEL_DIR = pathlib.Path(__file__).parent / "kernels"
SOURCE = KERNEL_DIR / "flash_mma.cu"
KERNEL = "attention_mma"
ARG_TYPES = (ctypes.c_void_p,) * 4 + (ctypes.c_int,) * 2 + (ctypes.c_float,)
RUNG = CudaRung(NAME, SOURCE, min_cc=MIN_CC)
source, unavailable = RUNG.source, RUNG.unavailable


def config(d: int, causal: bool, warps=PARAMS["warps"], bkv=PARAMS["bkv"], stages=PARAMS["stages"]) -> dict:
    """The kernel's -D constants (checked)."""
    bad_warps = rule_broken("warps", warps, (1, 2, 4, 8), "1, 2, 4 or 8")
    uneven = not bad_warps and ((16 * warps * d // 8) % (32 * warps) or (bkv * d // 8) % (32 * warps))
    check_config(NAME, d, HEAD_DIMS, bad_warps,
                 uneven and f"the Q tile and a {bkv}-key tile must split into 16-byte chunks evenly over the threads",
                 rule_broken("bkv (keys a tile)", bkv, range(16, 257, 16), "a multiple of 16 from 16 to 256",
                             whole=True),
                 rule_broken("stages", stages, (2, 3, 4), "2, 3 or 4", whole=True))
    return dict(D=int(d), WARPS=int(warps), BKV=int(bkv), STAGES=int(stages), CAUSAL=int(bool(causal)))


def smem_bytes(cfg: dict) -> int:
    """Dynamic shared memory a block: the Q tile and `stages` K and V tiles (mirrors SMEM_BYTES)."""
    return 16 * cfg["WARPS"] * cfg["D"] * 2 + cfg["STAGES"] * 2 * cfg["BKV"] * cfg["D"] * 2


def compile_cubin(arch: str | None = "sm_90a", d: int = 128, causal: bool = False, source_text: str | None = None,
                  **params) -> bytes:
    """The cubin for these constants (needs no GPU)."""
    return RUNG.compile(config(d, causal, **params), arch=arch, source_text=source_text)


def launch(p, kernel=None, **params):
    """Enqueue 04 on the legacy default stream. `kernel`: CUDA C++ source text to use instead of
    kernels/flash_mma.cu (a learner's version, with the same kernel name)."""
    params = start_launch(p, NAME, PARAMS, params, unavailable(), HEAD_DIMS)
    if params is None:
        return
    B, H, Nq, Nk, d = p.shape
    cfg = config(d, p.causal, **params)
    smem = smem_bytes(cfg)
    kern = RUNG.prepare(RUNG.text(kernel), cfg, KERNEL, smem=smem)[KERNEL]
    grid = (-(-Nq // (16 * cfg["WARPS"])), B * H)
    args = [device.address(p.q), device.address(p.k), device.address(p.v), device.address(p.out), Nq, Nk,
            p.scale_log2]
    kern.launch(grid, 32 * cfg["WARPS"], args, ARG_TYPES, shared=smem)
