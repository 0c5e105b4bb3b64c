"""The running example: resample trajectories, np.interp per (batch, channel), bf16 out.

    STAGES                                   the ladder, in order
    run(stage, src_times, src_feats, tgt_times)  -> bfloat16 [B, T, D] NumPy array
    reference(src_times, src_feats, tgt_times)   -> float64 [B, T, D]
"""
from __future__ import annotations

from . import inputs  # noqa: F401

from ..track import Ladder, StageUnavailable  # noqa: F401  (one error for every track)
from .inputs import InputError, random_problem, reference, to_bf16, validate  # noqa: F401
from .problem import Problem, upload  # noqa: F401

NAME = "resample"
TITLE = "trajectory resampling (np.interp per channel, bf16)"

_MODULES = {
    "01_naive": "s01_naive",
    "02_warp_shuffles": "s02_warp_shuffles",
    "03_coalesced": "s03_coalesced",
    "04_smem_windows": "s04_smem_windows",
    "05_double_buffered": "s05_double_buffered",
    "06_cp_async": "s06_cp_async",
    "07_tma": "s07_tma",
}


_LADDER = Ladder(__name__, _MODULES, "stage")
STAGES = _LADDER.stages


def stage(name):
    """The module of a stage, by its name or its number ("02" or 2)."""
    return _LADDER.stage(name)


def unavailable(name) -> str | None:
    """None if this machine can run the stage, else why not."""
    return _LADDER.unavailable(name)


def run(stage_name, src_times, src_feats, tgt_times, **params):
    """Resample with one stage of the ladder; returns a bfloat16 [B, T, D] NumPy array."""
    return _LADDER.run(stage_name, upload, src_times, src_feats, tgt_times, **params)


# ------------------------------------------------------------------------------- the track's face for the machinery

# (name, B, S, T, D, sorted): small in the simulator, larger on a GPU; the edge cases are in both. Every loop a lab
# writes must run more than once and every tail must matter: S = 200 needs two rounds of a 32-way warp search,
# D = 37 is more than one sweep of a warp's 32 lanes and not a multiple of any vector width, "wide rows" is more
# than one 16-byte sweep (32 lanes x 8 channels = 256), T = 21 is not a multiple of the four targets a warp of
# stage 05 takes, and unsorted targets leave any window.
_CASES_SIM = [("random, sorted targets", 2, 200, 21, 37, True),
              ("random, unsorted targets", 2, 200, 21, 37, False),
              ("S = 2, D = 1", 1, 2, 20, 1, True),
              ("odd D, one batch row", 1, 23, 20, 7, False),
              ("wide rows", 1, 60, 9, 264, False)]
_CASES_GPU = [("random, sorted targets", 8, 1000, 3000, 256, True),
              ("random, unsorted targets", 8, 1000, 3000, 129, False),
              ("S = 2, D = 1", 3, 2, 333, 1, True),
              ("odd D, one batch row", 1, 777, 1500, 37, False),
              ("wide rows", 2, 600, 333, 520, False)]


def grading_cases(stage_name=None):
    """[(name, (src_times, src_feats, tgt_times), label)] on fresh random data. A stage whose lab kernel needs D
    a multiple of k (its LAB_D_MULTIPLE) gets D rounded up."""
    from .. import SIMULATOR
    k = getattr(stage(stage_name), "LAB_D_MULTIPLE", 1) if stage_name else 1
    out = []
    for name, B, S, T, D, is_sorted in (_CASES_SIM if SIMULATOR else _CASES_GPU):
        D = -(-D // k) * k
        out.append((name, random_problem(B, S, T, D, sorted_targets=is_sorted), f"B={B}, S={S}, T={T}, D={D}"))
    return out


def judge(got, src_times, src_feats, tgt_times):
    """The Verdict on an output [B, T, D] against the float64 reference of these inputs."""
    import numpy as np

    from .checking import compare
    ref, scale = inputs.reference_with_scale(src_times, src_feats, tgt_times)
    return compare(got, ref, scale, targets=np.asarray(tgt_times), times=np.asarray(src_times))


from . import benchmark as bench  # noqa: E402,F401  (the track's workloads, ceiling, peers and table)
