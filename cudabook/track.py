"""What every track has in common.

A track is a package `cudabook/<track>/` (resample, gemm, ...) with the same small face:

    NAME, TITLE                  "gemm", "matrix product (bf16, float32 accumulation)"
    STAGES                       the ladder, in order; stage(name) -> the stage's module
    unavailable(stage)           None, or why this machine cannot run it
    run(stage, *inputs, **p)     NumPy in, NumPy out; reference(*inputs) -> float64
    upload(*inputs)              a problem on the device: poison(), result(), and what launch() reads
    grading_cases(stage)         [(case name, inputs tuple, label)]: fresh random inputs, small in the
                                 simulator, larger on a GPU
    judge(got, *inputs)          a Verdict against the float64 reference with the track's tolerance
    bench                        the benchmark: its workloads, yardstick, peers, the columns of its table
                                 (see results.py), SIZE_PLAN (cudabook.sizes), and optionally RECORD_KEYS (context
                                 figures its records also keep at their top level), IMAGE_NAME (its plot's file
                                 name, "{gpu}_{track}.png" unless it says otherwise), and HEAD_TO_HEAD ((rung,
                                 peer) pairs a claim is made on) with peer_calls(args, problem) (a context giving
                                 {peer: a callable that enqueues one call}): results.head_to_head times each pair
                                 again in interleaved rounds
    MAP_TITLE                    its heading on the workbook's map (notebooks/00_tracks); LESSONS, the folder of
                                 its lessons under lessons/ (its NAME unless it says otherwise)
    grade, hint, splice          cudabook.labs bound to the track: grade("02_smem_tiles", kernel)
    ladder_so_far, sweep         cudabook.lesson bound to the track: sweep("02_smem_tiles", "tile", [8, 16])

Most of that face is the same for every track: `cudabook.kit.ladder.face(globals(), stages)` fills it in (STAGES,
stage, unavailable and the bound helpers), so that a track's __init__ states only what differs.

This module is the registry: TRACKS and get(name). It is the one module below the machinery that names the
tracks; the checker (cudabook.check), grader, benchmark and lessons reach a track through it.

A stage module has NAME, TITLE, PARAMS and launch(problem, kernel=None, **params); C++ stages also SOURCE (their
.cu file, where the lab region lives) and compile_cubin(arch=..., source_text=...). The checker (`check.check_case`),
the lab grader (cudabook.labs), the benchmark and its records (cudabook.results) take a track and name none.
"""
from __future__ import annotations

import importlib

from .errors import KernelTimeout, StageUnavailable  # noqa: F401  (defined in the kit, named here too)

TRACKS = ("resample", "gemm", "msda", "attention")


def get(track):
    """A track package by name ("gemm"), or the package itself; no track (None) is an error that lists them."""
    if track is None:
        raise TypeError(f"which track? Name one (track=\"gemm\"), or call the track's own helper "
                        f"(cudabook.gemm.grade, .sweep, ...); the tracks are: {', '.join(TRACKS)}")
    if isinstance(track, str):
        if track not in TRACKS:
            raise ValueError(f"unknown track {track!r}; the tracks are: {', '.join(TRACKS)}")
        return importlib.import_module(f"cudabook.{track}")
    return track


def judge_of(track, stage):
    """The function that judges a stage's output: the stage's own `judge` where it computes from inputs other
    than the track's (GEMM 08 multiplies the e4m3-quantised matrices, with the tolerance of that arithmetic),
    else the track's `judge`. Same signature: judge(got, *inputs) -> Verdict."""
    t = get(track)
    return getattr(t.stage(stage), "judge", None) or t.judge
