"""The running example: resample trajectories, np.interp per (batch, channel), bf16 out.

    STAGES                                   the ladder, in order
    run(stage, src_times, src_feats, tgt_times)  -> bfloat16 [B, T, D] NumPy array
    reference(src_times, src_feats, tgt_times)   -> float64 [B, T, D]
"""
from __future__ import annotations

import importlib

from . import inputs  # noqa: F401

from ..track import StageUnavailable  # noqa: F401  (one error for every track)
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


def _present(module):
    return importlib.util.find_spec(f"{__name__}.{module}") is not None


STAGES = tuple(name for name, module in _MODULES.items() if _present(module))


def stage(name):
    """The module of a stage, by its name ("03_coalesced") or its number ("03" or 3)."""
    if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
        matches = [s for s in STAGES if int(s[:2]) == int(name)]
        name = matches[0] if matches else str(name)
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; the stages are: {', '.join(STAGES)}")
    return importlib.import_module(f"{__name__}.{_MODULES[name]}")


def unavailable(name) -> str | None:
    """None if this machine can run the stage, else why not."""
    module = stage(name)
    check = getattr(module, "unavailable", None)
    return check() if check else None


def run(stage_name, src_times, src_feats, tgt_times, **params):
    """Resample with one stage of the ladder; returns a bfloat16 [B, T, D] NumPy array."""
    module = stage(stage_name)
    why = unavailable(stage_name)
    if why:
        raise StageUnavailable(why)
    problem = upload(src_times, src_feats, tgt_times)
    problem.poison()
    module.launch(problem, **params)
    return problem.result()


# ------------------------------------------------------------------------------- the track's face for the machinery

# (name, B, S, T, D, sorted): small in the simulator, larger on a GPU; the edge cases are in both.
_CASES_SIM = [("random, sorted targets", 2, 19, 24, 5, True),
              ("random, unsorted targets", 2, 19, 24, 5, False),
              ("S = 2, D = 1", 1, 2, 20, 1, True),
              ("odd D, one batch row", 1, 23, 20, 7, False)]
_CASES_GPU = [("random, sorted targets", 8, 1000, 3000, 256, True),
              ("random, unsorted targets", 8, 1000, 3000, 129, False),
              ("S = 2, D = 1", 3, 2, 333, 1, True),
              ("odd D, one batch row", 1, 777, 1500, 37, False)]


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
