"""The matrix product C = A @ B in bf16 with float32 accumulation: the GEMM track.

    STAGES                          the ladder, in order
    run(stage, a, b, **params)      -> C, a bfloat16 NumPy array [M, N]
    reference(a, b)                 -> float64 [M, N]

A and B are NumPy `ml_dtypes.bfloat16` arrays, a [M, K] and b [K, N], row-major as in `a @ b`. Every stage
accumulates in float32 and rounds C to bf16 (nearest even) once, at the end. Any M, N, K >= 1 works.
"""
from __future__ import annotations

from ..errors import StageUnavailable  # noqa: F401  (one error for every track)
from ..kit.ladder import face
from . import benchmark as bench  # noqa: F401  (the track's workloads, peers and table for cudabook.results)
from .checking import cases, compare, grading_cases, judge  # noqa: F401
from .inputs import BF16, random_problem, reference, reference_with_bound, to_bf16, validate  # noqa: F401
from .problem import Problem, upload  # noqa: F401

NAME = "gemm"
TITLE = "matrix product (bf16, float32 accumulation)"
MAP_TITLE = "GEMM: the bf16 matrix product, compute-bound, from a thread per element to cuBLAS speed"
_LADDER = face(globals(), ("01_naive", "02_smem_tiles", "03_register_blocking", "04_mma_sync", "05_wgmma_tma",
                           "06_warp_specialized", "07_clusters", "08_fp8"), "GEMM stage")


def run(stage_name, a, b, **params):
    """C = a @ b with one stage of the ladder; returns a bfloat16 NumPy array [M, N]."""
    return _LADDER.run(stage_name, upload, a, b, **params)
