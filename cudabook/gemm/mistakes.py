"""The GEMM track's planted mistakes: learner-style wrong answers to its labs, as edits of the real lab kernels,
that the grader must fail (cudabook.mistakes; tests/machinery/test_lab_mistakes.py runs them).

The Numba lab, 02_smem_tiles: edits of gemm_tiled. The grader's simulator cases have K = 20, 13, 1 and 37 with
TILE = 16: two or three K tiles, the last one partial. The C++ labs (04-07): edits of the solution region, graded
on a GPU that runs the stage (a fresh process each: a trapped kernel or an illegal address leaves the CUDA context
of its process unusable); the mistakes the grader reads from the compiler's log or the code's text fail on any
machine (a missing wgmma wait may still give right results: ptxas inserts one, C7517).
"""
from ..mistakes import Mistake

RACE = "a race"
INDEXING = "check the indexing of a and b"
NUMBA_HINTS = ("without the last", "without the first", "without the term(s)", "counted twice",
               "rounding inside the loop", "too small in magnitude", INDEXING, "never written", RACE, "still the TODO")
OUT_OF_BOUNDS = "sim: the simulator checks indices; on a GPU the read lands in memory nobody checks"
# (what, edits of gemm_tiled, a phrase the message must hold, why only the simulator shows it or None)
_NUMBA = [
    ("the k loop of a tile stops one short (range(TILE - 1))", [("for k in range(TILE):", "for k in range(TILE - 1):")],
     "the last k of every", None),
    ("the K tiles counted rounding down: the last, partial tile skipped",
     [("for k0 in range(0, K, TILE):", "for k0 in range(0, K - TILE + 1, TILE):")], "without the last", None),
    ("no barrier after the loads: a tile read before every thread has written it",
     [("Bs[ty, tx] = b_val\n        cuda.syncthreads()", "Bs[ty, tx] = b_val")], RACE,
     "sim: a race a GPU may not show"),
    ("no barrier after the multiply-adds: the next tile overwrites one still being read",
     [("acc += As[ty, k] * Bs[k, tx]\n        cuda.syncthreads()", "acc += As[ty, k] * Bs[k, tx]")], RACE,
     "sim: a race a GPU may not show (one tile ahead, rare at one tile per block)"),
    ("the B tile read transposed in the multiply-adds", [("As[ty, k] * Bs[k, tx]", "As[ty, k] * Bs[tx, k]")],
     INDEXING, None),
    ("the sum rounded to bf16 at every step", [("acc += As[ty, k] * Bs[k, tx]",
                                                "acc = bf16_to_f32(f32_to_bf16(acc + As[ty, k] * Bs[k, tx]))")],
     "rounding inside the loop", None),
    ("no zero fill past the edges: the last K tile keeps the previous tile's values",
     [("            a_val = bf16_to_f32(a[m, k0 + tx])\n        As[ty, tx] = a_val",
       "            As[ty, tx] = bf16_to_f32(a[m, k0 + tx])"),
      ("            b_val = bf16_to_f32(b[k0 + ty, n])\n        Bs[ty, tx] = b_val",
       "            Bs[ty, tx] = bf16_to_f32(b[k0 + ty, n])")], "counted twice", None),
    ("A's tile loaded with ty along K (the B pattern), its guard left on tx",
     [("a_val = bf16_to_f32(a[m, k0 + tx])", "a_val = bf16_to_f32(a[m, k0 + ty])")], "IndexError", OUT_OF_BOUNDS),
]


# The mistakes learners make, as edits of the solution region: (what, old, new, a phrase the grader must say).
_CUDA = {
    "04_mma_sync": [
        ("K-loop tail forgotten: the last slice is never loaded (its stage keeps an older slice)",
         "if (kt + STAGES - 1 < KT)", "if (kt + STAGES - 1 < KT - 1)", "every K tile is loaded"),
        ("a slice skipped: copies run one slice too far ahead", "(kt + STAGES - 1) * BK", "(kt + STAGES) * BK",
         "wrong"),
        ("a wait one commit group short: slice kt+1 may still be in flight", "cp_async_wait<STAGES - 2>();",
         "cp_async_wait<STAGES - 1>();", None),
        ("the commit only when a slice was issued: the group count is off at the end of K",
         "cp_async_commit();", "if (kt + STAGES - 1 < KT) cp_async_commit();", "cp_async_commit() sits under an if"),
    ],
    "05_wgmma_tma": [
        ("A's k16 step of 16 bytes instead of 32 (16 bf16 are 32 bytes)", "a + 32 * kk", "a + 16 * kk", "wrong"),
        ("B treated as K-major: its k16 step along the row, not 16 rows down", "b + 2048 * kk", "b + 32 * kk",
         "wrong"),
        ("LBO and SBO swapped in B's descriptor", "smem_desc(b + 2048 * kk, B_BOX_BYTES, 1024)",
         "smem_desc(b + 2048 * kk, 1024, B_BOX_BYTES)", "wrong"),
        ("A's descriptor says 64-byte swizzle; the tensor map wrote 128-byte", "smem_desc(a + 32 * kk, 16, 1024)",
         "(smem_desc(a + 32 * kk, 16, 1024) & ~(3ull << 62) | 2ull << 62)", "wrong"),
        ("no wait: the stage is refilled while the wgmmas may still read it", "wgmma_wait<0>();", "",
         "the compiler had to step in"),
    ],
    "06_warp_specialized": [
        ("full barrier waited with the wrong parity (phase off by one)", "mbar_wait(full + 8 * s, phase);",
         "mbar_wait(full + 8 * s, phase ^ 1);", None),
        ("the stage is released before the wgmmas finished reading it", "wgmma_wait<0>();", "",
         "the compiler had to step in"),
    ],
    "07_clusters": [
        ("the phase never flips: the second lap reads stages that are not full yet",
         "if (++s == STAGES) { s = 0; phase ^= 1; }", "if (++s == STAGES) { s = 0; }", None),
        ("the full barrier waited with the wrong parity", "mbar_wait(full + 8 * s, phase);",
         "mbar_wait(full + 8 * s, phase ^ 1);", None),
    ],
}


# what a C++ lab's grader says when it fails an attempt: a wrong output, an error, or a check before any run
CUDA_FAILS = ("FAIL", "raised an error", "the compiler had to step in", "Not graded yet")
# graded on any machine: the grader reads them from the compiler's log or the code's text, before any launch
ANY_MACHINE = {"the compiler had to step in": ("C7517", "wgmma_wait<0>()"), "cp_async_commit() sits under an if": ()}


def _cuda(stage, what, old, new, phrase):
    if phrase in ANY_MACHINE:
        return Mistake(stage, what, ((old, new),), (phrase, *ANY_MACHINE[phrase]), CUDA_FAILS, gpu_says=True,
                       every=True)
    return Mistake(stage, what, ((old, new),), (phrase,) if phrase else (), CUDA_FAILS, gpu_says=True, every=True,
                   only="hopper: graded where the stage runs, in a fresh process")


MISTAKES = (
    [Mistake("02_smem_tiles", what, tuple(edits), (says,), kernel="gemm_tiled", only=sim_only, rules_out=NUMBA_HINTS)
     for what, edits, says, sim_only in _NUMBA]
    + [_cuda(stage, *wrong) for stage, attempts in _CUDA.items() for wrong in attempts]
)
