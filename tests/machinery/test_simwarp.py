"""The simulator's warp operations follow CUDA's semantics (and are stricter about masks)."""
import numpy as np
import pytest
from numba import cuda

from cudabook import SIMULATOR, simwarp

pytestmark = pytest.mark.skipif(not SIMULATOR, reason="tests the simulator's warp operations (no GPU here)")
FULL = 0xFFFFFFFF


@cuda.jit
def xor_allreduce(a, out):
    i = cuda.threadIdx.x
    v = a[i]
    off = 16
    while off > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, off)
        off //= 2
    out[i] = v


@cuda.jit
def down_reduce(a, out):
    i = cuda.threadIdx.x
    v = a[i]
    off = 16
    while off > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    out[i] = v


@cuda.jit
def up_scan(a, out):
    i = cuda.threadIdx.x
    lane = i % 32
    v = a[i]
    off = 1
    while off < 32:
        u = cuda.shfl_up_sync(0xFFFFFFFF, v, off)
        if lane >= off:
            v += u
        off *= 2
    out[i] = v


@cuda.jit
def broadcast_and_ballot(a, src, bcast, ballot):
    i = cuda.threadIdx.x
    bcast[i] = cuda.shfl_sync(0xFFFFFFFF, a[i], src[0])
    ballot[i] = cuda.ballot_sync(0xFFFFFFFF, a[i] > 40)


@cuda.jit
def shifts_keep_own(a, up, down):
    i = cuda.threadIdx.x
    up[i] = cuda.shfl_up_sync(0xFFFFFFFF, a[i], 3)
    down[i] = cuda.shfl_down_sync(0xFFFFFFFF, a[i], 3)


@cuda.jit
def early_exit(a, out, mask_out):
    i = cuda.threadIdx.x
    if i % 32 >= 16:
        return
    cuda.syncwarp(0x0000FFFF)
    mask_out[i] = cuda.activemask()
    out[i] = cuda.shfl_xor_sync(0x0000FFFF, a[i], 1)


@cuda.jit
def wrong_mask(a, out):
    i = cuda.threadIdx.x
    out[i] = cuda.shfl_sync(0x0000FFFF, a[i], 0)


def test_xor_allreduce_gives_each_warp_its_sum():
    a = np.arange(64, dtype=np.float64)
    out = np.zeros(64)
    xor_allreduce[1, 64](a, out)
    assert np.all(out[:32] == a[:32].sum()) and np.all(out[32:] == a[32:].sum())


def test_down_reduction_puts_the_sum_in_lane_0():
    a = np.random.default_rng().integers(0, 100, 64).astype(np.int64)
    out = np.zeros(64, np.int64)
    down_reduce[1, 64](a, out)
    assert out[0] == a[:32].sum() and out[32] == a[32:].sum()


def test_up_scan_is_an_inclusive_prefix_sum_per_warp():
    a = np.random.default_rng().integers(0, 100, 64).astype(np.int64)
    out = np.zeros(64, np.int64)
    up_scan[1, 64](a, out)
    assert np.array_equal(out[:32], np.cumsum(a[:32])) and np.array_equal(out[32:], np.cumsum(a[32:]))


def test_broadcast_and_ballot():
    a = np.arange(64, dtype=np.int64)
    bcast, ballot = np.zeros(64, np.int64), np.zeros(64, np.int64)
    broadcast_and_ballot[1, 64](a, np.array([37]), bcast, ballot)   # source lane 37 % 32 = 5
    assert np.all(bcast[:32] == 5) and np.all(bcast[32:] == 37)
    assert np.all(ballot[:32] == 0)
    assert np.all(ballot[32:] == sum(1 << (v - 32) for v in range(41, 64)))


def test_out_of_range_lanes_keep_their_own_value():
    a = np.arange(32, dtype=np.int64) * 10
    up, down = np.zeros(32, np.int64), np.zeros(32, np.int64)
    shifts_keep_own[1, 32](a, up, down)
    assert np.array_equal(up[:3], a[:3]) and np.array_equal(up[3:], a[:-3])
    assert np.array_equal(down[-3:], a[-3:]) and np.array_equal(down[:-3], a[3:])


def test_lanes_that_returned_are_not_waited_for():
    a = np.arange(64, dtype=np.int64)
    out, masks = np.full(64, -1, np.int64), np.zeros(64, np.int64)
    early_exit[1, 64](a, out, masks)
    assert np.array_equal(out[:16], a[:16] ^ 1) and np.array_equal(out[32:48], a[32:48] ^ 1)
    assert np.all(out[16:32] == -1)
    assert np.all(masks[:16] == 0xFFFF)


def test_a_lane_outside_the_mask_is_an_error_that_says_so():
    with pytest.raises(simwarp.WarpMaskError, match="not set in mask 0x0000ffff"):
        wrong_mask[1, 32](np.arange(32), np.zeros(32))


@cuda.jit(device=True)
def _slow_lane(a):
    s = 0
    for k in range(3_000_000):       # long enough that the failing lane has raised before it ends
        s += k
    return s


@cuda.jit
def one_lane_fails_while_another_is_in_a_device_function(a):
    i = cuda.threadIdx.x
    if i == 0:
        a[100] = 1                       # out of bounds: raises in the simulator
    else:
        a[i] = _slow_lane(a)


def test_a_failed_kernel_leaves_the_real_cuda_module_in_its_device_functions_globals():
    # A lane still inside a device function holds the fake `cuda` in that function's module globals; if the
    # failure were raised before it ended, code built from those globals right after would get the fake module.
    with pytest.raises(IndexError):
        one_lane_fails_while_another_is_in_a_device_function[1, 2](np.zeros(4, np.int64))
    import numba.cuda
    assert globals()["cuda"] is numba.cuda


def test_a_device_function_of_another_module_runs_with_the_fake_cuda_and_gives_it_back():
    # simwarp keeps, for one launch, the names of a module's globals bound to numba.cuda (the simulator scanned
    # them at every call): each call still finds the fake module there, a name bound between launches too, and
    # after the launch the real module is back
    import numba.cuda
    helpers = {"cuda": numba.cuda}
    exec("def lane():\n    return cuda.threadIdx.x % 32\n\n"
         "def lane_again():\n    return also.threadIdx.x % 32\n", helpers)
    lane, lane_again = cuda.jit(device=True)(helpers["lane"]), cuda.jit(device=True)(helpers["lane_again"])

    @cuda.jit
    def lanes(out, again):
        out[cuda.threadIdx.x] = lane()
        if again:
            out[cuda.threadIdx.x] += 100 * lane_again()

    out = np.zeros(64, np.int64)
    lanes[1, 64](out, False)
    assert out.tolist() == [i % 32 for i in range(64)]
    assert helpers["cuda"] is numba.cuda
    helpers["also"] = numba.cuda
    lanes[1, 64](out, True)
    assert out.tolist() == [101 * (i % 32) for i in range(64)]
    assert helpers["cuda"] is numba.cuda and helpers["also"] is numba.cuda


def test_the_simulator_takes_forceinline_as_a_gpu_does():
    """A device function written for a GPU (forceinline=True: NVVM inlines it) runs in the simulator too."""
    @cuda.jit(device=True, forceinline=True)
    def twice(x):
        return 2 * x

    @cuda.jit
    def use(a):
        a[cuda.threadIdx.x] = twice(a[cuda.threadIdx.x])

    a = np.arange(4, dtype=np.float32)
    use[1, 4](a)
    assert a.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_no_device_function_is_inlined_by_numbas_ir():
    """The workbook's device functions ask NVVM to inline them (forceinline=True), not Numba's IR inliner
    (inline=True or "always"): the same kernels compile several times faster, which a learner waits for at
    every first launch (msda rung 02's kernel with 8-byte vectors, compiled for sm_90 on a 2-core machine: 5.6 s
    with inline=True, 0.7 s with forceinline=True)."""
    import pathlib
    import re
    root = pathlib.Path(__file__).resolve().parents[2]
    found = [f"{p.relative_to(root)}:{i}" for folder in ("cudabook", "lessons") for p in (root / folder).rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"cuda\.jit\([^)]*\binline=", line)]
    assert not found, "inline= in place of forceinline=True: " + ", ".join(found)


@cuda.jit
def shuffle_then_barrier(a, out):
    i = cuda.threadIdx.x
    v = a[i]
    v += cuda.shfl_xor_sync(FULL, v, 1)
    cuda.syncthreads()
    v += cuda.shfl_down_sync(FULL, v, 2)
    out[i] = v


@pytest.mark.parametrize("threads", ["greenlets", "python threads"])
def test_both_ways_of_running_a_block_agree(monkeypatch, threads):
    """Greenlets (the default) and Python threads (CUDABOOK_SIM_THREADS=1, or without greenlet) run a block's
    barriers and shuffles alike."""
    if threads == "python threads":
        monkeypatch.setenv("CUDABOOK_SIM_THREADS", "1")
    elif not simwarp.greenlets():
        pytest.skip("greenlet is not installed")
    a = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    shuffle_then_barrier[1, 64](a, out)
    v = a + a[np.arange(64) ^ 1]
    lane = np.arange(64) % 32
    want = v + np.where(lane < 30, v[np.minimum(np.arange(64) + 2, 63)], v)   # past the warp: a lane's own
    assert out.tolist() == want.tolist()


@cuda.jit
def half_the_warp_at_a_barrier(out):
    i = cuda.threadIdx.x
    if i % 32 < 16:
        out[i] = cuda.shfl_sync(FULL, i, 0)      # waits for lanes 16-31, which wait at the barrier
    else:
        cuda.syncthreads()                        # waits for lanes 0-15, which wait in the shuffle
        out[i] = i


def test_threads_that_all_wait_for_each_other_stop_with_where_they_wait():
    """On a GPU this kernel hangs; with greenlets the simulator sees at once that no thread can go on."""
    if not simwarp.greenlets():
        pytest.skip("greenlet is not installed: the Python threads would wait (check.launch_within times out)")
    with pytest.raises(simwarp.SimulatedDeadlock, match=r"16 at cuda.syncthreads\(\).*16 in a warp operation"):
        half_the_warp_at_a_barrier[1, 32](np.zeros(32, np.int64))


class _Unsayable(Exception):
    def __str__(self):
        raise ValueError("cannot say itself")


@cuda.jit(device=True)
def _raise_unsayable(x):
    if x == 3:
        raise _Unsayable()
    return x


@cuda.jit
def fails_in_a_device_function(out):
    i = cuda.threadIdx.x
    v = _raise_unsayable(i)
    cuda.syncthreads()
    out[i] = v


def test_a_failed_block_gives_back_every_device_functions_globals():
    """The threads still waiting when one fails are unwound: no module is left holding the simulator's fake
    `cuda` (the next kernel built from its globals would find it), even for an exception that cannot say itself."""
    import numba.cuda
    with pytest.raises(_Unsayable):
        fails_in_a_device_function[1, 32](np.zeros(32, np.int64))
    assert globals()["cuda"] is numba.cuda
    shuffle_then_barrier[1, 32](np.arange(32, dtype=np.float32), np.zeros(32, np.float32))   # the next one runs
