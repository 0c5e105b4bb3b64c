"""A stage's parameters and launch settings, checked one way for every rung, Numba or C++.

    check_params(params, allowed, stage)      TypeError naming any parameter the stage does not take
    merge_params(stage, defaults, params)     the defaults updated by params, after check_params
    check_settings(stage, threads=..., ...)   ValueError naming a launch setting no GPU accepts
"""
from __future__ import annotations


def check_params(params, allowed, stage: str | None = None):
    """TypeError naming any parameter the stage does not know."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        where = f"{stage}: " if stage else ""
        raise TypeError(f"{where}unknown parameter{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(map(repr, unknown))}; this stage takes: {', '.join(allowed)}")


def merge_params(stage: str, defaults: dict, params: dict) -> dict:
    """The stage's defaults updated by `params` (a TypeError naming an unknown one)."""
    check_params(params, defaults, stage)
    return {**defaults, **params}


def check_settings(stage: str, *, threads=None, threads_multiple=1, grid_y=None, **at_least):
    """ValueError naming the parameter and the rule for launch settings no GPU accepts: a block of 1..1024
    threads (a multiple of `threads_multiple`), a grid's y dimension of at most 65,535, and counts that must be
    at least some value (at_least: name=(value, minimum))."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024
                                or threads % threads_multiple):
        extra = f" and a multiple of {threads_multiple}" if threads_multiple > 1 else ""
        raise ValueError(f"{stage}: threads must be an integer in 1..1024{extra} (a block holds at most 1024 "
                         f"threads), got {threads!r}")
    if grid_y is not None and grid_y > 65535:
        raise ValueError(f"{stage}: the grid's y dimension would be {grid_y:,}, and a GPU allows at most 65,535: "
                         f"split the batch into parts of at most 65,535 rows")
    for name, (value, minimum) in at_least.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{stage}: {name} must be an integer >= {minimum}, got {value!r}")
