"""The GEMM track's planted mistakes: learner-style wrong answers to its labs, as edits of the real lab kernels,
that the grader must fail (cudabook.mistakes; tests/machinery/test_lab_mistakes.py runs them).

The Numba lab, 02_smem_tiles: edits of gemm_tiled. The grader's simulator cases have K = 20, 13, 1 and 37 with
TILE = 16: one to three K tiles, the last one partial; the grader also runs tiles of 8, so that a loop hard-coded
to the simulator's 16 fails there too. The C++ labs: edits of the solution region. Lab 04 (mma.sync) is graded on
every machine, in the CPU emulator where no GPU runs it (its table, _LAB04, says where each is caught); labs 05-07
(wgmma) on a GPU that runs the stage (a fresh process each: a trapped kernel or an illegal address leaves the CUDA
context of its process unusable); the mistakes the grader reads from the compiler's log or the code's text fail on
any machine (a missing wgmma wait may still give right results: ptxas inserts one, C7517).
Lab 08 (the FP8 k-tile) edits the region tagged `lab[08_fp8]` of clusters.cu, 07's file.
"""
from ..mistakes import Mistake

RACE = "a race"
INDEXING = "check the indexing of a and b"
NUMBA_HINTS = ("without the last", "without the first", "without the term(s)", "counted twice",
               "rounding inside the loop", "too small in magnitude", INDEXING, "never written", RACE, "still the TODO")
OUT_OF_BOUNDS = "sim: the simulator checks indices; on a GPU the read lands in memory nobody checks"
# (what, edits of gemm_tiled, a phrase the message must hold (or a tuple: each of them), why only the simulator
# shows it or None)
_NUMBA = [
    # (a review's, 2026-11-30: it passed while the simulator's shared arrays started as zeros, which A's zeros
    # cancelled; they start as NaN now, as a GPU's may hold)
    ("only A's tile zero-filled: B's elements past K or N keep what shared memory held",
     [("        b_val = float32(0.0)\n        if k0 + ty < K and n < N:\n            b_val = bf16_to_f32(b[k0 + ty, n])\n"
       "        Bs[ty, tx] = b_val",
       "        if k0 + ty < K and n < N:\n            Bs[ty, tx] = bf16_to_f32(b[k0 + ty, n])")],
     "in both tiles", "sim: the simulator's shared arrays start as NaN; a GPU's hold whatever was there"),
    ("the k loop of a tile stops one short (range(TILE - 1))", [("for k in range(TILE):", "for k in range(TILE - 1):")],
     "the last k of every", None),
    ("the K tiles counted rounding down: the last, partial tile skipped",
     [("for k0 in range(0, K, TILE):", "for k0 in range(0, K - TILE + 1, TILE):")], "without the last", None),
    ("no barrier after the loads: a tile read before every thread has written it",
     [("Bs[ty, tx] = b_val\n        cuda.syncthreads()", "Bs[ty, tx] = b_val")], RACE,
     None),       # on a GPU the grader's own run in the simulator finds the race the hardware may hide
    ("no barrier after the multiply-adds: the next tile overwrites one still being read",
     [("acc += As[ty, k] * Bs[k, tx]\n        cuda.syncthreads()", "acc += As[ty, k] * Bs[k, tx]")], RACE,
     None),
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
    ("the k loop hard-coded to 16, the simulator's tile (range(16), not range(TILE))",
     [("for k in range(TILE):", "for k in range(16):")], ("TILE = 8", "written as a number"), None),
    ("A's tile loaded with ty along K (the B pattern), its guard left on tx",
     [("a_val = bf16_to_f32(a[m, k0 + tx])", "a_val = bf16_to_f32(a[m, k0 + ty])")], "IndexError", OUT_OF_BOUNDS),
]


# The mistakes learners make, as edits of the solution region: (what, old, new, a phrase the grader must say).
_CUDA = {
    "05_wgmma_tma": [
        ("every warpgroup multiplies the stage's first 64 rows of A (wg's rows left out of the address)",
         "const uint32_t a = base + s * STAGE_BYTES + wg * 64 * 128;", "const uint32_t a = base + s * STAGE_BYTES;",
         None),
        ("A's k16 step of 16 bytes instead of 32 (16 bf16 are 32 bytes)", "a + 32 * kk", "a + 16 * kk", "wrong"),
        ("B treated as K-major: its k16 step along the row, not 16 rows down", "b + 2048 * kk", "b + 32 * kk",
         "wrong"),
        ("LBO and SBO swapped in B's descriptor", "smem_desc(b + 2048 * kk, B_BOX_BYTES, 1024)",
         "smem_desc(b + 2048 * kk, 1024, B_BOX_BYTES)", "wrong"),
        ("A's descriptor says 64-byte swizzle; the tensor map wrote 128-byte", "smem_desc(a + 32 * kk, 16, 1024)",
         "(smem_desc(a + 32 * kk, 16, 1024) & ~(3ull << 62) | 2ull << 62)", "wrong"),
        ("no wait: the stage is refilled while the wgmmas may still read it", "wgmma_wait<0>();", "",
         "the compiler had to step in"),
        ("no wgmma_fence before the wgmmas", "wgmma_fence();", "", "wgmma.fence"),
    ],
    "06_warp_specialized": [
        # (found by a review, 2026-11-30: before the CPU case of M = 150, N = 300, two tiles a block, both passed)
        ("every consumer multiplies the stage's first 64 rows of A (its own rows left out of the address)",
         "mma_k_tile(d, a + cw * 64 * 128, a + A_BYTES);", "mma_k_tile(d, a, a + A_BYTES);", None),
        ("lab 05's parity from the k-tile, (kt / STAGES) & 1: right in a block's first tile only",
         "mbar_wait(full + 8 * s, phase);", "mbar_wait(full + 8 * s, (kt / STAGES) & 1);", None),
        ("full barrier waited with the wrong parity (phase off by one)", "mbar_wait(full + 8 * s, phase);",
         "mbar_wait(full + 8 * s, phase ^ 1);", None),
        ("the stage is released before the wgmmas finished reading it", "wgmma_wait<0>();", "",
         "the compiler had to step in"),
        ("every thread of the warpgroup arrives on empty[s] (it counts one arrival a warpgroup)",
         "if (tid % 128 == 0) mbar_arrive(empty + 8 * s);", "mbar_arrive(empty + 8 * s);", None),
        ("the phase never flips: the second lap waits for a phase that already completed",
         "if (++s == STAGES) { s = 0; phase ^= 1; }", "if (++s == STAGES) { s = 0; }", None),
        ("the arrival on full[s], not empty[s]", "mbar_arrive(empty + 8 * s);", "mbar_arrive(full + 8 * s);", None),
        ("every k-tile read from stage 0 (the stage's address not advanced)", "const uint32_t a = base + s * STAGE_BYTES;",
         "const uint32_t a = base;", None),
        ("the stage released computed from kt (kt % STAGES), not carried in s: wrong in a persistent block's later "
         "tiles", "if (tid % 128 == 0) mbar_arrive(empty + 8 * s);",
         "if (tid % 128 == 0) mbar_arrive(empty + 8 * (kt % STAGES));", "the ring's slot is s"),
    ],
    "07_clusters": [
        ("every consumer multiplies the stage's first 64 rows of A (its own rows left out of the address)",
         "mma_k_tile(d, a + cw * 64 * 128, a + A_BYTES);", "mma_k_tile(d, a, a + A_BYTES);", None),
        ("the phase never flips: the second lap reads stages that are not full yet",
         "if (++s == STAGES) { s = 0; phase ^= 1; }", "if (++s == STAGES) { s = 0; }", None),
        ("the full barrier waited with the wrong parity", "mbar_wait(full + 8 * s, phase);",
         "mbar_wait(full + 8 * s, phase ^ 1);", None),
        ("wgmma_wait<2>: the previous k-tile's wgmmas may still read the stage it releases", "wgmma_wait<1>();",
         "wgmma_wait<2>();", None),
        ("the current stage released, not the previous one", "release(empty + 8 * prev);",
         "release(empty + 8 * s);", None),
        ("prev never set: no stage is ever released", "        prev = s;\n", "", None),
        ("every thread releases the stage, not the warpgroup's leader", "if (leader && prev >= 0)",
         "if (prev >= 0)", None),
        ("the stage to release computed from kt (kt % STAGES), not carried in s: wrong after the first tile",
         "prev = s;", "prev = kt % STAGES;", "the ring's slot is s"),
    ],
    # Lab 08, the FP8 k-tile: the region tagged lab[08_fp8] of clusters.cu (07's file), graded in the emulator.
    "08_fp8": [
        ("Bt's k32 step of 2048 bytes, 07's MN-major habit: Bt is K-major, k runs along its rows",
         "b + 32 * kk", "b + 2048 * kk", "32 bytes along the row"),
        ("BK / 16 steps, bf16's count of k16 steps: the last four start past the 128 bytes of K",
         "kk < BK / 32", "kk < BK / 16", "BK / 32 steps"),
        ("the bf16 wgmma (Wgmma<BN>) on e4m3 bytes", "WgmmaFp8<BN>::mma(d,", "Wgmma<BN>::mma<0>(d,", "need WgmmaFp8<BN>"),
        ("LBO and SBO swapped in Bt's descriptor", "smem_desc(b + 32 * kk, 16, 1024)",
         "smem_desc(b + 32 * kk, 1024, 16)", "SBO is the 1024 bytes"),
        ("Bt's descriptor says 64-byte swizzle; the tensor map wrote 128-byte", "smem_desc(b + 32 * kk, 16, 1024)",
         "(smem_desc(b + 32 * kk, 16, 1024) & ~(3ull << 62) | 2ull << 62)", "bits 62-63"),
        ("scale_d 0 on every wgmma: each k32 step overwrites the sums instead of adding to them", "1024), 1);",
         "1024), 0);", "scale_d = 0"),
    ],
}


# Lab 04 (mma.sync, a cp.async ring): graded on any machine, in the emulator where no GPU runs it. Its simulator
# cases include K = 300 (checking._STAGE_CASES_SIM): 10 slices, so the ring of 2, 3 or 4 stages turns and every
# stage is refilled. (what, edits of the region, the phrases the message must hold, where).
#   where: None, graded everywhere, and its phrases checked on a GPU too (they come from the text or the data's
#   pattern, the same there); "any": read from the text before any run (every machine); "emulator": graded in
#   the emulator only (a race a GPU rarely shows, or a shared-memory write past the block's, which on a GPU ends
#   the process's CUDA context).
PIPELINE = "if (kt + STAGES - 1 < KT)              // the stage of slice kt-1: nobody reads it any more"
BARRIER = "__syncthreads();                       // ...and everyone's: the next step may read them"
_LAB04 = [
    ("K-loop tail forgotten: the last slice is never loaded (its stage keeps an older slice)",
     [("if (kt + STAGES - 1 < KT)", "if (kt + STAGES - 1 < KT - 1)")],
     ("left out", "counted twice", "every K tile is loaded"), None),
    ("a slice skipped: copies run one slice too far ahead", [("(kt + STAGES - 1) * BK", "(kt + STAGES) * BK")],
     ("without the term(s) k = ",), None),
    # (found by a review, 2026-11-30: the grader's CPU cases all fit one block's first tile until M = 150, N = 300)
    ("the block's tile corner swapped (n0, m0 for m0, n0) in the copies",
     [("A, B, M, N, K, m0, n0, (kt + STAGES - 1) * BK", "A, B, M, N, K, n0, m0, (kt + STAGES - 1) * BK")], (), None),
    ("a k16 step where a slice starts: (kt + STAGES - 1) * 16, not * BK",
     [("(kt + STAGES - 1) * BK", "(kt + STAGES - 1) * 16")], ("not a multiple of BK", "counted twice"), None),
    ("the copies into the stage this pass reads (rs), not the free one (ws)",
     [("stage_a(ws), stage_b(ws)", "stage_a(rs), stage_b(rs)")], ("your copies go into stage rs",), None),
    ("the ring index not wrapping: the copies into stage kt + STAGES - 1, past the ring",
     [("stage_a(ws), stage_b(ws)", "stage_a(kt + STAGES - 1), stage_b(kt + STAGES - 1)")],
     ("outside the block's", "shared memory"), "emulator"),
    ("a wait one commit group short: slice kt+1 may still be in flight",
     [("cp_async_wait<STAGES - 2>();", "cp_async_wait<STAGES - 1>();")],
     ("WHEN it is read", "a wait one group too shallow"), "emulator"),
    ("the commit only when a slice was issued: the group count is off at the end of K",
     [("cp_async_commit();", "if (kt + STAGES - 1 < KT) cp_async_commit();")],
     ("Not graded yet", "cp_async_commit() sits under an if"), "any"),
    ("the commit before the copies: they join the next pass's group",
     [(PIPELINE, "cp_async_commit();\n" + PIPELINE),
      ("cp_async_commit();                     // always commit", "                     // always commit")],
     ("Not graded yet", "cp_async_commit() comes before load_slice"), "any"),
    ("the barrier moved before the copies: none after the wait",
     [(PIPELINE, "__syncthreads();\n" + PIPELINE), (BARRIER, "// (the barrier is above now)")],
     ("Not graded yet", "no __syncthreads() after cp_async_wait"), "any"),
]


def _lab04(what, edits, says, where):
    if where == "any":
        return Mistake("04_mma_sync", what, tuple(edits), says, fails=("Not graded yet",), gpu_says=True)
    if where == "emulator":
        return Mistake("04_mma_sync", what, tuple(edits), says, CUDA_FAILS + ("the emulated kernel stopped",),
                       only="emulator: a race a GPU rarely shows, or a write past the block's shared memory, which "
                            "on a GPU ends the CUDA context of the process")
    return Mistake("04_mma_sync", what, tuple(edits), says, CUDA_FAILS, gpu_says=True)


# what a C++ lab's grader says when it fails an attempt: a wrong output, an error, or a check before any run
CUDA_FAILS = ("FAIL", "raised an error", "the compiler had to step in", "Not graded yet", "the emulated kernel stopped")
# graded on any machine: the grader reads them from the compiler's log or the code's text, before any launch
ANY_MACHINE = {"the compiler had to step in": ("C7517", "wgmma_wait<0>()"), "cp_async_commit() sits under an if": (),
               "the ring's slot is s": ("Not graded yet",)}


def _cuda(stage, what, old, new, phrase):
    if phrase in ANY_MACHINE:
        return Mistake(stage, what, ((old, new),), (phrase, *ANY_MACHINE[phrase]), CUDA_FAILS, gpu_says=True,
                       every=True)
    return Mistake(stage, what, ((old, new),), (phrase,) if phrase else (), CUDA_FAILS, gpu_says=True, every=True,
                   only=None if _emulated(stage) else "hopper: graded where the stage runs, in a fresh process")


def _emulated(stage) -> bool:
    """The stage's own EMULATED: the CPU emulator runs it, so its mistakes are graded on every machine (the
    others where a Hopper GPU is)."""
    from importlib import import_module
    return getattr(import_module(f"{__package__}.s{stage}"), "EMULATED", False)


MISTAKES = (
    [Mistake("02_smem_tiles", what, tuple(edits), (says,) if isinstance(says, str) else says, kernel="gemm_tiled",
             only=sim_only, rules_out=NUMBA_HINTS)
     for what, edits, says, sim_only in _NUMBA]
    + [_lab04(*wrong) for wrong in _LAB04]
    + [_cuda(stage, *wrong) for stage, attempts in _CUDA.items() for wrong in attempts]
)
