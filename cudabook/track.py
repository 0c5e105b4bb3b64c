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
    bench                        the benchmark workloads, peers and the columns of its table (see results.py)

A stage module has NAME, TITLE, PARAMS and launch(problem, kernel=None, **params); C++ stages also SOURCE (their
.cu file, where the lab region lives) and compile_cubin(arch=..., source_text=...). The checker (`check_case`),
the lab grader (cudabook.labs), the benchmark and its records (cudabook.results) take a track and name none.
"""
from __future__ import annotations

import importlib


class StageUnavailable(RuntimeError):
    """This machine cannot run the stage; the message says what it needs and what the machine has."""


TRACKS = ("resample", "gemm")


def get(track):
    """A track package by name ("gemm"), or the package itself."""
    if isinstance(track, str):
        if track not in TRACKS:
            raise ValueError(f"unknown track {track!r}; the tracks are: {', '.join(TRACKS)}")
        return importlib.import_module(f"cudabook.{track}")
    return track


RACE_HINT = ("the output differs between two runs on the same inputs: a race (threads reading shared memory "
             "that others are still writing, or overwriting a buffer someone still reads: a missing barrier?)")


def check_case(track, launch, inputs, *, rerun=True, **params):
    """Upload `inputs`, poison the output, run `launch(problem, **params)` and judge the result. A wrong result
    is produced a second time (rerun=True): if the two differ, the verdict says it is a race."""
    import numpy as np
    track = get(track)
    problem = track.upload(*inputs)
    problem.poison()
    launch(problem, **params)
    first = problem.result()
    verdict = track.judge(first, *inputs)
    if not verdict.ok and rerun:
        problem.poison()
        launch(problem, **params)
        again = problem.result()
        if not np.array_equal(np.asarray(first).view(np.uint16), np.asarray(again).view(np.uint16)):
            lines = [line for line in verdict.message.split("\n") if not line.startswith("Hint: ")]
            verdict.message = "\n".join(lines + ["Hint: " + RACE_HINT])   # the one hint that is certain
    return verdict
