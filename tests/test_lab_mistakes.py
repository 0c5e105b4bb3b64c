"""Learner-style wrong answers to the resampling labs, as edits of the real lab kernels, run through the grader
itself: each must FAIL (or be reported as an error), never PASS. The grader's cases make every loop iterate more
than once and every tail matter (see cudabook/resample/__init__.py), so a kernel that only handles the first
sweep, the first word or whole groups cannot slip through."""
import pytest

from corpus.mutate import mutant
from cudabook import SIMULATOR, labs

MISTAKES = [  # (stage, module, lab function, what, [(old, new)])
    ("01_naive", "s01_naive", "resample_naive", "the output rounded by truncation, not to nearest",
     [("out[b, t, d] = f32_to_bf16(lerp(a, c, w))", "out[b, t, d] = np.uint16(_as_bits(lerp(a, c, w)) >> 16)")]),
    ("01_naive", "s01_naive", "resample_naive", "the batch index left out (every row reads row 0)",
     [("a = bf16_to_f32(feats[b, lo, d])", "a = bf16_to_f32(feats[0, lo, d])"),
      ("c = bf16_to_f32(feats[b, lo + 1, d])", "c = bf16_to_f32(feats[0, lo + 1, d])")]),
    ("01_naive", "s01_naive", "resample_naive", "one channel fewer (the loop stops at D - 1)",
     [("for d in range(feats.shape[2]):", "for d in range(feats.shape[2] - 1):")]),
    ("04_smem_windows", "s04_smem_windows", "resample_windows", "no barrier between filling and locating",
     [("load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)\n            cuda.syncthreads()",
       "load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)")]),
    ("04_smem_windows", "s04_smem_windows", "resample_windows", "the window's targets never loaded",
     [("load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)", "pass")]),
    ("02_warp_shuffles", "s02_warp_shuffles", "resample_warp", "one sweep of the lanes over the channels",
     [("for d in range(lane, feats.shape[2], WARP)", "for d in range(lane, WARP, WARP)")]),
    ("02_warp_shuffles", "s02_warp_shuffles", "resample_warp", "both ends from the same source row",
     [("c = bf16_to_f32(feats[b, lo + 1, d])", "c = bf16_to_f32(feats[b, lo, d])")]),
    ("03_coalesced", "s03_coalesced", "resample_vec16", "no loop over the row: one 16-byte sweep only",
     [("for i in range(4 * lane, feats.shape[2], 4 * WARP)", "for i in range(4 * lane, 4 * WARP, 4 * WARP)")]),
    ("03_coalesced", "s03_coalesced", "resample_vec16", "the last word pair copied, not interpolated",
     [("lerp_pair(a3, c3, w))", "a3)")]),
    ("05_double_buffered", "s05_double_buffered", "resample_in_flight", "only the first word interpolated",
     [("lerp2(a0, c0, w0), lerp2(a1, c1, w0), lerp2(a2, c2, w0), lerp2(a3, c3, w0)",
       "lerp2(a0, c0, w0), a1, a2, a3")]),
    ("05_double_buffered", "s05_double_buffered", "resample_in_flight", "the second target with the first's weight",
     [("lerp2(d0, e0, w1)", "lerp2(d0, e0, w0)")]),
]
GUARD = ("05_double_buffered", "s05_double_buffered", "resample_in_flight",
         "no `i + q < n` guard: a group of four past the last target",
         [("store_element(out, o + Dc, ok and i + 1 < n, vec,", "store_element(out, o + Dc, ok, vec,")])


@pytest.mark.parametrize("stage, module, function, what, edits", MISTAKES + [GUARD], ids=lambda v: str(v)[:40])
def test_the_grader_fails_a_learner_mistake(stage, module, function, what, edits, capsys):
    if (stage, module, function, what, edits) == GUARD and not SIMULATOR:
        pytest.skip("on a GPU a store past the end may land in memory nobody checks, or fault and end the process")
    from cudabook.bits import _as_bits
    wrong = mutant(f"cudabook.resample.{module}", function, edits, _as_bits=_as_bits)
    assert not labs.grade(stage, wrong), f"{stage}: '{what}' passed the grader"
    out = capsys.readouterr().out
    print(f"--- {stage}: {what}\n{out}")
    assert "FAIL" in out or "raised an error" in out, out
