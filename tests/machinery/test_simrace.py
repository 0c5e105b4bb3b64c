"""The simulator's shared arrays stop an access that no barrier orders after another thread's (cudabook.simrace),
whichever order the simulated threads happened to run in; a barrier (or, within one warp, a syncwarp) between
the two lets it through."""
import numpy as np
import pytest
from numba import cuda, float32, int32

from cudabook import SIMULATOR
from cudabook.simrace import SharedRace

pytestmark = pytest.mark.skipif(not SIMULATOR, reason="tests the simulator's shared arrays (no GPU here)")


@cuda.jit
def neighbour(out, barrier):
    s = cuda.shared.array(64, float32)
    i = cuda.threadIdx.x
    s[i] = float32(i)
    if barrier == 1:
        cuda.syncthreads()
    elif barrier == 2:
        cuda.syncwarp(0xFFFFFFFF)
    out[i] = s[(i + 1) % 32 + 32 * (i // 32)] if barrier == 2 else s[(i + 1) % 64]


@cuda.jit
def overwrite(out, barrier):
    s = cuda.shared.array(64, float32)
    i = cuda.threadIdx.x
    s[i] = float32(i)
    cuda.syncthreads()
    x = s[63 - i]
    if barrier:
        cuda.syncthreads()
    s[i] = float32(0)                  # thread 63 - i may not have read it yet
    out[i] = x


@cuda.jit
def counted(out):
    n = cuda.shared.array(1, int32)
    i = cuda.threadIdx.x
    if i == 0:
        n[0] = 0
    cuda.syncthreads()
    cuda.atomic.add(n, 0, 1)
    cuda.syncthreads()
    out[i] = n[0]


def run(kernel, *args, threads=64):
    out = np.zeros(threads, np.float32 if kernel is not counted else np.int32)
    kernel[1, threads](out, *args)
    return out


def test_a_read_of_another_threads_write_needs_a_barrier():
    with pytest.raises(SharedRace, match=r"a race on shared memory: thread \d+ (reads|writes) s\[\d+\].*"
                                         r"cuda.syncthreads\(\)"):
        run(neighbour, 0)
    assert run(neighbour, 1)[5] == 6


def test_syncwarp_orders_the_threads_of_one_warp():
    got = run(neighbour, 2)
    assert got[31] == 0 and got[40] == 41


def test_a_write_over_what_another_thread_still_reads_needs_a_barrier():
    with pytest.raises(SharedRace, match="with no barrier between the two"):
        run(overwrite, 0)
    assert list(run(overwrite, 1)[:3]) == [63, 62, 61]


def test_atomics_and_the_barriers_around_them_pass():
    assert (run(counted) == 64).all()


def test_each_block_starts_afresh():
    out = np.zeros(64 * 3, np.float32)

    @cuda.jit
    def per_block(out):
        s = cuda.shared.array(64, float32)
        i = cuda.threadIdx.x
        s[i] = float32(i)
        cuda.syncthreads()
        out[cuda.blockIdx.x * 64 + i] = s[63 - i]
    per_block[3, 64](out)
    assert out[64 * 2] == 63
