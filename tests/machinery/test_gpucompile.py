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


def _specs_of_a_launch(kernel):
    from cudabook import gpucompile
    times = np.sort(np.random.default_rng().random((1, 8), dtype=np.float32), axis=1)
    feats = np.zeros((1, 8, 2), np.uint16)
    targets = times[:, 1:3].copy()
    out = np.zeros((1, 2, 2), np.uint16)
    with gpucompile.recording() as seen:
        kernel[(1, 1), 32](times, feats, targets, out)
    return seen[kernel.py_func.__name__]


def test_the_stages_own_kernel_is_compiled_only_when_the_learners_fails():
    """A right kernel costs one compile; the control (the stage's own kernel) is compiled only to tell "your
    kernel does not compile" from "nothing compiles here": a control that cannot compile then means CannotCheck."""
    from cudabook import gpucompile
    from cudabook.resample.s01_naive import resample_naive as solution
    specs = _specs_of_a_launch(solution)
    broken_control = "find_interval"       # a device function: as a kernel of these four arguments it fails to type
    assert gpucompile.compile_for_gpu(solution, "cudabook.resample.s01_naive", specs,
                                      control=broken_control) is None          # never compiled: the kernel was fine
    with pytest.raises(gpucompile.CannotCheck, match="does not compile here either"):
        gpucompile.compile_for_gpu(resample_naive, "cudabook.resample.s01_naive", specs, control=broken_control)
    error = gpucompile.compile_for_gpu(resample_naive, "cudabook.resample.s01_naive", specs,
                                       control="resample_naive")
    assert error and "TypingError" in error
