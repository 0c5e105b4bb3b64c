"""Learner-style wrong answers to the resampling labs, as edits of the real lab kernels, run through the grader
itself: each must FAIL (or be reported as an error), never PASS, and its message must point at the mistake, or
at least never at a cause the data rules out. The grader's cases make every loop iterate more than once and
every tail matter (see cudabook/resample/__init__.py), so a kernel that only handles the first sweep, the first
word, the first block or whole groups cannot slip through.

Each mistake is (stage, what, edits of the lab kernel, a phrase the message must hold, helpers, sim_only).
`helpers` maps a device function the lab region calls to edits of it: the learner's own version of it (stage
02's 32-way search, say), written with a mistake. A phrase of None means no specific hint is expected; then no
hint may name a cause (all of them are listed in HINTS). Mistakes whose failure only the simulator shows (a race
that a GPU rarely hits, an out-of-bounds index or a mask the simulator checks) are skipped on a GPU.

Not here, because their output is right (only slower): lab 03 striding 32 words instead of 4 * 32 (the lanes'
16-byte accesses overlap and store the same values), and lab 04 loading the window's targets after the barrier
(each thread locates the very targets it loaded, so no thread reads another's).
"""
import collections

import pytest

from corpus.mutate import mutant
from cudabook import SIMULATOR, labs, resample

Mistake = collections.namedtuple("Mistake", "stage what edits says helpers sim_only", defaults=(None, {}, False))

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

MISTAKES = [
    # ---------------------------------------------------------------------------------------------- 01 naive
    Mistake("01_naive", "the output rounded by truncation, not to nearest",
            [("out[b, t, d] = f32_to_bf16(lerp(a, c, w))", "out[b, t, d] = np.uint16(_as_bits(lerp(a, c, w)) >> 16)")],
            "rounded toward zero"),
    Mistake("01_naive", "the batch index left out (every row reads row 0)",
            [("a = bf16_to_f32(feats[b, lo, d])", "a = bf16_to_f32(feats[0, lo, d])"),
             ("c = bf16_to_f32(feats[b, lo + 1, d])", "c = bf16_to_f32(feats[0, lo + 1, d])")],
            "only later batch rows"),
    Mistake("01_naive", "one channel fewer (the loop stops at D - 1)",
            [("for d in range(feats.shape[2]):", "for d in range(feats.shape[2] - 1):")], TAIL),
    Mistake("01_naive", "the float32 stored unrounded into the uint16 output",
            [("out[b, t, d] = f32_to_bf16(lerp(a, c, w))", "out[b, t, d] = lerp(a, c, w)")], "converted to integers"),
    Mistake("01_naive", "the weight measured from the wrong end of the interval",
            [("lerp(a, c, w)", "lerp(c, a, w)")], WHOLE_TARGETS),
    Mistake("01_naive", "the weight not clamped: targets outside the source range extrapolate",
            [("w = weight(times, b, lo, x)", "w = (x - times[b, lo]) / (times[b, lo + 1] - times[b, lo])")],
            "outside the source range"),
    Mistake("01_naive", "blockIdx.x forgotten: every block takes targets 0 .. blockDim.x - 1",
            [("t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x", "t = cuda.threadIdx.x")],
            "the last targets were never written"),
    # ------------------------------------------------------------------------------------- 02 warp shuffles
    Mistake("02_warp_shuffles", "one sweep of the lanes over the channels",
            [("for d in range(lane, feats.shape[2], WARP)", "for d in range(lane, WARP, WARP)")], TAIL),
    Mistake("02_warp_shuffles", "both ends from the same source row",
            [("c = bf16_to_f32(feats[b, lo + 1, d])", "c = bf16_to_f32(feats[b, lo, d])")], WHOLE_TARGETS),
    Mistake("02_warp_shuffles", "the weight shuffled from each lane's own value, not from lane 0",
            [("    w = warp_weight(times, b, lo, x, lane)\n",
              "    w = np.float32(0.0)\n    if lane == 0:\n        w = weight(times, b, lo, x)\n"
              "    w = cuda.shfl_sync(FULL_MASK, w, lane)\n")], WHOLE_TARGETS),
    Mistake("02_warp_shuffles", "a single ballot round (S = 200 needs two)", [], WHOLE_TARGETS,
            {SEARCH: [("while hi > lo:", "if hi > lo:")]}),
    Mistake("02_warp_shuffles", "the ballot's popcount off by one (the gap after the last probe below x)", [],
            ("raised an error", WHOLE_TARGETS),   # a search past the end, or (other data) wrong rows: all or most targets
            {SEARCH: [("lo = lo + 1 + (c - 1) * step", "lo = lo + c * step")]}, OFF_BY_ONE),
    Mistake("02_warp_shuffles", "the probe step rounded down: the probes stop short of the range's end", [],
            WHOLE_TARGETS, {SEARCH: [("step = (hi - lo + WARP - 1) // WARP", "step = max(1, (hi - lo) // WARP)")]}),
    Mistake("02_warp_shuffles", "a half-warp mask on the ballot that all 32 lanes call", [], "mask 0x0000ffff",
            {SEARCH: [("cuda.ballot_sync(FULL_MASK, below)", "cuda.ballot_sync(0xFFFF, below)")]},
            "sim: the simulator checks the mask; on a GPU a wrong mask is undefined behaviour"),
    Mistake("02_warp_shuffles", "the store indexed by the lane, not the channel",
            [("out[b, t, d] =", "out[b, t, lane] =")], "were never written for any target"),
    # ----------------------------------------------------------------------------------------- 03 coalesced
    Mistake("03_coalesced", "no loop over the row: one 16-byte sweep only (an if)",
            [("    for i in range(4 * lane, feats.shape[2], 4 * WARP):\n",
              "    i = 4 * lane\n    if i < feats.shape[2]:\n")], TAIL),
    Mistake("03_coalesced", "no loop over the row: one 16-byte sweep, unguarded",
            [("for i in range(4 * lane, feats.shape[2], 4 * WARP)", "for i in range(4 * lane, 4 * WARP, 4 * WARP)")],
            "IndexError", sim_only=OFF_BY_ONE),
    Mistake("03_coalesced", "the last word pair copied, not interpolated", [("lerp_pair(a3, c3, w))", "a3)")],
            "d % 8 in {6, 7}"),
    Mistake("03_coalesced", "the lanes start at word `lane`, not 4 * lane: 16-byte accesses misaligned",
            [("range(4 * lane,", "range(lane,")], "misaligned", sim_only="sim: the simulator checks alignment"),
    Mistake("03_coalesced", "both 16-byte loads from the lower row",
            [("load_u32x4(feats, b, lo + 1, i)", "load_u32x4(feats, b, lo, i)")], WHOLE_TARGETS),
    Mistake("03_coalesced", "the first two words of each 16 bytes stored swapped",
            [("lerp_pair(a0, c0, w), lerp_pair(a1, c1, w)", "lerp_pair(a1, c1, w), lerp_pair(a0, c0, w)")],
            "d % 8 in {0, 1, 2, 3}"),
    Mistake("03_coalesced", "the stride counted in channels (8 per lane), not words: every other sweep skipped",
            [("4 * WARP)", "8 * WARP)")], TAIL),
    # ------------------------------------------------------------------------------------ 04 shared windows
    Mistake("04_smem_windows", "no barrier between filling the window and locating the targets",
            [("load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)\n            cuda.syncthreads()",
              "load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)")], RACE,
            sim_only="sim: a race a GPU may not show"),
    Mistake("04_smem_windows", "no barrier between locating the targets and interpolating",
            [("locate_targets(smf, smi, TOFF, XOFF, LOFF, WOFF, nt, span, tid, nthr)\n            cuda.syncthreads()",
              "locate_targets(smf, smi, TOFF, XOFF, LOFF, WOFF, nt, span, tid, nthr)")], RACE,
            sim_only="sim: a race a GPU may not show"),
    Mistake("04_smem_windows", "the window's targets never loaded",
            [("load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)", "pass")], None),
    Mistake("04_smem_windows", "the window filled one row short (its last row never loaded)",
            [("sm32, smf, 0, TOFF, b, row0, span, c0", "sm32, smf, 0, TOFF, b, row0, span - 1, c0")], None),
    Mistake("04_smem_windows", "the targets located in one window row fewer than it holds",
            [("nt, span, tid, nthr)", "nt, span - 1, tid, nthr)")], WHOLE_TARGETS),
    Mistake("04_smem_windows", "the chunk's first column c0 left out of the stores",
            [("nt, c0, cw, vec, warp", "nt, 0, cw, vec, warp")], "channels 256 .. 271 were never written"),
    Mistake("04_smem_windows", "the last target of every run not interpolated (nt - 1)",
            [("LOFF, WOFF, b, t0, nt, c0", "LOFF, WOFF, b, t0, nt - 1, c0")], UNWRITTEN_TARGETS),
    # -------------------------------------------------------------------------------- 05 eight loads in flight
    Mistake("05_double_buffered", "only the first word interpolated",
            [("lerp2(a0, c0, w0), lerp2(a1, c1, w0), lerp2(a2, c2, w0), lerp2(a3, c3, w0)",
              "lerp2(a0, c0, w0), a1, a2, a3")], "d % 8 in {2, 3, 4, 5, 6, 7}"),
    Mistake("05_double_buffered", "the second target with the first's weight",
            [("lerp2(d0, e0, w1)", "lerp2(d0, e0, w0)")], WHOLE_TARGETS),
    Mistake("05_double_buffered", "no `i + q < n` guard: a group of four past the last target",
            [("store_element(out, o + Dc, ok and i + 1 < n, vec,", "store_element(out, o + Dc, ok, vec,")],
            "IndexError", sim_only=OFF_BY_ONE),
    Mistake("05_double_buffered", "the guard off by one (i + 3 <= n)", [("ok and i + 3 < n", "ok and i + 3 <= n")],
            "IndexError", sim_only=OFF_BY_ONE),
    Mistake("05_double_buffered", "the upper row one word on (r0 + 1), not one row (r0 + Dc)",
            [("load_element(feats, feats64, r0 + Dc, ok, vec)", "load_element(feats, feats64, r0 + 1, ok, vec)")],
            WHOLE_TARGETS, sim_only="sim: a misaligned 16-byte load ends a GPU's CUDA context for the whole process"),
    Mistake("05_double_buffered", "the first target's rows loaded upper first (the weight from the wrong end)",
            [("a0, a1, a2, a3 = load_element(feats, feats64, r0, ok, vec)\n"
              "        c0, c1, c2, c3 = load_element(feats, feats64, r0 + Dc, ok, vec)",
              "a0, a1, a2, a3 = load_element(feats, feats64, r0 + Dc, ok, vec)\n"
              "        c0, c1, c2, c3 = load_element(feats, feats64, r0, ok, vec)")], WHOLE_TARGETS),
    Mistake("05_double_buffered", "the second target stored over the first (o, not o + Dc)",
            [("store_element(out, o + Dc, ok and i + 1 < n", "store_element(out, o, ok and i + 1 < n")],
            UNWRITTEN_TARGETS),
    Mistake("05_double_buffered", "the fourth target stored at the third's offset (copy and paste)",
            [("store_element(out, o + 3 * Dc", "store_element(out, o + 2 * Dc")], UNWRITTEN_TARGETS),
]


def _id(m):
    return f"{m.stage[:2]}-{m.what[:48]}"


def test_every_numba_lab_has_five_mistakes():
    for stage in KERNELS:
        assert sum(m.stage == stage for m in MISTAKES) >= 5, stage


@pytest.mark.parametrize("m", MISTAKES, ids=_id)
def test_the_grader_fails_a_learner_mistake(m, capsys):
    if m.sim_only and not SIMULATOR:
        pytest.skip(m.sim_only)
    from cudabook.bits import _as_bits
    module = resample.stage(m.stage).__name__
    helpers = {name: mutant(module, name, edits) for name, edits in m.helpers.items()}
    wrong = mutant(module, KERNELS[m.stage], m.edits, _as_bits=_as_bits, **helpers)
    assert not labs.grade(m.stage, wrong), f"{m.stage}: '{m.what}' passed the grader"
    out = capsys.readouterr().out
    print(f"--- {m.stage}: {m.what}\n{out}")
    assert "FAIL" in out or "raised an error" in out, out
    if not SIMULATOR:
        return                        # the GPU's cases and failure modes differ: only the verdict is pinned there
    says = m.says if isinstance(m.says, tuple) else (m.says,) if m.says else ()
    if says:
        assert any(s in out for s in says), f"{m.stage}: '{m.what}': the message does not point at the mistake:\n{out}"
    hints = [line for line in out.split("\n") if line.startswith("Hint: ") and not any(s in line for s in says)]
    named = [h for h in HINTS if any(h in line for line in hints)]
    assert not named, f"{m.stage}: '{m.what}': the message names a cause the data rules out {named}:\n{out}"
