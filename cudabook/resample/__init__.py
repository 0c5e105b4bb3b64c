"""The running example: resample trajectories, np.interp per (batch, channel), bf16 out.

    STAGES                                   the ladder, in order
    run(stage, src_times, src_feats, tgt_times)  -> bfloat16 [B, T, D] NumPy array
    reference(src_times, src_feats, tgt_times)   -> float64 [B, T, D]
"""
from __future__ import annotations

import importlib

from .inputs import InputError, random_problem, reference, to_bf16, validate  # noqa: F401
from .problem import Problem, upload  # noqa: F401

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


class StageUnavailable(RuntimeError):
    """This machine cannot run the stage; the message says what it needs and what the machine has."""


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
