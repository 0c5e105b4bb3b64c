"""The CPU emulator against the GPU, bit for bit: each GEMM rung that uses tensor cores runs on this GPU and then,
in a child process started in the simulator, in the emulator (copies landing late, then early) on the same
inputs, and C must be the same bits all three times.

The bf16 rungs (mma.sync and ldmatrix; wgmma with TMA; warp specialisation; clusters with multicast) get inputs
whose products and sums are exact in float32: multiples of 1/8 no larger than 3, K = 600, so every sum is a
multiple of 1/64 below 2^13 and any order of summation gives the same float32. C is then the correctly rounded
product, and a difference is the emulator's (a fragment, a descriptor, a swizzle, a ring stage, the epilogue).
The FP8 rung gets random inputs: its tensor cores keep 13 bits below each step's largest exponent, the emulator
models that (measured by tools/probe_fp8_sums.py and replayed in test_emulate_fp8.py), and this test is where the
model meets the hardware on a whole GEMM on data no one chose.

The shapes are ragged (130 x 200) so the edge tiles, TMA's zero fill and the clipped stores are part of it.
Attention is not here: its exponentials are ex2.approx on a GPU (within 2 ulp) and exp2f in the emulator."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from cudabook import SIMULATOR, device, track

pytestmark = [pytest.mark.skipif(SIMULATOR, reason="compares the emulator with a GPU"),
              pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="no host C++ compiler")]

M, N, K = 130, 200, 600
BF16_RUNGS = ["04_mma_sync", "05_wgmma_tma", "06_warp_specialized", "07_clusters"]

CHILD = r"""
import sys
import numpy as np
from cudabook import emulate, track
from cudabook.gemm.inputs import BF16
data = np.load(sys.argv[1])
a, b = data["a"].view(BF16), data["b"].view(BF16)
out = {}
for landing in ("lazy", "eager"):
    with emulate.emulating(landing, timeout_s=600):
        out[landing] = np.asarray(track.get("gemm").run(sys.argv[2], a, b)).view(np.uint16)
np.savez(sys.argv[3], **out)
"""


def exact_inputs(rng):
    """a [M, K] and b [K, N] in bf16: multiples of 1/8 in [-3, 3], exact as bf16, products multiples of 1/64."""
    from cudabook.gemm.inputs import BF16
    a = (rng.integers(-24, 25, size=(M, K)) / 8.0).astype(BF16)
    b = (rng.integers(-24, 25, size=(K, N)) / 8.0).astype(BF16)
    return a, b


def emulated(tmp_path, stage, a, b) -> dict:
    """C's bits from the emulator, both landings, run in a child process started in the simulator."""
    inputs, outputs = tmp_path / "inputs.npz", tmp_path / "outputs.npz"
    np.savez(inputs, a=a.view(np.uint16), b=b.view(np.uint16))
    env = dict(os.environ, CUDABOOK_SIMULATOR="1")
    done = subprocess.run([sys.executable, "-c", CHILD, str(inputs), stage, str(outputs)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"the emulator's run of {stage} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return dict(np.load(outputs))


def differences(want, got) -> str:
    wrong = np.argwhere(want != got)
    return f"{len(wrong)} of {want.size} elements differ, the first at (row, column) {tuple(wrong[0])}" \
        if len(wrong) else ""


@pytest.fixture(scope="module")
def gemm():
    t = track.get("gemm")
    why = t.unavailable("05_wgmma_tma")
    if why:
        pytest.skip(why)
    return t


@pytest.mark.parametrize("stage", BF16_RUNGS)
def test_a_bf16_rung_gives_the_gpus_bits_in_the_emulator(stage, gemm, tmp_path):
    a, b = exact_inputs(np.random.default_rng())
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert np.array_equal(exact, a.astype(np.float64) @ b.astype(np.float64)), "the inputs' sums are not exact"
    on_gpu = np.asarray(gemm.run(stage, a, b)).view(np.uint16)
    rounded = exact.astype(a.dtype).view(np.uint16)
    assert not differences(rounded, on_gpu), f"the GPU itself: {differences(rounded, on_gpu)}"
    for landing, bits in emulated(tmp_path, stage, a, b).items():
        assert not differences(on_gpu, bits), f"emulated, copies landing {landing}: {differences(on_gpu, bits)}"


def test_the_fp8_rung_gives_the_gpus_bits_in_the_emulator_on_random_data(gemm, tmp_path):
    """Random bf16 inputs (the track's own draw), quantised to e4m3 by the rung: the 13-bit sums of the FP8 tensor
    cores decide the low bits of C, so this is the emulator's model of them against the H100 or H200 itself."""
    if gemm.unavailable("08_fp8"):
        pytest.skip(gemm.unavailable("08_fp8"))
    from cudabook.gemm import inputs
    a, b = inputs.random_problem(M, N, K)
    on_gpu = np.asarray(gemm.run("08_fp8", a, b)).view(np.uint16)
    for landing, bits in emulated(tmp_path, "08_fp8", a.view(inputs.BF16), b.view(inputs.BF16)).items():
        assert not differences(on_gpu, bits), \
            f"emulated, copies landing {landing}, on {device.gpu().name}: {differences(on_gpu, bits)}"
