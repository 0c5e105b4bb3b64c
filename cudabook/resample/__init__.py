"""The running example: resample trajectories, np.interp per (batch, channel), bf16 out.

    STAGES                                   the ladder, in order
    run(stage, src_times, src_feats, tgt_times)  -> bfloat16 [B, T, D] NumPy array
    reference(src_times, src_feats, tgt_times)   -> float64 [B, T, D]

Its lessons check a launch with `check_launch(launch, B, S, T, D)` (fresh random inputs of that size) or
`check_on(launch, src_times, src_feats, tgt_times)`, at `demo_size()`; the benchmark's size is bench.BENCH_SIZE.
"""
from __future__ import annotations

from . import inputs  # noqa: F401

from ..errors import StageUnavailable  # noqa: F401  (one error for every track)
from ..kit.ladder import face
from ..refmemo import References
from .checking import EPS32, check_launch, check_on, compare, diagnose, past_the_end  # noqa: F401
from .inputs import InputError, random_problem, reference, to_bf16, validate  # noqa: F401
from .problem import Problem, upload  # noqa: F401

NAME = "resample"
TITLE = "trajectory resampling (np.interp per channel, bf16)"
MAP_TITLE = "Resampling robot trajectories: a memory-bound gather (start here)"
LESSONS = "resample"        # its lessons: lessons/resample/ (the workbook's setup and map sit at the top)
_LADDER = face(globals(), ("01_naive", "02_warp_shuffles", "03_coalesced", "04_smem_windows", "05_double_buffered",
                           "06_cp_async", "07_tma", "08_fused_gather"))


def run(stage_name, src_times, src_feats, tgt_times, **params):
    """Resample with one stage of the ladder; returns a bfloat16 [B, T, D] NumPy array."""
    return _LADDER.run(stage_name, upload, src_times, src_feats, tgt_times, **params)


# ------------------------------------------------------------------------------- the track's face for the machinery

# (name, sorted, (B, S, T, D) in the simulator, (B, S, T, D) on a GPU): the edge cases are in both. Every loop a lab
# writes must run more than once and every tail must matter: S = 200 needs two rounds of a 32-way warp search, D =
# 37 is more than one sweep of a warp's 32 lanes and not a multiple of any vector width, "wide rows" is more than
# one 16-byte sweep (32 lanes x 8 channels = 256), and unsorted targets leave any window. The totals B * T (42, 301,
# 19, 17; on a GPU 24000, 999, 1501, 666) leave 2, 1, 3 and 1 (0, 3, 1, 2) targets in the last of stage 05's groups
# of four, so each of its guards matters. T = 301 is three blocks of stage 01's 128 threads (a kernel that forgets
# blockIdx.x fails, and so does one that steps blocks by a hard-coded 32 threads: its blocks overlap and stop at
# target 191) and nine runs of stage 04's 32 targets. "wide rows" has sorted targets so that stage 04
# takes its window path there (in the simulator a run of 21 targets over S = 200 spans more rows than a window
# holds, and unsorted targets always take the fallback), with more than one chunk of channels (D > 256) and, in the
# simulator, more elements than one batch of loads (some 50 rows x 32 elements > 8 x 128 threads); its 34 vectors of
# 16 bytes a row are an even count, so stage 08 moves two a lane in each sweep (in slots 17 vectors apart) and
# leaves a tail of the warp's last sweep. "dense sorted targets" puts about three targets in every source interval,
# so each of stage 04's windows holds several intervals and its last interval always holds a target that is neither
# a knot nor outside the range: a window searched one row short fails there, whatever the draw.
_CASES = [("random, sorted targets", True, (2, 200, 21, 37), (8, 1000, 3000, 256)),
          ("random, unsorted targets", False, (2, 200, 21, 37), (8, 1000, 3000, 129)),
          ("S = 2, D = 1", True, (1, 2, 301, 1), (3, 2, 333, 1)),
          ("odd D, one batch row", False, (1, 23, 19, 7), (1, 777, 1501, 37)),
          ("wide rows", True, (1, 60, 17, 272), (2, 600, 333, 520)),
          ("dense sorted targets", True, (1, 24, 80, 9), (2, 300, 2000, 64))]


def grading_cases(stage_name=None):
    """[(name, (src_times, src_feats, tgt_times), label)] on fresh random data. A stage whose lab kernel needs D
    a multiple of k (its LAB_D_MULTIPLE) gets D rounded up."""
    from .. import SIMULATOR
    k = getattr(_LADDER.stage(stage_name), "LAB_D_MULTIPLE", 1) if stage_name else 1
    out = []
    for name, is_sorted, sim, gpu in _CASES:
        B, S, T, D = sim if SIMULATOR else gpu
        D = -(-D // k) * k
        problem = past_the_end(random_problem(B, S, T, D, sorted_targets=is_sorted))   # (see past_the_end)
        out.append((name, problem, f"B={B}, S={S}, T={T}, D={D}"))
    return out


_references = References()   # the last reference of the benchmark's inputs and of a grading case's (refmemo)


def judge(got, src_times, src_feats, tgt_times):
    """The Verdict on an output [B, T, D] against the float64 reference of these inputs (remembered: a ladder or
    a sweep judges every rung and value on the same 67-million-output inputs, and each reference takes seconds)."""
    import numpy as np

    ref, scale = _references.get((src_times, src_feats, tgt_times),
                                 lambda: inputs.reference_with_scale(src_times, src_feats, tgt_times))
    return compare(got, ref, scale, targets=np.asarray(tgt_times), times=np.asarray(src_times), feats=src_feats)


from . import benchmark as bench  # noqa: E402,F401  (the track's workloads, ceiling, peers and table)


DEMO_BATCHES = 8      # a lesson's checks on a GPU: the benchmark's rows, an eighth of its batches


def demo_size():
    """Sizes a lesson's checks use: small in the simulator; on a GPU the benchmark's S, T and D with DEMO_BATCHES
    batches instead of its 64 (the same rows, grids of thousands of blocks, an eighth of the bytes: each check's
    fresh inputs and float64 reference take about a second, not eight; the ladder measures at full size)."""
    from .. import SIMULATOR
    return dict(B=2, S=24, T=20, D=8) if SIMULATOR else dict(bench.BENCH_SIZE, B=DEMO_BATCHES)
