"""The deformable attention track's planted mistakes: learner-style wrong answers to its labs, as edits of the real
lab kernels (cudabook.mistakes; tests/machinery/test_lab_mistakes.py runs them through the grader).

Lab 01 (Numba): each must FAIL. The checker's own planted mistakes in rungs 01 and 02 (align_corners=True,
clamping, x/y swapped, weights or level starts left out, ...) are caught and named by the checker on one small
problem (tests/msda/test_msda_track.py); lab 02 has its own too, each with the words of the hint that the pattern
of its wrong outputs gives (another item's samples, the last samples left out, one corner weighed wrong by lane,
a corner read from the wrong row, only some heads wrong), the same whatever the random data (tools/hint_seeds.py),
and none of the other hints' words. Lab 03 (Numba, 2 x 2 x D tiles in shared
memory): a missing barrier, corners off the map not zeroed, corners or fractions mixed up, the wrong table entry
or tile slot. Lab 04 (TMA boxes, C++) in the emulator on a CPU, on a Hopper GPU for real; its cases include one of
L * P = 40 samples, so a producer without the loop over rounds of 32 samples fails (a deadlock the emulator ends and
explains). Lab 05 (lane groups, C++): the grader runs both paths of the region (branchless, the default, and
branchless=False, with branches); edits of each.
"""
from ..mistakes import Mistake
from .checking import BORROWED, LAST_SAMPLES, ONE_CORNER, PIXEL_MISREAD, UNSTAGED

# the distinctive words of each of the checker's hints (cudabook/msda/checking.py): a lab-02 mistake's message may
# hold none of them but those its own hint holds (a hint that names a cause the data rules out fails its test)
HINTS = ("align_corners=True", "padding_mode='border'", "x and y swapped", "without their attention weights",
         "floorf", "x0 + 1 <= W", "y0 + 1 <= H", "level_start_index[l]", "never written", "still the TODO",
         "nothing was added", "left out", "counted twice", "with the weight of the", PIXEL_MISREAD, BORROWED,
         ONE_CORNER, LAST_SAMPLES, "only head", "partly off the map", "rounding inside the loop")

_LAB01 = [  # (what, edits of s01's lab region): learner-style wrong answers the lab grader must FAIL
    ("align_corners=True positions", [("loc[n, q, m, l, p, 0] * float32(W) - float32(0.5)",
                                       "loc[n, q, m, l, p, 0] * float32(W - 1)"),
                                      ("loc[n, q, m, l, p, 1] * float32(H) - float32(0.5)",
                                       "loc[n, q, m, l, p, 1] * float32(H - 1)")]),
    ("x and y swapped", [("loc[n, q, m, l, p, 0] * float32(W)", "loc[n, q, m, l, p, 1] * float32(W)"),
                         ("loc[n, q, m, l, p, 1] * float32(H)", "loc[n, q, m, l, p, 0] * float32(H)")]),
    ("the level's start ignored", [("top = start + y0 * W + x0", "top = y0 * W + x0")]),
    ("the attention weight left out", [("acc += attn[n, q, m, l, p] * v", "acc += v")]),
    ("the bottom-right corner with the top-right's weight", [("v += fy * fx * bf16_to_f32", "v += (float32(1.0) - fy) * fx * bf16_to_f32")]),
    ("the lower corners one pixel right, not one row down (top + 1 for top + W)",
     [("bf16_to_f32(value[n, top + W, m, c])", "bf16_to_f32(value[n, top + 1, m, c])")]),
]


_LAB02 = [  # (what, edits of s02's lab region, the words its hint must hold): wrong answers the grader must FAIL
    ("shuffle from the warp's lane t, not the group's leader + t", [("src = leader + t", "src = t")], (BORROWED,)),
    ("the last round of samples dropped", [("for j0 in range(0, samples, lanes):",
                                            "for j0 in range(0, samples - lanes, lanes):")], (LAST_SAMPLES,)),
    ("each lane blends its own sample's weights, not sample t's (no shuffle)",
     [("c00 = cuda.shfl_sync(FULL_MASK, w00, src)", "c00 = w00")], ("top-left (x0, y0) corner's part", ONE_CORNER)),
    # (no hint: in the simulator a lane whose sample lies past the item's last looks up a level past spatial_shapes,
    # or a row past value, and raises; the grader reports the first error raised, which differs with the data)
    ("the level's width from the lane's own sample, not from sample j0 + t", [("W = shapes[(j0 + t) // P, 1]",
                                                                              "W = shapes[j // P, 1]")], ()),
    ("the lower-left corner one pixel right, not one row down",
     [("(top + W) * M + m, i, c10", "(top + 1) * M + m, i, c10")],
     (PIXEL_MISREAD, "bottom-left corner's weight fy (1 - fx) on the top-right")),
    ("the head's column left out of the top-left corner's row", [("top * M + m, i, c00", "top * M, i, c00")],
     ("only head", "value[n, row, m]")),
]


X_POS = "x = loc[n, q, m, l, p, 0] * float32(W) - float32(0.5)"
Y_POS = "y = loc[n, q, m, l, p, 1] * float32(H) - float32(0.5)"
BOUNDS = "if x > float32(-1.0) and y > float32(-1.0) and x < float32(W) and y < float32(H):"
_CHECKER = {  # {what: (stage, edits of the rung's kernel, a phrase the checker's message must hold)}
    "align_corners=True positions": ("01_naive", [(X_POS, "x = loc[n, q, m, l, p, 0] * float32(W - 1)"),
                                                  (Y_POS, "y = loc[n, q, m, l, p, 1] * float32(H - 1)")],
                                     "align_corners=True"),
    "clamped at the borders": ("01_naive", [(BOUNDS, "x = min(max(x, float32(0.0)), float32(W - 1))\n"
                                                     "            y = min(max(y, float32(0.0)), float32(H - 1))\n"
                                                     "            if True:")], "padding_mode='border'"),
    "x and y swapped": ("01_naive", [("loc[n, q, m, l, p, 0] * float32(W)", "loc[n, q, m, l, p, 1] * float32(W)"),
                                     ("loc[n, q, m, l, p, 1] * float32(H)", "loc[n, q, m, l, p, 0] * float32(H)")],
                        "x and y swapped"),
    "weights not applied": ("01_naive", [("acc += attn[n, q, m, l, p] * v", "acc += v")],
                            "without their attention weights"),
    "level start ignored": ("01_naive", [("top = start + y0 * W + x0", "top = y0 * W + x0")],
                            "level_start_index[l]"),
    "last channel never stored": ("01_naive", [("    out[n, q, m * D + c] = f32_to_bf16(acc)",
                                                "    if c < D - 1:\n        out[n, q, m * D + c] = f32_to_bf16(acc)")],
                                  "never written"),
    "shuffle from the warp's lane t, not the group's": ("02_warp_cooperative", [("src = leader + t", "src = t")], None),
    "last round of samples dropped": ("02_warp_cooperative", [("for j0 in range(0, samples, lanes):",
                                                               "for j0 in range(0, samples - lanes, lanes):")], None),
}


RACE = "a race"
STAGED = ("zero_vector(tile, at, WORDS)   # off the map: zeros, so the blend needs no border test\n"
          "            cuda.syncwarp(FULL_MASK)")
_LAB03 = [  # (what, edits of the lab region, a phrase the grader's message must hold)
    ("no barrier between staging the tile and blending it",
     [(STAGED, "zero_vector(tile, at, WORDS)")], RACE),
    ("no barrier after the blend: the next sample's tile overwrites one still being read",
     [("            cuda.syncwarp(FULL_MASK)               # everyone is done", "            # everyone is done")],
     RACE),
    ("no barrier between writing the table and reading it",
     [("cuda.syncwarp(FULL_MASK)                   # the table is complete", "pass")], RACE),
    ("corners off the map not written as zeros (the tile keeps the previous sample's)",
     [("                else:\n                    zero_vector(tile, at, WORDS)", "")], "FAIL"),
    ("the corner weights in the wrong order (top-right and bottom-left swapped)",
     [("weights[mine + 1] = w01", "weights[mine + 1] = w10"), ("weights[mine + 2] = w10", "weights[mine + 2] = w01")],
     "FAIL"),
    ("the x and y fractions swapped",
     [("fx = x - float32(x0)", "fx = y - float32(y0)"), ("fy = y - float32(y0)", "fy = x - float32(x0)")], "FAIL"),
    ("every lane stages its own sample's table entry, not sample t's",
     [("entry = TABLE + TABLE_WORDS * t", "entry = TABLE + TABLE_WORDS * g")], "FAIL"),
    ("every corner staged into the first corner's slot of the tile",
     [("at = TILE + c * half + v * WORDS", "at = TILE + v * WORDS")], UNSTAGED),
    ("the tile's corner slots counted in vectors, not words: 16-byte stores misaligned",
     [("at = TILE + c * half + v * WORDS", "at = TILE + c * nvec + v * WORDS")], "misaligned"),
    ("only the first corner staged (the loop stops at nvec)",
     [("for e in range(g, 4 * nvec, lanes):", "for e in range(g, nvec, lanes):")], "corners of every sample left out"),
]


_LAB04 = [  # (what, old, new, words in the message)
    ("the bytes of the boxes' slots, not of the boxes (BOX_STRIDE)", "(uint32_t)boxes * BOX_BYTES",
     "(uint32_t)boxes * BOX_STRIDE", ["expect_tx says", "deliver"]),
    ("a byte count for every sample, on the map or not", "(uint32_t)boxes * BOX_BYTES", "(uint32_t)LP * BOX_BYTES",
     ["expect_tx says", "deliver"]),
    ("no expect_tx: lane 0 only arrives", "if (lane == 0) mbar_expect_tx(full, (uint32_t)boxes * BOX_BYTES);",
     "if (lane == 0) mbar_arrive(full);", ["expect_tx says 0 bytes"]),
    ("x0 and y0 swapped in the box's coordinates", "0, m, x0s[r], y0s[r], n", "0, m, y0s[r], x0s[r], n", ["FAIL"]),
    ("the head left out of the coordinates (always head 0)", "0, m, x0s[r], y0s[r], n", "0, 0, x0s[r], y0s[r], n",
     ["FAIL"]),
    ("lane 0 arrives twice (with the bytes, then again), every other lane once: 33 arrivals on a count of 32",
     "if (lane != 0) mbar_arrive(full);", "mbar_arrive(full);", ["more arrivals"]),
    ("no loop over rounds of 32 samples: each lane asks for the box of sample `lane` only",
     "for (int r = 0; r < (LP + 31) / 32; ++r) {\n                const int i = r * 32 + lane;\n"
     "                if (on[r])",
     "{\n                const int i = lane, r = 0;\n                if (on[r])",
     ["expect_tx says", "deliver", "forty samples"]),
]


_LAB05 = [  # (what, old, new, every): edits of the branch-free path (the default), which the grader runs
    ("align_corners=True positions (no half-pixel shift)", "s.x * W - 0.5f, y = s.y * H - 0.5f",
     "s.x * (W - 1), y = s.y * (H - 1)", False),
    ("x and y swapped", "const float x = s.x * W - 0.5f, y = s.y * H - 0.5f",
     "const float x = s.y * H - 0.5f, y = s.x * W - 0.5f", False),
    ("the attention weight left out of one corner", "top && left ? a * (1.f - fy) * (1.f - fx) : 0.f",
     "top && left ? (1.f - fy) * (1.f - fx) : 0.f", False),
    ("every sample's corner row shuffled from the lane itself (g), not from lane j / 2",
     "__shfl_sync(FULL, j & 1 ? my_r1 : my_r0, j >> 1, G)", "__shfl_sync(FULL, j & 1 ? my_r1 : my_r0, g, G)", False),
    ("shuffles of width 32: every group gets the first group's samples",
     ", j >> 1, G)", ", j >> 1, 32)", True),
    ("the lane's two samples swapped in the shuffles: sample j takes lane j / 2's other sample",
     "j & 1 ? my_r1 : my_r0", "j & 1 ? my_r0 : my_r1", False),
    ("the second sample worked out from the first one's location",
     "work_out(make_float2(s2.z, s2.w), a2.y,", "work_out(make_float2(s2.x, s2.y), a2.y,", False),
    ("the row packed without its steps: all four corners read the top-left pixel",
     "((start + yt * W + xl) << 2) | ((yb - yt) << 1) | (xr - xl)", "((start + yt * W + xl) << 2)", False),
]
_LAB05_OOB = [  # (what, old, new): edits whose rows run past the map: the emulator stops them; a GPU may fault
    ("dx and dy read from each other's bits", "packed & 1, dyW = packed & 2 ? W : 0",
     "(packed & 2) >> 1, dyW = packed & 1 ? W : 0"),
    ("the packed row used without shifting its step bits off", "const int r00 = packed >> 2;",
     "const int r00 = packed;"),
]
# (what, old, new, words): an edit whose corner row falls just before the image: the emulator fills the bytes
# before each array with NaN, so a NaN weighed by 0 shows; on a GPU the read lands in memory that exists (the image
# before) or just before the allocation. (A learner's slip found by a review, 2026-11-30: it passed before.)
_LAB05_BEFORE = [
    ("x0, y0 not zeroed off the map: the clamps cross and a corner's row falls before the image",
     "const int x0 = on ? (int)fx0 : 0, y0 = on ? (int)fy0 : 0;", "const int x0 = (int)fx0, y0 = (int)fy0;",
     ["NaN", "before each array"]),
]
_LAB05_BRANCHES = [  # (what, old, new, words): edits of the path with branches (branchless=False), graded too
    ("(int)x, not floorf: a position in (-1, 0) truncated to pixel 0 (branches)",
     "const float fx0 = floorf(x), fy0 = floorf(y), fx = x - fx0, fy = y - fy0;\n"
     "                const int x0 = (int)fx0, y0 = (int)fy0;",
     "const int x0 = (int)x, y0 = (int)y;\n                const float fx = x - x0, fy = y - y0;",
     ["branchless=False", "floorf"]),
    ("the right neighbour tested with <= W: a corner one past the row read (branches)",
     "left = x0 >= 0, right = x0 + 1 < W,", "left = x0 >= 0, right = x0 + 1 <= W,",
     ["branchless=False", "x0 + 1 < W"]),
]


def _lab03(what, edits, says):
    only = ("sim: simulator only: a GPU may not show a race, and a misaligned access ends its CUDA context for the "
            "whole process") if says in (RACE, "misaligned") else None
    return Mistake("03_smem_tiles", what, tuple(edits), (says,), kernel="msda_tiles", only=only)


def _lab04(what, old, new, words):
    only = None if "FAIL" in words else ("sim: on a GPU a barrier that never completes ends in the watchdog's "
                                         "trap, which ends the CUDA context for the whole process: the emulator "
                                         "tests it")
    # (on a GPU a wrong byte count is a trap after the watchdog's time: only the verdict is pinned there)
    return Mistake("04_tma_boxes", what, ((old, new),), tuple(words), fails=(), only=only)


MISTAKES = (
    [Mistake("01_naive", what, tuple(edits), fails=("FAIL",), kernel="msda_naive") for what, edits in _LAB01]
    + [Mistake("02_warp_cooperative", what, tuple(edits), says, fails=("FAIL", "raised an error"), kernel="msda_warp",
               rules_out=HINTS)
       for what, edits, says in _LAB02]
    + [Mistake(stage, what, tuple(edits), (expect,) if expect else (), fails=(),
               kernel="msda_naive" if stage == "01_naive" else "msda_warp", id=f"checker: {what}",
               only="checker: the checker's own test runs it on one small problem")
       for what, (stage, edits, expect) in _CHECKER.items()]
    + [_lab03(*m) for m in _LAB03]
    + [_lab04(*m) for m in _LAB04]
    + [Mistake("05_lane_groups", what, ((old, new),), fails=("FAIL",), every=every) for what, old, new, every in _LAB05]
    + [Mistake("05_lane_groups", what, ((old, new),), fails=("FAIL", "the emulated kernel stopped"),
               only="emulator: a corner row past the map reads past value, which on a GPU may be past the "
                    "allocation: an illegal address ends the process's CUDA context")
       for what, old, new in _LAB05_OOB]
    + [Mistake("05_lane_groups", what, ((old, new),), tuple(words), fails=("FAIL",),
               only="emulator: a read just before the image returns what lies there on a GPU, weighed by 0")
       for what, old, new, words in _LAB05_BEFORE]
    + [Mistake("05_lane_groups", what, ((old, new),), tuple(words), fails=("FAIL", "the emulated kernel stopped"),
               only=None if "floorf" in words else
               "emulator: the last row's right corner is read past the end of value, which on a GPU may be past "
               "the allocation: an illegal address ends the process's CUDA context")
       for what, old, new, words in _LAB05_BRANCHES]
)
