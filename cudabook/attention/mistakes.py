"""The attention track's planted mistakes: learner-style wrong answers to its labs, as edits of the real lab
kernels (cudabook.mistakes; tests/machinery/test_lab_mistakes.py runs them through the grader).

Labs 02 and 03 (Numba), in the simulator only (a GPU may not show a race, and reading past the keys faults
silently there). The simulator runs every thread in Python and rung 02 does five warp shuffles a key, so
they are graded on a smaller version of the grader's cases (the same kinds: a causal ragged case, then Nq != Nk
over four tiles of keys). Lab 04 (C++, mma.sync and a cp.async ring): the grader names most mistakes from the
text, before any run; a wait one group too shallow only the emulator shows, with the copies landing as late as
the waits allow. Lab 05 (wgmma and TMA): graded on a Hopper GPU and in the emulator, which runs wgmma too.
"""
from ..mistakes import Mistake, phrases

KERNELS = {"02_online_softmax": "attention_online", "03_tiled": "attention_tiled"}
RACE = "a race"
# A missing barrier: the simulator's shared arrays (cudabook.simrace) stop the first access that no barrier orders
# after another thread's, whatever order the threads ran in: "a race on shared memory".
RACE_OR_NAN = RACE
RAGGED = "out of bounds for axis 2"      # the simulator's IndexError: a key row past Nk was read
SMALL_CASES = [
    ("causal, ragged, d=64", dict(B=1, H=2, Nq=12, Nk=12, d=64, causal=True)),   # H = 2: see checking's
    ("Nq != Nk, four tiles of keys, rising scores, d=128", dict(B=1, H=1, Nq=8, Nk=100, d=128, rise=0.5)),
]   # the second: later keys score higher, so every row's max grows past the first tile and a missing rescale shows
# (with plain random scores the rows' maxima are correlated through the keys, and now and then all of them lay in
# the first tile: seed 3154302754)
LOADS_DONE = "            Vs[t, c] = vx\n        cuda.syncthreads()                          # the tiles are complete"
READS_DONE = "        cuda.syncthreads()                          # everyone is done with the tiles: they may be overwritten"
_NUMBA = [  # (stage, what, edits of the lab region, a phrase the grader's message must hold (or one of a tuple),
              # or None when no hint names it yet)
    ("02_online_softmax", "scores scaled by 1/d instead of 1/sqrt(d)",
     [("s = warp_sum(part) * scale", "s = warp_sum(part) / float32(q.shape[3])")], "scaled by 1/d"),
    ("02_online_softmax", "the running max not applied to the accumulator",
     [("o[c] = o[c] * alpha + p * bf16_to_f32", "o[c] = o[c] + p * bf16_to_f32")],
     "accumulator was not rescaled when the running max grew (the output matches one key at a time)"),
    ("02_online_softmax", "no final division by l",
     [("f32_to_bf16(o[c] / l)", "f32_to_bf16(o[c])")], "not divided by the row sum"),
    ("02_online_softmax", "the causal mask off by one (keys j < i)",
     [("last = i + 1 if causal else Nk", "last = i if causal else Nk")], "hides the diagonal"),
    ("02_online_softmax", "the row sum l not rescaled (the accumulator is)",
     [("l = l * alpha + p", "l = l + p")], "the row sum l was not rescaled (the accumulator was)"),
    ("03_tiled", "no barrier after the tile loads: the scores read a K tile others are still writing",
     [(LOADS_DONE, "            Vs[t, c] = vx")], RACE_OR_NAN),
    ("03_tiled", "no barrier after the tile's use: the next tile's loads overwrite K and V still being read",
     [(READS_DONE, "        pass")], RACE),
    ("03_tiled", "the tile's offset into K missing: every tile scores the first tile's K",
     [("kx = bf16_to_f32(k[b, h, j0 + t, c])", "kx = bf16_to_f32(k[b, h, t, c])")], "scored with the first tile's K"),
    ("03_tiled", "the ragged end off by one: the tile loads read key Nk",
     [("if j0 + t < Nk:", "if j0 + t <= Nk:")], RAGGED),
    ("03_tiled", "the per-tile rescale missing",
     [("        for r in range(ROWS):                       # o = o * alpha + P V, for my channels of my rows\n"
       "            for c in range(PER_LANE):\n                o[r * PER_LANE + c] *= alpha[r]\n", "")],
     "accumulator was not rescaled when the running max grew (the output matches key tiles of 32)"),
    ("03_tiled", "no syncwarp between writing P to shared memory and reading it",
     [("        cuda.syncwarp(FULL_MASK)                    # every lane's p is in Ps\n", "")],
     ("a race on shared memory", "cuda.syncwarp()")),
    ("02_online_softmax", "p taken against the old max (exp(s - m), not exp(s - m_new))",
     [("p = math.exp(s - m_new)", "p = math.exp(s - m)")], "is the max subtracted before exp?"),
    # (a review's, 2026-11-30: they passed while every causal case had one head, where a row of the flattened
    # [B * H * Nq] numbering is the query's place in its sequence)
    ("02_online_softmax", "the causal limit from the flattened row (row + 1), not the query's place i",
     [("last = i + 1 if causal else Nk", "last = row + 1 if causal else Nk")], None),
    ("03_tiled", "the causal mask against the block's rows counted over every head (blockIdx.x * BQ), not i0",
     [("(not causal or j <= i0 + w * ROWS + r)", "(not causal or j <= cuda.blockIdx.x * BQ + w * ROWS + r)")], None),
    ("03_tiled", "the causal mask off by one in the diagonal tiles (keys j < i)",
     [("(not causal or j <= i0 + w * ROWS + r)", "(not causal or j < i0 + w * ROWS + r)")], "hides the diagonal"),
]


WAIT = "cp_async_wait<STAGES - 1>();"
ISSUE = "if (t + STAGES - 1 < tiles) load_kv(t + STAGES - 1, (t + STAGES - 1) % STAGES);"
COMMIT = "cp_async_commit();"
# (what, [(old, new) edits of the solution region], a phrase the grader must say). The grader names each from
# the text (LAB_TEXT_MISTAKES), before any run.
_LAB04_TEXT = [
    ("the barrier after the wait removed", [("__syncthreads();", "")], "no __syncthreads() after cp_async_wait"),
    ("the barrier before the wait", [("__syncthreads();", ""), (WAIT, "__syncthreads();\n" + WAIT)],
     "no __syncthreads() after cp_async_wait"),
    ("the copies issued into the stage being read (t % STAGES)", [("(t + STAGES - 1) % STAGES)", "t % STAGES)")],
     "the stage this pass is about to read"),
    ("the copies issued into slot s", [("(t + STAGES - 1) % STAGES)", "s)")], "the stage this pass is about to read"),
    ("the commit under the if", [(f"{ISSUE}\n        {COMMIT}", "if (t + STAGES - 1 < tiles) {\n    "
                                  "load_kv(t + STAGES - 1, (t + STAGES - 1) % STAGES);\n    cp_async_commit();\n}")],
     "cp_async_commit() sits under an if"),
]


# (what, old, new, a phrase the grader must say on a Hopper GPU, or None)
_LAB05 = [
    ("the scale 1/d instead of 1/sqrt(d)", "scale_log2", "(scale_log2 * rsqrtf((float)D))", "scaled by 1/d"),
    ("O not rescaled when the running max grows",
     "o[4 * n + 2 * h] *= alpha;\n        o[4 * n + 2 * h + 1] *= alpha;", "", "not rescaled"),
    ("the k16 step 16 bytes instead of 32", "const uint32_t off = 32 * (kk % 4);",
     "const uint32_t off = 16 * (kk % 4);", None),
    ("the causal mask off by one (j >= row)", "(CAUSAL && j > r)", "(CAUSAL && j >= r)", "diagonal"),
    ("LBO and SBO swapped in Q's descriptor", "smem_desc(q_rows + (kk / 4) * Q_BOX + off, 16, 1024)",
     "smem_desc(q_rows + (kk / 4) * Q_BOX + off, 1024, 16)", None),
    ("the row sum l not rescaled (O is)", "l[h] = l[h] * alpha + sum;", "l[h] = l[h] + sum;", "row sum l"),
    # (found by a review, 2026-11-30: they passed while every CPU case had under 64 keys at d = 128 and one key
    # tile when causal; attention's checking now adds cases of several tiles, and 05 a grading variant bkv=64)
    ("the causal half of the mask's skip test left out (only the tile past Nk masked)",
     "if (j0 + BKV > Nk || (CAUSAL && j0 + BKV - 1 > q0 + wg * 64 + warp * 16)) {", "if (j0 + BKV > Nk) {", None),
    ("the skip test against the warp's last row, not its first",
     "(CAUSAL && j0 + BKV - 1 > q0 + wg * 64 + warp * 16)", "(CAUSAL && j0 + BKV - 1 > q0 + wg * 64 + warp * 16 + 15)",
     None),
    ("O's rescale looping over S's column blocks (NS), not O's (NO)",
     "      for (int n = 0; n < NO; ++n) {\n        o[4 * n + 2 * h] *= alpha;",
     "      for (int n = 0; n < NS; ++n) {\n        o[4 * n + 2 * h] *= alpha;", None),
]

MISTAKES = (
    [Mistake(stage, what, tuple(edits), phrases(says), kernel=KERNELS[stage], cases_sim=tuple(SMALL_CASES),
             only=("sim: reading past the keys faults silently on a GPU; the simulator names it" if says == RAGGED
                   else None))      # on a GPU the grader's own run in the simulator finds a race the hardware hides
     for stage, what, edits, says in _NUMBA]
    + [Mistake("04_mma_cp_async", what, tuple(edits), ("Not graded yet", phrase), fails=(), gpu_says=True)
       for what, edits, phrase in _LAB04_TEXT]
    # wait_group<STAGES> leaves tile t in flight: with the copies landing as late as the waits allow (and shared
    # memory NaN until they do) the output is wrong; with them landing at once it is right, so the grader says
    # that the timing is what is wrong
    + [Mistake("04_mma_cp_async", "a wait one group too shallow", ((WAIT, "cp_async_wait<STAGES>();"),),
               ("copies landing at the last moment your waits allow", "FAIL", "WHEN it is read is not",
                "a wait one group too shallow"), fails=(), gpu_says=False, every=True,
               only="emulator: the copies' late landing is the emulator's")]
    # (on a GPU the hardware may show the race itself, and the grader says "a race"; read on an H200: it did.
    # Where it does not, the grader's emulator run gives the message above)
    + [Mistake("05_wgmma_tma", what, ((old, new),), (phrase,) if phrase else (), gpu_says=True, every=True)
       for what, old, new, phrase in _LAB05]
)
