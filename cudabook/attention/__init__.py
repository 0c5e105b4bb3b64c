"""Attention (softmax(q k^T / sqrt(d)) v, fused): the attention track.

    STAGES                                          the ladder, in order
    run(stage, q, k, v, *, causal=False, **params)  -> out, a bfloat16 NumPy array [B, H, Nq, d]
    reference(q, k, v, causal=False)                -> float64 [B, H, Nq, d]

q is bf16 [B, H, Nq, d], k and v bf16 [B, H, Nk, d] (ml_dtypes.bfloat16 NumPy arrays). Each query row i of each
batch b and head h gets the scores s_ij = q_i . k_j / sqrt(d), their softmax over the keys j in float32, and
the softmax-weighted sum of v's rows, rounded to bf16 (nearest even) once. causal=True needs Nq == Nk and lets
query i see the keys j <= i only. Every rung takes d = 64 and d = 128, and any Nq, Nk >= 1.

Bad shapes or dtypes get a ValueError or TypeError naming the argument and the rule; a rung this machine cannot
run raises StageUnavailable with the reason.
"""
from __future__ import annotations

from ..errors import StageUnavailable  # noqa: F401  (one error for every track)
from ..kit.ladder import face
from . import benchmark as bench  # noqa: F401  (the track's workloads, peers and table for cudabook.results)
from .checking import cases, compare, grading_cases, judge  # noqa: F401
from .inputs import BF16, random_problem, reference, reference_with_bound, to_bf16, validate  # noqa: F401
from .problem import Problem, upload  # noqa: F401

__all__ = ["NAME", "TITLE", "STAGES", "stage", "unavailable", "run", "reference", "reference_with_bound",
           "random_problem", "validate", "to_bf16", "BF16", "upload", "Problem", "cases", "grading_cases", "compare",
           "judge", "bench", "StageUnavailable", "MAP_TITLE", "grade", "hint", "splice", "ladder_so_far",
           "sweep"]

NAME = "attention"
TITLE = "attention (bf16 q, k, v; float32 softmax)"
MAP_TITLE = "Attention: fused softmax(QK^T)V"
_LADDER = face(globals(), ("01_naive", "02_online_softmax", "03_tiled", "04_mma_cp_async", "05_wgmma_tma",
                           "06_warp_specialized"), "attention stage")


def run(stage_name, q, k, v, *, causal=False, **params):
    """Attention with one stage of the ladder; returns a bfloat16 NumPy array [B, H, Nq, d]."""
    return _LADDER.run(stage_name, upload, q, k, v, causal, **params)
