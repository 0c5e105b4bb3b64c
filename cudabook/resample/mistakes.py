"""The resampling track's planted mistakes: learner-style wrong answers to its labs, as edits of the real lab
kernels, that the grader must fail (cudabook.mistakes; tests/machinery/test_lab_mistakes.py runs them).

Labs 01-05 (Numba): each must FAIL (or be reported as an error), never PASS, and its message must point at the
mistake, or at least never at a cause the data rules out. The grader's cases make every loop iterate more than
once and every tail matter (see cudabook/resample/__init__.py), so a kernel that only handles the first sweep, the
first word, the first block or whole groups cannot slip through. `helpers` maps a device function the lab region
calls to edits of it: the learner's own version of it (stage 02's 32-way search, say), written with a mistake. A
phrase of None means no specific hint is expected; then no hint may name a cause (all of them are listed in
HINTS). Mistakes whose failure only the simulator shows (a race that a GPU rarely hits, an out-of-bounds index or
a mask the simulator checks) are skipped on a GPU.

Not here, because their output is right (only slower): lab 03 striding 32 words instead of 4 * 32 (the lanes'
16-byte accesses overlap and store the same values), and lab 04 loading the window's targets after the barrier
(each thread locates the very targets it loaded, so no thread reads another's).

Labs 06 and 07 (C++) are graded in the CPU emulator, where Numba runs in its simulator; lab 08 (C++) everywhere.
"""
from ..mistakes import Mistake, phrases

RACE = "a race"
TAIL = "a missing tail"
WHOLE_TARGETS = "w = 0 gives row lo"                 # the hint for targets wrong in every channel: rows or weight
UNWRITTEN_TARGETS = "were never written in any channel"
# The hints that name a cause: a mistake whose message carries one must expect it (its `says`). The data always
# rules out a zero time step (the inputs are validated: source times strictly increase).
HINTS = (TAIL, "channels d with d %", "the last targets were never written", "only later batch rows",
         "outside the source range", "converted to integers", "rounded toward zero", WHOLE_TARGETS,
         UNWRITTEN_TARGETS, "were never written for any target", RACE, "zero time step",
         "wrote over the start of those rows")
OFF_BY_ONE = "sim: a store or load one past the end raises in the simulator; on a GPU it lands where nobody checks"

KERNELS = {"01_naive": "resample_naive", "02_warp_shuffles": "resample_warp", "03_coalesced": "resample_vec16",
           "04_smem_windows": "resample_windows", "05_double_buffered": "resample_in_flight"}

SEARCH = "warp_find_interval"                        # stage 02's 32-way ballot search, as a learner writes it

def _lab(stage, what, edits, says=None, helpers=None, sim_only=False):
    """A Numba lab's mistake: (stage, what, edits of the lab kernel, a phrase the message must hold or a tuple of
    alternatives, helpers, why only the simulator shows it)."""
    return Mistake(stage, what, tuple(edits), phrases(says), kernel=KERNELS[stage],
                   helpers=tuple((name, tuple(e)) for name, e in (helpers or {}).items()),
                   names=(("_as_bits", "cudabook.bits"),), only=sim_only or None, rules_out=HINTS)


_NUMBA = [
    # ---------------------------------------------------------------------------------------------- 01 naive
    _lab("01_naive", "the output rounded by truncation, not to nearest",
         [("out[b, t, d] = f32_to_bf16(lerp(a, c, w))", "out[b, t, d] = np.uint16(_as_bits(lerp(a, c, w)) >> 16)")],
         "rounded toward zero"),
    _lab("01_naive", "the batch index left out (every row reads row 0)",
         [("a = bf16_to_f32(feats[b, lo, d])", "a = bf16_to_f32(feats[0, lo, d])"),
          ("c = bf16_to_f32(feats[b, lo + 1, d])", "c = bf16_to_f32(feats[0, lo + 1, d])")],
         "only later batch rows"),
    _lab("01_naive", "one channel fewer (the loop stops at D - 1)",
         [("for d in range(feats.shape[2]):", "for d in range(feats.shape[2] - 1):")], TAIL),
    _lab("01_naive", "the float32 stored unrounded into the uint16 output",
         [("out[b, t, d] = f32_to_bf16(lerp(a, c, w))", "out[b, t, d] = lerp(a, c, w)")], "converted to integers"),
    _lab("01_naive", "the weight measured from the wrong end of the interval",
         [("lerp(a, c, w)", "lerp(c, a, w)")], WHOLE_TARGETS),
    _lab("01_naive", "the weight not clamped: targets outside the source range extrapolate",
         [("w = weight(times, b, lo, x)", "w = (x - times[b, lo]) / (times[b, lo + 1] - times[b, lo])")],
         "outside the source range"),
    _lab("01_naive", "blockIdx.x forgotten: every block takes targets 0 .. blockDim.x - 1",
         [("t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x", "t = cuda.threadIdx.x")],
         "the last targets were never written"),
    # ------------------------------------------------------------------------------------- 02 warp shuffles
    _lab("02_warp_shuffles", "one sweep of the lanes over the channels",
         [("for d in range(lane, feats.shape[2], WARP)", "for d in range(lane, WARP, WARP)")], TAIL),
    _lab("02_warp_shuffles", "both ends from the same source row",
         [("c = bf16_to_f32(feats[b, lo + 1, d])", "c = bf16_to_f32(feats[b, lo, d])")], WHOLE_TARGETS),
    _lab("02_warp_shuffles", "the weight shuffled from each lane's own value, not from lane 0",
         [("    w = warp_weight(times, b, lo, x, lane)\n",
           "    w = np.float32(0.0)\n    if lane == 0:\n        w = weight(times, b, lo, x)\n"
           "    w = cuda.shfl_sync(FULL_MASK, w, lane)\n")], WHOLE_TARGETS),
    _lab("02_warp_shuffles", "a single ballot round (S = 200 needs two)", [], WHOLE_TARGETS,
         {SEARCH: [("while hi > lo:", "if hi > lo:")]}),
    _lab("02_warp_shuffles", "the ballot's popcount off by one (the gap after the last probe below x)", [],
         "IndexError",       # a search past the end: every grading case has targets past the last source time
         {SEARCH: [("lo = lo + 1 + (c - 1) * step", "lo = lo + c * step")]}, OFF_BY_ONE),
    _lab("02_warp_shuffles", "the probe step rounded down: the probes stop short of the range's end", [],
         WHOLE_TARGETS, {SEARCH: [("step = (hi - lo + WARP - 1) // WARP", "step = max(1, (hi - lo) // WARP)")]}),
    _lab("02_warp_shuffles", "a half-warp mask on the ballot that all 32 lanes call", [], "mask 0x0000ffff",
         {SEARCH: [("cuda.ballot_sync(FULL_MASK, below)", "cuda.ballot_sync(0xFFFF, below)")]},
         "sim: the simulator checks the mask; on a GPU a wrong mask is undefined behaviour"),
    _lab("02_warp_shuffles", "the store indexed by the lane, not the channel",
         [("out[b, t, d] =", "out[b, t, lane] =")], "were never written for any target"),
    # ----------------------------------------------------------------------------------------- 03 coalesced
    _lab("03_coalesced", "no loop over the row: one 16-byte sweep only (an if)",
         [("    for i in range(4 * lane, feats.shape[2], 4 * WARP):\n",
           "    i = 4 * lane\n    if i < feats.shape[2]:\n")], TAIL),
    _lab("03_coalesced", "no loop over the row: one 16-byte sweep, unguarded",
         [("for i in range(4 * lane, feats.shape[2], 4 * WARP)", "for i in range(4 * lane, 4 * WARP, 4 * WARP)")],
         "IndexError", sim_only=OFF_BY_ONE),
    _lab("03_coalesced", "the last word pair copied, not interpolated", [("lerp_pair(a3, c3, w))", "a3)")],
         "d % 8 in {6, 7}"),
    _lab("03_coalesced", "the lanes start at word `lane`, not 4 * lane: 16-byte accesses misaligned",
         [("range(4 * lane,", "range(lane,")], "misaligned", sim_only="sim: the simulator checks alignment"),
    _lab("03_coalesced", "both 16-byte loads from the lower row",
         [("load_u32x4(feats, b, lo + 1, i)", "load_u32x4(feats, b, lo, i)")], WHOLE_TARGETS),
    _lab("03_coalesced", "the first two words of each 16 bytes stored swapped",
         [("lerp_pair(a0, c0, w), lerp_pair(a1, c1, w)", "lerp_pair(a1, c1, w), lerp_pair(a0, c0, w)")],
         "d % 8 in {0, 1, 2, 3}"),
    _lab("03_coalesced", "the stride counted in channels (8 per lane), not words: every other sweep skipped",
         [("4 * WARP)", "8 * WARP)")], TAIL),
    # ------------------------------------------------------------------------------------ 04 shared windows
    # (the races are graded on GPUs too: where the hardware hides one, the grader's run in the simulator finds it)
    _lab("04_smem_windows", "no barrier between filling the window and locating the targets",
         [("load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)\n            cuda.syncthreads()",
           "load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)")], RACE),
    _lab("04_smem_windows", "no barrier between locating the targets and interpolating",
         [("locate_targets(smf, smi, TOFF, XOFF, LOFF, WOFF, nt, span, tid, nthr)\n            cuda.syncthreads()",
           "locate_targets(smf, smi, TOFF, XOFF, LOFF, WOFF, nt, span, tid, nthr)")], RACE),
    _lab("04_smem_windows", "the window's targets never loaded",
         [("load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)", "pass")], None),
    _lab("04_smem_windows", "the window filled one row short (its last row never loaded)",
         [("sm32, smf, 0, TOFF, b, row0, span, c0", "sm32, smf, 0, TOFF, b, row0, span - 1, c0")], None),
    _lab("04_smem_windows", "the targets located in one window row fewer than it holds",
         [("nt, span, tid, nthr)", "nt, span - 1, tid, nthr)")], WHOLE_TARGETS),
    _lab("04_smem_windows", "the chunk's first column c0 left out of the stores",
         [("nt, c0, cw, vec, warp", "nt, 0, cw, vec, warp")], "channels 256 .. 271 were never written"),
    _lab("04_smem_windows", "the last target of every run not interpolated (nt - 1)",
         [("LOFF, WOFF, b, t0, nt, c0", "LOFF, WOFF, b, t0, nt - 1, c0")], UNWRITTEN_TARGETS),
    # -------------------------------------------------------------------------------- 05 eight loads in flight
    _lab("05_double_buffered", "only the first word interpolated",
         [("lerp2(a0, c0, w0), lerp2(a1, c1, w0), lerp2(a2, c2, w0), lerp2(a3, c3, w0)",
           "lerp2(a0, c0, w0), a1, a2, a3")], "d % 8 in {2, 3, 4, 5, 6, 7}"),
    _lab("05_double_buffered", "the second target with the first's weight",
         [("lerp2(d0, e0, w1)", "lerp2(d0, e0, w0)")], WHOLE_TARGETS),
    _lab("05_double_buffered", "no `i + q < n` guard: a group of four past the last target",
         [("store_element(out, o + Dc, ok and i + 1 < n, vec,", "store_element(out, o + Dc, ok, vec,")],
         "IndexError", sim_only=OFF_BY_ONE),
    _lab("05_double_buffered", "the guard off by one (i + 3 <= n)", [("ok and i + 3 < n", "ok and i + 3 <= n")],
         "IndexError", sim_only=OFF_BY_ONE),
    _lab("05_double_buffered", "the upper row one word on (r0 + 1), not one row (r0 + Dc)",
         [("load_element(feats, feats64, r0 + Dc, ok, vec)", "load_element(feats, feats64, r0 + 1, ok, vec)")],
         WHOLE_TARGETS, sim_only="sim: a misaligned 16-byte load ends a GPU's CUDA context for the whole process"),
    _lab("05_double_buffered", "the first target's rows loaded upper first (the weight from the wrong end)",
         [("a0, a1, a2, a3 = load_element(feats, feats64, r0, ok, vec)\n"
           "        c0, c1, c2, c3 = load_element(feats, feats64, r0 + Dc, ok, vec)",
           "a0, a1, a2, a3 = load_element(feats, feats64, r0 + Dc, ok, vec)\n"
           "        c0, c1, c2, c3 = load_element(feats, feats64, r0, ok, vec)")], WHOLE_TARGETS),
    _lab("05_double_buffered", "the second target stored over the first (o, not o + Dc)",
         [("store_element(out, o + Dc, ok and i + 1 < n", "store_element(out, o, ok and i + 1 < n")],
         UNWRITTEN_TARGETS),
    _lab("05_double_buffered", "the fourth target stored at the third's offset (copy and paste)",
         [("store_element(out, o + 3 * Dc", "store_element(out, o + 2 * Dc")], UNWRITTEN_TARGETS),
]


_EMULATED = [  # (stage, what, old, new, words the message must hold)
    ("06_cp_async", "a wait one group too shallow", "cp_async_wait<STAGES - 1>()", "cp_async_wait<STAGES>()",
     ["WHEN it is read", "too shallow"]),
    ("06_cp_async", "no barrier after the wait", "__syncthreads();", "", ["WHEN it is read", "__syncthreads"]),
    ("06_cp_async", "the barrier before the wait",
     "cp_async_wait<STAGES - 1>();                       // this thread's copies for item k have landed...\n"
     "        __syncthreads();", "__syncthreads();\n        cp_async_wait<STAGES - 1>();", ["WHEN it is read"]),
    ("06_cp_async", "no wait at all", "cp_async_wait<STAGES - 1>();", "", ["WHEN it is read"]),
    # (threads in step hide it, and so do copies landing at once: only late copies with warp 0 run ahead show it,
    # the emulator's third way; a learner's slip found by a review, 2026-11-30)
    ("06_cp_async", "a barrier that orders one warp (__syncwarp for __syncthreads)",
     "__syncthreads();                                   // ...and so have everyone else's", "__syncwarp();",
     ["running ahead", "__syncwarp orders one warp"]),
    ("06_cp_async", "the copies of an item too far ahead", "fill(k + STAGES - 1,", "fill(k + STAGES,",
     ["FAIL", (WHOLE_TARGETS, "not the target's interval")]),
    ("06_cp_async", "the item ahead written for two stages (k + 1)", "fill(k + STAGES - 1,", "fill(k + 1,",
     ["FAIL", "stages=3"]),
    ("06_cp_async", "the wait before the copies are started",
     "fill(k + STAGES - 1, nitems, ntc, ndc, times, feats, targets, S, T, D, smem, x, win);  // (its barrier frees the stage)\n"
     "        cp_async_wait<STAGES - 1>();",
     "cp_async_wait<STAGES - 1>();\n"
     "        fill(k + STAGES - 1, nitems, ntc, ndc, times, feats, targets, S, T, D, smem, x, win);", ["WHEN it is read"]),
    ("07_tma", "a wrong byte count", "nbox * BOX_BYTES", "nbox * BOX_BYTES / 2", ["expect_tx says", "deliver"]),
    ("07_tma", "the bytes of the window's rows, not of its boxes", "nbox * BOX_BYTES", "n * DC * 2",
     ["expect_tx says", "deliver"]),
    ("07_tma", "a missing expect_tx", "mbar_expect_tx(full, nbox * BOX_BYTES + (TIMES_TMA ? WT_ROWS * 4 : 0));",
     "mbar_arrive(full);", ["expect_tx says 0 bytes"]),
    ("07_tma", "swapped coordinates", "it.d0, L + r * BOXR, it.b", "L + r * BOXR, it.d0, it.b", ["FAIL"]),
    ("07_tma", "one box only", "for (int r = 0; r < nbox; ++r)", "for (int r = 0; r < 1; ++r)",
     ["would never complete", "the boxes deliver"]),
    ("07_tma", "every box to the same place", "dst + r * BOX_BYTES", "dst", ["FAIL"]),
]


_FUSED_GATHER = [  # (what, old, new, words the message must hold: each a string, or a tuple of alternatives)
    ("the shuffle only in lanes with an element (a lane past the end never answers)",
     "const int from = __shfl_sync(0xffffffffu, src, i) + v;   // every lane shuffles, in range or not\n"
     "            to[u] = __shfl_sync(0xffffffffu, dst32, i) + v;\n"
     "            ws[u] = __shfl_sync(0xffffffffu, wt, i);\n"
     "            has[u] = e < E;\n"
     "            if (has[u]) {",
     "int from = 0;\n            has[u] = e < E;\n            if (has[u]) {\n"
     "                from = __shfl_sync(__activemask(), src, i) + v;\n"
     "                to[u] = __shfl_sync(__activemask(), dst32, i) + v;\n"
     "                ws[u] = __shfl_sync(__activemask(), wt, i);", ["DEADLOCK", "__shfl_sync", "have left", "reached by all 32 lanes"]),
    ("the upper row read as the next vector (+ 1)", "c[u][q] = __ldg(f + from + q * EPR + VPR);",
     "c[u][q] = __ldg(f + from + q * EPR + 1);", ["FAIL"]),
    ("a lane's vectors side by side (+ q), not a slot's width apart (+ q * EPR)",
     "a[u][q] = __ldg(f + from + q * EPR);\n                    c[u][q] = __ldg(f + from + q * EPR + VPR);",
     "a[u][q] = __ldg(f + from + q);\n                    c[u][q] = __ldg(f + from + q + VPR);", ["FAIL"]),
    ("lane 0's weight for every element", "ws[u] = __shfl_sync(0xffffffffu, wt, i);",
     "ws[u] = __shfl_sync(0xffffffffu, wt, 0);", ["FAIL"]),
    ("the rows swapped in the lerp", "lerp_vec(a[u][q], c[u][q], ws[u])", "lerp_vec(c[u][q], a[u][q], ws[u])",
     ["FAIL"]),
    ("the tail guard left out of the stores", "for (int u = 0; u < UNROLL; ++u)\n            if (has[u]) {",
     "for (int u = 0; u < UNROLL; ++u) {",
     ["FAIL", "wrote over the start of those rows"]),
    ("elements taken as single vectors (e / VPR), not slots of PPL vectors (e / EPR)",
     "const int i = min(e / EPR, nt - 1);                   // this element's target (kept in range)\n"
     "            const int v = e - (e / EPR) * EPR;",
     "const int i = min(e / VPR, nt - 1);\n            const int v = e - (e / VPR) * VPR;",
     [("FAIL", "an index past the end")]),
    ("the source row shuffled from this lane's own index", "__shfl_sync(0xffffffffu, src, i)",
     "__shfl_sync(0xffffffffu, src, lane)", ["FAIL", "this lane's own index"]),
    ("this lane's own weight, not the owning lane's", "ws[u] = __shfl_sync(0xffffffffu, wt, i);", "ws[u] = wt;",
     ["FAIL", "outside a shuffle"]),
    ("this lane's own source row", "const int from = __shfl_sync(0xffffffffu, src, i) + v;",
     "const int from = src + v;", ["FAIL", "outside a shuffle"]),
]


MISTAKES = (
    _NUMBA
    + [Mistake(stage, what, ((old, new),), tuple(words), fails=(),
               only="sim: the emulator runs where Numba runs in its simulator")
       for stage, what, old, new, words in _EMULATED]
    # (on an H200, the tail guard's hint was missing at the GPU's sizes, 743,244 of 3,096,000 outputs wrong: the
    # verdict FAILs, the words are pinned on a CPU only until diagnose finds it there too; issue 27)
    + [Mistake("08_fused_gather", what, ((old, new),), tuple(words), fails=(),
               gpu_says=not what.startswith("the tail guard"))
       for what, old, new, words in _FUSED_GATHER]
)
