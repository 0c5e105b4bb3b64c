"""05 lane groups (CUDA C++, sm_80 and newer): rung 02's layout and rounds, unrolled and branch-free.

The kernel is kernels/lane_groups.cu (read its header comment), compiled by NVRTC for D, L and P. A group of
G lanes serves one (image, query, head), each lane 16 bytes of the head's channels; a level's samples go in
unrolled rounds of 2G, lane g working out two samples and handing each to the group in five shuffles, every
corner loaded with no branch between the samples' 16-byte loads, so the compiler may issue them early (lesson 05
counts how many are in flight); items two heads at a time. With branchless=False every lane works out every sample
itself and skips off-map corners by branches (the rung's earlier way). Without a GPU the lab grader runs it in
cudabook.emulate.
"""
from __future__ import annotations

import ctypes
import pathlib

from .. import device
from ..kit.params import check_settings
from ..kit.rung import CudaRung
from .problem import start_launch

NAME = "05_lane_groups"
TITLE = "lane groups, unrolled branch-free rounds, head pairs (C++)"
PARAMS = {
    "threads": 512,        # threads a block (lesson 05 sweeps 128, 256, 512: results/sweeps/)
    "vectors": 1,          # 16-byte vectors a lane owns (1, 2 or 4): fewer lanes an item, fewer copies of the
                           # address arithmetic and fewer lanes to hand each sample to, more registers
    "branchless": True,    # load every corner (off-map ones from a pixel on the map, weight 0): no branch keeps
                           # a level's loads from being issued early; False skips off-map corners by branches
}
# The lab grader runs its cases with both settings of `branchless`: the lab region holds both paths (#if
# BRANCHLESS ... #else ... #endif), and a mistake in the one a single setting skips would pass.
GRADING_VARIANTS = [{}, {"branchless": False}]
MIN_CC = (8, 0)
EMULATED = True            # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate)
ASYNC_COPIES = False       # no cp.async, no TMA, no shared memory: the grader runs it once, and its messages do not
                           # speak of copies landing late or early
MAX_LEVELS = 8
KERNEL_DIR = pathlib.Path(__file__).parent / "kernels"
SOURCE = KERNEL_DIR / "lane_groups.cu"        # on the kit's hopper.cuh: pack_bf16x2
KERNEL = "msda_lane_groups"
RUNG = CudaRung(NAME, SOURCE, min_cc=MIN_CC)
source, unavailable = RUNG.source, RUNG.unavailable


def group_lanes(D: int, vectors: int = 1) -> int:
    """G: lanes a (image, query, head): the D / 8 vectors of a row over `vectors` a lane, rounded up to a power
    of two (the kernel's G)."""
    lanes = -(-(D // 8) // vectors)
    return 1 << max(0, (lanes - 1).bit_length())


def config(D: int, L: int, P: int, threads=PARAMS["threads"], branchless=PARAMS["branchless"],
           vectors=PARAMS["vectors"]) -> dict:
    if not 1 <= L <= MAX_LEVELS:
        raise ValueError(f"{NAME}: at most {MAX_LEVELS} levels (the loop over them is unrolled), got L = {L}")
    if vectors not in (1, 2, 4) or isinstance(vectors, bool):
        raise ValueError(f"{NAME}: vectors (16-byte vectors a lane) must be 1, 2 or 4, got {vectors!r}")
    check_settings(NAME, threads=threads, threads_multiple=32)
    return dict(DV=int(D), LV=int(L), PV=int(P), NT=int(threads), BRANCHLESS=int(bool(branchless)),
                VPL=int(vectors))


def compile_cubin(arch: str | None = "sm_90a", D: int = 32, L: int = 4, P: int = 8, source_text: str | None = None,
                  **params) -> bytes:
    """The cubin for these sizes (needs no GPU)."""
    cfg = config(D, L, P, **{**PARAMS, **params})
    return RUNG.compile(cfg, arch=arch, source_text=source_text)


ARG_TYPES = (ctypes.c_void_p,) * 6 + (ctypes.c_int,) * 4


def launch(p, kernel=None, **params):
    """Enqueue 05 on the legacy default stream. `kernel`: CUDA C++ source text to use instead of
    kernels/lane_groups.cu (a learner's version with the same kernel name)."""
    N, S, M, D, Lq, L, P = p.shape
    if M * -(-D // 8) * 16 >= 2 ** 31:
        raise ValueError(f"{NAME}: value's pixel rows are M * D = {M} x {D} bf16 ({M * -(-D // 8) * 16:,} bytes in "
                         f"16-byte vectors); the kernel keeps a row's byte pitch in 32 bits, so it must stay below 2**31")
    if S >= 2 ** 29:
        raise ValueError(f"{NAME}: value holds S = {S:,} pixels over its levels (value[N, S, M, D]); the kernel packs a "
                         f"sample's corner row with two step bits into one int (row * 4), so S must stay below 2**29")
    vectors = params.get("vectors", PARAMS["vectors"])
    lanes = N * Lq * M * group_lanes(D, vectors if vectors in (1, 2, 4) else 1)   # config refuses other values
    if lanes >= 2 ** 31:
        raise ValueError(f"{NAME}: N * Lq * M = {N} x {Lq} x {M} items of {lanes // (N * Lq * M)} lanes each make "
                         f"{lanes:,} threads; the kernel numbers its threads and items in 32 bits, so they must "
                         f"stay below 2**31")
    params = start_launch(p, NAME, PARAMS, params, unavailable())
    if params is None:
        return
    items = N * Lq * M
    cfg = config(D, L, P, **params)
    kern = RUNG.prepare(RUNG.text(kernel), cfg, KERNEL).main
    threads = cfg["NT"]
    blocks = -(-items * group_lanes(D, cfg["VPL"]) // threads)
    args = [device.address(p.value), device.address(p.shapes), device.address(p.starts), device.address(p.loc),
            device.address(p.attn), device.address(p.out), N, S, Lq, M]
    kern.launch(blocks, threads, args, ARG_TYPES)
