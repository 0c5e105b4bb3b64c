"""04 mma.sync: the tensor cores, fed by ldmatrix from a swizzled cp.async ring (sm_80 and newer).

The kernel is CUDA C++ in kernels/mma_sync.cu, compiled at run time by NVRTC (cudabook.nvrtc) and launched
on the problem's Numba device arrays (their addresses through cudabook.device.address). It needs compute
capability 8.0 (sm_80) and nothing of Hopper's; without such a GPU the lab grader runs it on the CPU in
cudabook.emulate, which has all three of its instructions. Three instructions do the work:

    cp.async     16 bytes global -> shared without passing through registers; STAGES-1 k-slices in flight
    ldmatrix     a warp reads four 8 x 8 bf16 matrices from shared memory straight into mma fragments
                 (.trans for B, which is stored k-row by k-row)
    mma.sync     m16n8k16: one warp multiplies a 16 x 16 piece of A by a 16 x 8 piece of B into 16 x 8 floats

Shared memory is swizzled: the 16-byte chunks of each 128-byte line are permuted (slot XOR row number, or XOR
line number where short rows share a line), so the eight rows one ldmatrix pass reads always sit in different
banks. `swizzle=False` keeps plain row-major tiles: the same result, with 4- or 8-way bank conflicts.
`ldmatrix_banks` computes the picture in Python.

Any M, N, K >= 1: rows past M, columns past N and k past K are zero-filled by cp.async (src-size 0) and not
stored. 16-byte copies need 16-byte rows, so when K or N is not a multiple of 8 the stage works on zero-padded
copies (`Problem.aligned(8)`) and copies the [M, N] corner of C back.
"""
from __future__ import annotations

import ctypes
import pathlib
import re

from .. import device
from ..kit.rung import CudaRung

NAME = "04_mma_sync"
TITLE = "tensor cores: mma.sync, ldmatrix, a swizzled cp.async ring"
PARAMS = {
    "bm": 128,          # BM: rows of C per block
    "bn": 256,          # BN: columns of C per block
    "bk": 32,           # BK: the k-slice one pipeline stage holds: 32 or a multiple of 64 (two k16 mma steps or more)
    "warps_m": 2,       # warps along M; each warp owns a (bm / warps_m) x (bn / warps_n) tile of C
    "warps_n": 4,       # warps along N (8 warps of 64 x 64 by default: 128 float accumulators a thread)
    "stages": 3,        # pipeline depth: k-slices in shared memory, STAGES-1 of them in flight (the H100 sweep
                        # in results/sweeps/: 2 stages far behind 3, 4 about level with 3)
    "swizzle": True,    # XOR-swizzled shared tiles (no bank conflicts); False: plain row-major tiles
    "group_m": 8,       # blocks walk GROUP_M tile-rows column by column (L2 reuse); 1: plain row order
}
MIN_CC = (8, 0)
EMULATED = True               # without a GPU the lab grader runs this kernel on the CPU (cudabook.emulate)
KERNEL_DIR = pathlib.Path(__file__).parent / "kernels"
SOURCE = KERNEL_DIR / "mma_sync.cu"
KERNEL = "gemm_mma_sync"
ARG_TYPES = (ctypes.c_void_p,) * 3 + (ctypes.c_int,) * 3
RUNG = CudaRung(NAME, SOURCE, min_cc=MIN_CC)
source, unavailable = RUNG.source, RUNG.unavailable
# The lab grader runs its cases at these pipeline depths too: a wait one commit group short, or a commit that is
# skipped at the end of K, reads a slice still in flight, and that shows most at 2 stages (nothing else is in
# flight to hide it) and at 4 (more groups outstanding at the tail).
GRADING_VARIANTS = [{}, {"stages": 2}, {"stages": 4}]
# Mistakes the lab grader reads in the learner's text (comments removed), because a run almost never shows them:
# - a commit only when copies were issued leaves fewer groups than slices at the end of K, so the wait there lets
#   the last slice still be in flight (measured: right results on an H100 at 2, 3 and 4 stages, a race all the
#   same);
# - the commit before the copies: the copies join the next pass's group, so the wait counts one group short, and
#   the last slice's copies are never committed (a GPU mostly shows nothing);
# - no barrier after the wait: each thread waits for its own copies only. The emulator runs a block's threads in
#   turn and switches at warp operations, so every thread has passed its wait before any warp's next ldmatrix or
#   mma: it cannot show this race, and a GPU rarely does.
LAB_TEXT_MISTAKES = [
    (r"\bif\s*\((?:[^()]|\([^()]*\))*\)\s*(?:\{[^}]*)?cp_async_commit\s*\(|\belse\b\s*(?:\{[^}]*)?cp_async_commit\s*\(",
     "cp_async_commit() sits under an if. Commit on every pass, even when no copy was issued: then commit group "
     "g is always slice g, and cp_async_wait<N> counts right at the end of K too (otherwise the last slices "
     "can be read while still in flight: a race that a GPU rarely shows, so the grader looks for it here)"),
    (r"\A(?:(?!\bload_slice\b).)*\bcp_async_commit\s*\((?:(?!\bcp_async_commit\b).)*\bload_slice\s*\("
     r"(?:(?!\bcp_async_commit\b).)*\Z",
     "cp_async_commit() comes before load_slice(...), and no commit after it. A commit closes the group of the "
     "copies issued BEFORE it: yours close an empty group, and slice kt + STAGES - 1's copies join the next "
     "pass's group, so cp_async_wait<STAGES - 2> lets slice kt + 1 still be in flight (and the last slice's copies "
     "are never committed at all). Issue the copies, then commit"),
    (r"\A(?=.*\bcp_async_wait\b)(?!.*\bcp_async_wait\b.*\b__syncthreads\s*\()",
     "no __syncthreads() after cp_async_wait. The wait covers this thread's own copies only, and every thread "
     "copied a share of the slice: the barrier after it is what makes everyone's copies of slice kt + 1 visible "
     "before any warp reads them with ldmatrix. (A barrier before the copies is needed too, and the one after "
     "the wait is it: it also tells every warp that slice kt - 1's stage is no longer read)"),
]


def _copies_into_read_stage(code: str) -> bool:
    return re.search(r"\bload_slice\s*\(\s*stage_a\s*\(\s*(?:rs|\(?\s*kt\s*\)?\s*%\s*STAGES)\s*\)", code) is not None


def _ring_index_unwrapped(code: str) -> bool:
    m = re.search(r"\bload_slice\s*\(\s*stage_a\s*\(([^;]*?)\)\s*,", code)
    return m is not None and re.search(r"\bkt\b", m.group(1)) is not None and "%" not in m.group(1)


def _slice_start_without_bk(code: str) -> bool:
    call = re.search(r"\bload_slice\s*\(([^;]*)\)\s*;", code)
    return call is not None and re.search(r"\bBK\b", call.group(1)) is None


# Hints the grader adds to a failed case when the learner's text shows a likely cause the wrong outputs alone
# do not name: (test of the region's code, hint).
LAB_TEXT_HINTS = [
    (_copies_into_read_stage,
     "your copies go into stage rs (= kt % STAGES), the stage this pass reads: slice kt + STAGES - 1 belongs in "
     "stage ws (= (kt + STAGES - 1) % STAGES), the one slice kt - 1 used, which nobody reads any more; the ring's "
     "last stage is then never filled"),
    (_ring_index_unwrapped,
     "your stage index counts slices without wrapping: the ring has STAGES stages, so slice t goes into stage "
     "t % STAGES (ws keeps that count for you)"),
    (_slice_start_without_bk,
     "the k your load_slice(...) starts at is not a multiple of BK: slice t covers k = t * BK .. t * BK + BK - 1 "
     "(one slice is BK deep, not one k16 step), so slice kt + STAGES - 1 starts at (kt + STAGES - 1) * BK"),
]


def config(**params) -> dict:
    """The kernel's -D constants for these parameters (checked)."""
    p = RUNG.params(PARAMS, params)
    bm, bn, bk, wm, wn, st = (int(p[k]) for k in ("bm", "bn", "bk", "warps_m", "warps_n", "stages"))
    nt = 32 * wm * wn
    problems = []
    if wm < 1 or wn < 1 or nt > 1024:
        problems.append(f"warps_m * warps_n must be 1..32 (got {wm} x {wn})")
    elif bm % (16 * wm) or bn % (16 * wn) or bn % 32:
        problems.append(f"bm must be a multiple of 16 * warps_m, bn of 16 * warps_n and of 32 (got bm={bm}, "
                        f"bn={bn}, warps {wm} x {wn})")
    if not (bk == 32 or bk > 0 and bk % 64 == 0):
        problems.append(f"bk must be 32 or a multiple of 64 (got {bk})")
    elif nt <= 1024 and ((bm * bk // 8) % nt or (bk * bn // 8) % nt):
        problems.append(f"the {bm}x{bk} and {bk}x{bn} slices must split into 16-byte chunks evenly over {nt} threads")
    if st < 2:
        problems.append(f"stages must be at least 2 (got {st})")
    if int(p["group_m"]) < 1:
        problems.append(f"group_m must be at least 1 (got {p['group_m']})")
    if problems:
        raise ValueError(f"{NAME}: " + "; ".join(problems))
    return dict(BM=bm, BN=bn, BK=bk, WARPS_M=wm, WARPS_N=wn, STAGES=st, SWIZZLE=int(bool(p["swizzle"])),
                GROUP_M=int(p["group_m"]))


def smem_bytes(cfg: dict) -> int:
    """Dynamic shared memory per block; mirrors SMEM_BYTES in mma_sync.cu."""
    return cfg["STAGES"] * (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * 2


def threads(cfg: dict) -> int:
    return 32 * cfg["WARPS_M"] * cfg["WARPS_N"]


def compile_cubin(arch: str | None = "sm_90a", source_text: str | None = None, **params) -> bytes:
    """The cubin for these parameters (no GPU needed: arch defaults to sm_90a; None means this GPU's)."""
    return RUNG.compile(config(**params), arch=arch, source_text=source_text)


def plan(problem, **params) -> dict:
    """What launch() would do: the constants, grid, threads, shared memory, and whether C is padded."""
    cfg = config(**params)
    M, N, K = problem.shape
    padded = K % 8 != 0 or N % 8 != 0
    Np = -(-N // 8) * 8
    grid = -(-M // cfg["BM"]) * -(-Np // cfg["BN"])
    return dict(config=cfg, grid=grid, threads=threads(cfg), smem=smem_bytes(cfg), padded=padded)


def launch(problem, kernel=None, **params):
    """Enqueue C = A @ B on the legacy default stream (no sync). `kernel`: CUDA C++ source text to use instead
    of kernels/mma_sync.cu (a learner's version), compiled with this stage's constants."""
    cfg = config(**params)
    RUNG.require()
    smem = smem_bytes(cfg)
    kern = RUNG.prepare(RUNG.text(kernel), cfg, KERNEL, smem=smem, threads=threads(cfg),
                        advice="lower stages or the tile sizes (bm, bn, bk), or fewer warps")[KERNEL]
    M, N, K = problem.shape
    a, b, c, Kp, Np = problem.aligned(8)          # the problem's own arrays when K and N are multiples of 8
    grid = -(-M // cfg["BM"]) * -(-Np // cfg["BN"])
    kern.launch(grid, threads(cfg), [device.address(a), device.address(b), device.address(c), M, Np, Kp],
                ARG_TYPES, shared=smem)
    problem.copy_back(c)


# ------------------------------------------------------------------------------------------ the bank picture

def swizzled_chunk(row: int, chunk: int, chunks_per_row: int, swizzle: bool = True) -> int:
    """Where logical 16-byte chunk `chunk` of row `row` lives in a tile (its index in 16-byte units);
    mirrors swz() in mma_sync.cu."""
    if not swizzle:
        return row * chunks_per_row + chunk
    if chunks_per_row >= 8:
        return row * chunks_per_row + (chunk ^ (row & 7))
    u = row * chunks_per_row + chunk
    line = u >> 3
    return (u & ~7) | ((u & 7) ^ (line & 7))


def ldmatrix_banks(operand: str = "a", swizzle: bool = True, ks: int = 0, tile: int = 0, **params) -> list[int]:
    """The shared-memory bank (0..31) of the first word of each lane's ldmatrix row address, for lanes 0..31
    of warp 0, in the k16 step `ks` and fragment `tile` (A: the i-th m16 fragment; B: the pair of n8 fragments
    starting at 2 * tile), with this stage's tile sizes (**params, defaults PARAMS). Each lane's row is 16
    bytes: banks bank .. bank + 3."""
    cfg = config(**params)
    out = []
    for lane in range(32):
        if operand == "a":
            row, ch, cpr = tile * 16 + (lane & 15), ks * 2 + (lane >> 4), cfg["BK"] // 8
        elif operand == "b":
            row, ch, cpr = ks * 16 + (lane & 15), tile * 2 + (lane >> 4), cfg["BN"] // 8
        else:
            raise ValueError(f"operand must be 'a' or 'b', got {operand!r}")
        byte = swizzled_chunk(row, ch, cpr, swizzle) * 16
        out.append(byte // 4 % 32)
    return out


def conflict_ways(banks: list[int]) -> int:
    """How many passes the worst of ldmatrix.x4's four phases needs: each phase serves the eight 16-byte rows
    of one 8 x 8 matrix (lanes 8j .. 8j+7); rows in the same four banks are served one after another.
    1 means conflict-free."""
    worst = 1
    for j in range(len(banks) // 8):
        groups = [b // 4 for b in banks[8 * j:8 * j + 8]]
        worst = max(worst, max(groups.count(g) for g in set(groups)))
    return worst


# ------------------------------------------------------------------------------------------ who holds what

def mma_fragments():
    """Who holds which element in one mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"):
    {"a": [16, 16], "b": [16, 8], "c": [16, 8]} NumPy arrays of (lane, register) pairs, as two int arrays per
    operand: `lane[r, c]` and `reg[r, c]`, the register numbered as 16-bit halves for A and B (a0 low half = 0,
    a0 high half = 1, ...) and as floats for C. With g = lane // 4 and t = lane % 4:
        A (row-major 16 x 16):  a0 = rows g,   k 2t..2t+1    a1 = rows g+8, k 2t..2t+1
                                a2 = rows g,   k 2t+8..+9    a3 = rows g+8, k 2t+8..+9
        B (16 x 8, k x n):      b0 = k 2t..2t+1, column g    b1 = k 2t+8..2t+9, column g
        C (16 x 8):             c0, c1 = row g, columns 2t, 2t+1;   c2, c3 = row g+8, same columns"""
    import numpy as np
    out = {name: (np.full(shape, -1), np.full(shape, -1)) for name, shape in
           (("a", (16, 16)), ("b", (16, 8)), ("c", (16, 8)))}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg in range(4):                       # A: four 32-bit registers, two bf16 each
            r, k = g + 8 * (reg % 2), 2 * t + 8 * (reg // 2)
            for h in range(2):
                out["a"][0][r, k + h], out["a"][1][r, k + h] = lane, 2 * reg + h
        for reg in range(2):                       # B: two 32-bit registers, two bf16 each
            for h in range(2):
                k = 2 * t + 8 * reg + h
                out["b"][0][k, g], out["b"][1][k, g] = lane, 2 * reg + h
        for reg in range(4):                       # C: four floats
            r, c = g + 8 * (reg // 2), 2 * t + reg % 2
            out["c"][0][r, c], out["c"][1][r, c] = lane, reg
    return out
