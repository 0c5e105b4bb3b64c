"""Learner-style wrong answers to the resampling labs, as edits of the real lab kernels, run through the grader
itself: each must FAIL (or be reported as an error), never PASS. The grader's cases make every loop iterate more
than once and every tail matter (see cudabook/resample/__init__.py), so a kernel that only handles the first
sweep, the first word or whole groups cannot slip through."""
import pytest

from corpus.mutate import mutant
from cudabook import SIMULATOR, labs

MISTAKES = [  # (stage, module, lab function, what, [(old, new)])
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
    wrong = mutant(f"cudabook.resample.{module}", function, edits)
    assert not labs.grade(stage, wrong), f"{stage}: '{what}' passed the grader"
    out = capsys.readouterr().out
    print(f"--- {stage}: {what}\n{out}")
    assert "FAIL" in out or "raised an error" in out, out
