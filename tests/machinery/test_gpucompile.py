"""The simulator runs a kernel's Python as Python, so code no GPU compiles can give right answers there. The
grader also compiles the learner's kernel for a GPU (Numba's real compiler in a child process, NVVM only): a
kernel built on Python lists and np.interp must FAIL with the compiler's message; the solution must PASS."""
import numpy as np
import pytest
from numba import cuda

import cudabook
from cudabook import resample
from cudabook.bits import bf16_to_f32, f32_to_bf16
from cudabook.resample.s01_naive import find_interval

pytestmark = pytest.mark.skipif(not cudabook.SIMULATOR, reason="on a GPU every kernel is compiled for real anyway")


@cuda.jit
def resample_naive(times, feats, targets, out):
    b = cuda.blockIdx.y
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= targets.shape[1]:
        return
    x = targets[b, t]
    lo = find_interval(times, b, x)
    xs = [times[b, lo], times[b, lo + 1]]                               # a Python list: no GPU has those
    for d in range(feats.shape[2]):
        ys = [bf16_to_f32(feats[b, lo, d]), bf16_to_f32(feats[b, lo + 1, d])]
        out[b, t, d] = f32_to_bf16(np.float32(np.interp(x, xs, ys)))   # nor np.interp


def test_a_kernel_only_the_simulator_runs_fails(capsys):
    assert not resample.grade("01_naive", resample_naive)
    out = capsys.readouterr().out
    assert "cannot compile it for a GPU" in out and "TypingError" in out, out


def test_the_solution_compiles(capsys):
    from cudabook.resample.s01_naive import resample_naive as solution
    assert resample.grade("01_naive", solution)
    assert "compiles for a GPU (sm_90)" in capsys.readouterr().out
