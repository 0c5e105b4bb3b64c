"""The matrix product C = A @ B in bf16 with float32 accumulation: the GEMM track.

    STAGES                          the ladder, in order
    run(stage, a, b, **params)      -> C, a bfloat16 NumPy array [M, N]
    reference(a, b)                 -> float64 [M, N]

A and B are NumPy `ml_dtypes.bfloat16` arrays, a [M, K] and b [K, N], row-major as in `a @ b`. Every stage
accumulates in float32 and rounds C to bf16 (nearest even) once, at the end. Any M, N, K >= 1 works.
"""
from __future__ import annotations

import importlib

from ..track import StageUnavailable  # noqa: F401  (one error for every track)
from . import benchmark as bench  # noqa: F401  (the track's workloads, peers and table for cudabook.results)
from .checking import cases, compare, grading_cases, judge  # noqa: F401
from .inputs import BF16, random_problem, reference, reference_with_bound, to_bf16, validate  # noqa: F401
from .problem import Problem, upload  # noqa: F401

NAME = "gemm"
TITLE = "matrix product (bf16, float32 accumulation)"
_MODULES = {
    "01_naive": "s01_naive",
    "02_smem_tiles": "s02_smem_tiles",
    "03_register_blocking": "s03_register_blocking",
    "04_mma_sync": "s04_mma_sync",
    "05_wgmma_tma": "s05_wgmma_tma",
    "06_warp_specialized": "s06_warp_specialized",
    "07_clusters": "s07_clusters",
}


def _present(module):
    return importlib.util.find_spec(f"{__name__}.{module}") is not None


STAGES = tuple(name for name, module in _MODULES.items() if _present(module))


def stage(name):
    """The module of a stage, by its name ("02_smem_tiles") or its number ("02" or 2)."""
    if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
        matches = [s for s in STAGES if int(s[:2]) == int(name)]
        name = matches[0] if matches else str(name)
    if name not in STAGES:
        raise ValueError(f"unknown GEMM stage {name!r}; the stages are: {', '.join(STAGES)}")
    return importlib.import_module(f"{__name__}.{_MODULES[name]}")


def unavailable(name) -> str | None:
    """None if this machine can run the stage, else why not."""
    check = getattr(stage(name), "unavailable", None)
    return check() if check else None


def run(stage_name, a, b, **params):
    """C = a @ b with one stage of the ladder; returns a bfloat16 NumPy array [M, N]."""
    module = stage(stage_name)
    why = unavailable(stage_name)
    if why:
        raise StageUnavailable(why)
    problem = upload(a, b)
    problem.poison()
    module.launch(problem, **params)
    return problem.result()
