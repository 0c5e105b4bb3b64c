"""The CPU emulation of CUDA C++ stages (cudabook.emulate) and the tiled-load arithmetic it shares with the
lessons (cudabook.tma.load_box, swizzle_offsets): the C++ labs graded without a GPU (their planted mistakes,
cudabook/resample/mistakes.py, fail with pointed messages in tests/resample/test_resample_mistakes.py), and the
emulator's own limits (time, faults, what it cannot run)."""
import ctypes
import pathlib
import shutil

import numpy as np
import pytest

from cudabook import SIMULATOR, device, emulate, notebooks, nvrtc, resample, tma
from cudabook.resample import s06_cp_async as s06
from cudabook.resample import s07_tma as s07

pytestmark = pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="no host C++ compiler")
# The emulator works on host memory, where Numba runs in its simulator. On a GPU the labs are graded for real
# (tests/machinery/test_notebooks.py), and a planted deadlock would end in a trap that poisons the CUDA context.
needs_simulator = pytest.mark.skipif(not SIMULATOR, reason="the emulator runs where Numba runs in its simulator")


# ------------------------------------------------------------------------------------------ tiled loads
def test_load_box_inside_is_a_slice():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7, 9)).astype(np.float32)
    got = tma.load_box(a, box=(2, 3, 4), coords=(1, 2, 3))
    assert np.array_equal(got, a[1:3, 2:5, 3:7])


def test_load_box_fills_out_of_bounds_with_zeros_or_nan():
    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    got = tma.load_box(a, box=(2, 3), coords=(-1, 2))
    assert np.array_equal(got, [[0, 0, 0], [3, 4, 0]])
    nan = tma.load_box(a, box=(2, 3), coords=(-1, 2), oob_fill="nan")
    assert np.isnan(nan[0]).all() and np.isnan(nan[1, 2]) and nan[1, 0] == 3


def test_load_box_follows_strides_and_element_strides():
    a = np.arange(100, dtype=np.int32).reshape(10, 10)
    assert np.array_equal(tma.load_box(a[:, ::2], box=(2, 2), coords=(3, 1)), a[3:5, 2:6:2])
    assert np.array_equal(tma.load_box(a, box=(4, 3), coords=(0, 0), element_strides=(2, 1)), a[0:4:2, 0:3])


def test_swizzle_128B_xors_the_chunk_with_the_row():
    where = tma.swizzle_offsets(1024, "128B")
    assert sorted(where) == list(range(1024))                      # a permutation of the bytes
    for row in range(8):
        for chunk in range(8):
            assert where[row * 128 + chunk * 16] == row * 128 + (chunk ^ row) * 16
    assert np.array_equal(tma.swizzle_offsets(256, "none"), np.arange(256))
    assert tma.swizzle_offsets(256, "32B")[128 + 0] == 128 + 16    # row 1: chunk 0 <-> 1 within 32 bytes


def test_smem_image_places_each_value_where_the_swizzle_says():
    values = np.arange(64 * 8, dtype=np.uint16).reshape(8, 64)     # 8 rows of 128 bytes
    image = tma.smem_image(values, "128B").view(np.uint16).reshape(8, 64)
    assert np.array_equal(image[3, 8 * (1 ^ 3):8 * (1 ^ 3) + 8], values[3, 8:16])


@needs_simulator
def test_an_emulated_map_describes_what_was_encoded():
    a = np.zeros((3, 40, 24), np.uint16)
    with emulate.emulating():
        m = tma.encode_tiled("bfloat16", a.shape, a.strides, (1, 8, 24), a.ctypes.data)
    d = emulate.describe_map(ctypes.string_at(m.getPtr(), 128))
    assert d["shape"] == a.shape and d["strides"] == a.strides and d["box"] == (1, 8, 24)
    assert d["dtype"] == "bfloat16" and d["swizzle"] == "none"


@needs_simulator
def test_an_emulated_map_is_checked_by_the_drivers_rules():
    with emulate.emulating(), pytest.raises(tma.TensorMapError, match="multiple of 16"):
        tma.encode_tiled("float32", (256, 257), (1028, 4), (32, 32), 0)


# ------------------------------------------------------------------------------------------ the emulator itself
def _run(source, kernel, grid, block, args, types, shared=0, timeout_s=10.0, landing="lazy", include_path=()):
    with emulate.emulating(landing, timeout_s=timeout_s):
        k = nvrtc.load(nvrtc.compile(source, name="test.cu", include_path=list(include_path)), kernel)
        k.launch(grid, block, args, types, shared=shared)


SHUFFLE = r"""
extern "C" __global__ void k(int* out) {
    int v = threadIdx.x;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __shared__ int total[2];
    if ((threadIdx.x & 31) == 0) total[threadIdx.x / 32] = v;
    __syncthreads();
    out[threadIdx.x] = total[0] + total[1];
}
"""


@needs_simulator
def test_threads_shuffle_and_meet_at_barriers():
    out = np.zeros(64, np.int32)
    _run(SHUFFLE, "k", 1, 64, [out.ctypes.data], [ctypes.c_void_p])
    assert (out == sum(range(64))).all()


TURNS = r"""
extern "C" __global__ void k(int* log, int* n) {
    for (int step = 0; step < 3; ++step) {
        if (threadIdx.x % 32 == 0) log[atomicAdd(n, 1)] = threadIdx.x / 32;
        __syncwarp();
    }
}
"""


@needs_simulator
def test_lazy_keeps_the_warps_in_step_and_eager_lets_the_first_run_ahead():
    """The two landings take turns differently: round-robin passes keep warps in step (lazy); eager runs the first
    thread that can go on until it waits, so a warp runs as far ahead as the barriers let it (here to its end: no
    barrier holds it) before the next moves, as far apart as a GPU's warps may drift."""
    order = {}
    for landing in ("lazy", "eager"):
        log, n = np.full(6, -1, np.int32), np.zeros(1, np.int32)
        _run(TURNS, "k", 1, 64, [log.ctypes.data, n.ctypes.data], [ctypes.c_void_p] * 2, landing=landing)
        order[landing] = log.tolist()
    assert order == {"lazy": [0, 1, 0, 1, 0, 1], "eager": [0, 0, 0, 1, 1, 1]}


@needs_simulator
def test_the_precompiled_runtime_header_builds_the_kernel_its_text_builds(tmp_path, monkeypatch):
    # g++ reads runtime.h precompiled (once per runtime) instead of parsing it for every kernel: the same library,
    # byte for byte, and it runs the same
    runtime = emulate._runtime_object()
    with_header = emulate._runtime_header_dir
    built = {}
    for name, header in (("text", lambda: []), ("precompiled", with_header)):
        monkeypatch.setattr(emulate, "CACHE_DIR", tmp_path / name)
        monkeypatch.setattr(emulate, "_runtime_header_dir", header)
        (tmp_path / name).mkdir()
        shutil.copy(runtime, tmp_path / name / runtime.name)       # (the runtime's object is not what differs)
        out = np.zeros(64, np.int32)
        _run(SHUFFLE, "k", 1, 64, [out.ctypes.data], [ctypes.c_void_p])
        assert (out == sum(range(64))).all()
        built[name], = [f.read_bytes() for f in (tmp_path / name).glob("*.so")]
    if "g++" in pathlib.Path(emulate.host_compiler()).name:
        assert list((tmp_path / "precompiled").glob("pch-*/runtime.h.gch"))
    assert built["text"] == built["precompiled"]


@needs_simulator
def test_an_impossible_launch_is_refused_with_the_rule():
    out = np.zeros(1, np.int32)
    with pytest.raises(emulate.EmulationError, match="at most 1024 threads"):
        _run(SHUFFLE, "k", 1, 2048, [out.ctypes.data], [ctypes.c_void_p])


@needs_simulator
def test_an_endless_loop_ends_with_the_time_limit():
    src = 'extern "C" __global__ void k(int* out) { while (out[0] == 0) { } }'
    out = np.zeros(1, np.int32)
    with pytest.raises(emulate.EmulatedTimeout, match="did not finish in 1 s"):
        _run(src, "k", 1, 32, [out.ctypes.data], [ctypes.c_void_p], timeout_s=1.0)


@needs_simulator
def test_lanes_that_left_a_shuffle_are_a_deadlock_named():
    src = r"""extern "C" __global__ void k(int* out) {
        if (threadIdx.x == 3) return;
        out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
    }"""
    out = np.zeros(32, np.int32)
    with pytest.raises(emulate.EmulationError, match=r"(?s)DEADLOCK.*__shfl_xor_sync \(mask 0xffffffff\).*in warp 0, lane\(s\) 3 have left"):
        _run(src, "k", 1, 32, [out.ctypes.data], [ctypes.c_void_p])


@needs_simulator
def test_a_wild_write_is_reported_not_a_crash():
    src = 'extern "C" __global__ void k(int* out) { out[threadIdx.x * 100000000LL] = 1; }'
    out = np.zeros(1, np.int32)
    with pytest.raises(emulate.EmulationError, match="memory it does not own"):
        _run(src, "k", 1, 32, [out.ctypes.data], [ctypes.c_void_p])


@needs_simulator
def test_tensor_core_instructions_are_named_as_not_emulated():
    src = ('extern "C" __global__ void k(int* out) { unsigned a = 0, r = 0; asm volatile('
           '"stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [%0], {%1};\\n" :: "r"(a), "r"(r) : "memory"); }')
    out = np.zeros(1, np.int32)
    with pytest.raises(emulate.CannotEmulate, match="stmatrix"):
        _run(src, "k", 1, 128, [out.ctypes.data], [ctypes.c_void_p])


@needs_simulator
def test_a_misaligned_cp_async_fails_as_on_a_gpu():
    src = r"""extern "C" __global__ void k(const unsigned char* in) {
        extern __shared__ __align__(16) unsigned char smem[];
        unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(in + 4) : "memory");
        asm volatile("cp.async.commit_group;\n" ::: "memory");
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }"""
    data = np.zeros(64, np.uint8)
    with pytest.raises(emulate.EmulationError, match="16-byte aligned"):
        _run(src, "k", 1, 32, [data.ctypes.data], [ctypes.c_void_p], shared=64)


# ------------------------------------------------------------------------------------------ the C++ labs on a CPU
def _region(module):
    path = str(module.SOURCE.relative_to(notebooks.PACKAGE))
    return notebooks.strip_markers(notebooks.region_source(path))


@needs_simulator
@pytest.mark.parametrize("module", [s06, s07], ids=["06", "07"])
def test_the_solution_passes_in_the_emulator(module, capsys):
    if not module.unavailable():
        pytest.skip("this machine runs the stage: the GPU grades it")
    assert resample.grade(module.NAME, _region(module)), capsys.readouterr().out
    assert "emulator" in capsys.readouterr().out


def _full_source_case(module, old, new, landing="lazy"):
    from cudabook import resample
    from cudabook.resample import inputs, problem
    text = module.source()
    assert old in text
    args = inputs.random_problem(2, 200, 40, 40, rng=np.random.default_rng(3))
    p = problem.upload(*args)
    p.poison()
    with emulate.emulating(landing, timeout_s=20):
        module.launch(p, kernel=text.replace(old, new, 1))
    return resample.judge(p.result(), *args)


@needs_simulator
def test_consumers_waiting_with_the_wrong_parity_read_too_early():
    old = "mbar_wait(full0 + 8 * s, (k / STAGES) & 1);"
    try:
        verdict = _full_source_case(s07, old, "mbar_wait(full0 + 8 * s, ((k / STAGES) & 1) ^ 1);")
    except emulate.EmulationError:
        return   # reading the stage's header before it was written may also stop the kernel: never a PASS
    assert not verdict.ok


@needs_simulator
def test_a_producer_waiting_with_the_wrong_parity_is_a_deadlock_named():
    old = "mbar_wait(empty0 + 8 * s, ((k / STAGES) & 1) ^ 1);   // the consumers"
    with pytest.raises(emulate.EmulationError, match=r"DEADLOCK(.|\n)*wrong parity"):
        _full_source_case(s07, old, "mbar_wait(empty0 + 8 * s, (k / STAGES) & 1);   // the consumers")


def _lopsided(st, tt, rng, dense_first):
    """Source times of which one half is 100x denser than the other (an evenly spread guess lands far off: too
    early when the dense half comes first, too late otherwise), and targets spread over the new range as before."""
    B, S = st.shape
    dense = np.arange(S) < S // 2 if dense_first else np.arange(S) >= S // 2
    steps = np.where(dense, 0.01, 1.0).astype(np.float32) * rng.uniform(0.5, 1.0, (B, S))
    st2 = np.cumsum(steps, axis=1, dtype=np.float32)
    lo, hi = st2[:, :1], st2[:, -1:]
    tt2 = (lo + (tt - st[:, :1]) / (st[:, -1:] - st[:, :1]) * (hi - lo)).astype(np.float32)
    return st2, tt2


@needs_simulator
@pytest.mark.parametrize("srt", [True, False])
@pytest.mark.parametrize("spread", ["even", "dense first", "dense last"])
@pytest.mark.parametrize("S", [50, 129, 300])          # fewer source times than the guess loads, one more, many
def test_07_blocks_that_search_for_themselves_give_the_same_bits(srt, spread, S, monkeypatch):
    # self_search_blocks: the first blocks find their own pairs (no wait for the prepass); none, some, "auto"
    # and every block must write the same bits, and right ones (the pairs buffer holds garbage first). Evenly
    # spread times: the guess's window holds the intervals; lopsided ones: it misses, and the search runs
    from cudabook.resample import checking as check
    from cudabook.resample import inputs, problem
    rng = np.random.default_rng(8)
    st, sf, tt = inputs.random_problem(2, S, 200, 40, sorted_targets=srt, rng=rng)
    if spread != "even":
        st, tt = _lopsided(st, tt, rng, spread == "dense first")
    p = problem.upload(st, sf, tt)
    ref, scale = inputs.reference_with_scale(st, sf, tt)
    outs = []
    with emulate.emulating():
        for own in (0, 3, "auto", 10**9):
            p.poison()
            s07.launch(p, self_search_blocks=own)
            outs.append(p.out.copy_to_host())
        # the main kernel alone, after garbage in the pairs buffer: right only if no block reads the pairs
        from numba import cuda
        garbage = cuda.to_device(np.full((2 * 200, 2), 0x7F7F7F7F, np.int32))
        monkeypatch.setattr(s07, "pairs_buffer", lambda n: garbage)   # (the simulator's context is not one object)
        p.poison()
        s07.parts(p, self_search_blocks=10**9, pdl=False)["main"]()   # (with pdl the last block would wait)
        outs.append(p.out.copy_to_host())
        p.poison()
        try:                                  # (without own searches the blocks read the garbage: wrong, or a fault)
            s07.parts(p, self_search_blocks=0)["main"]()
            assert not check.compare(p.out.copy_to_host().view(inputs.BF16), ref, scale).ok
        except emulate.EmulationError:
            pass
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    assert check.compare(outs[0].view(inputs.BF16), ref, scale).ok


@needs_simulator
def test_07_own_search_guess_alone_serves_evenly_spread_times():
    # the guess path is really taken: with the full search cut out of own_pairs (a trap in its place), evenly
    # spread source times and sorted targets still come out right when every block searches for itself
    from cudabook import resample
    from cudabook.resample import inputs, problem
    full = "    item_window(times, S, it, x, -1, L, n, lb);\n    producer_pairs(times, S, it, L, n, x, pw, e);\n}"
    assert s07.source().count(full) == 1
    text = s07.source().replace(full, "    __trap();\n}")
    args = inputs.random_problem(2, 300, 200, 40, rng=np.random.default_rng(9))
    p = problem.upload(*args)
    p.poison()
    with emulate.emulating():
        s07.launch(p, kernel=text, self_search_blocks=10**9, pdl=False)
    assert resample.judge(p.result(), *args).ok


@needs_simulator
@pytest.mark.parametrize("bad", [-1, 2.5, "all", True])
def test_07_refuses_a_bad_self_search_blocks(bad):
    from cudabook.resample import inputs, problem
    p = problem.upload(*inputs.random_problem(1, 50, 40, 16, rng=np.random.default_rng(2)))
    with emulate.emulating(), pytest.raises(ValueError, match="self_search_blocks must be"):
        s07.launch(p, self_search_blocks=bad)


@needs_simulator
def test_the_stage_sources_run_right_both_ways():
    for module in (s06, s07):
        for landing in ("lazy", "eager"):
            assert _full_source_case(module, "", "", landing).ok, (module.NAME, landing)


# ------------------------------------------------------------------------------------------ warp-wide matrix work
_MMA = r"""#include "mma_sync.cuh"
extern "C" __global__ void k(const u16* A, const u16* Bt, const u16* Vt, float* C, float* PV) {
    // A [16][16] and Bt [8][16] (B transposed: n rows of k) row-major; Vt [16][8] (k rows of n) for .trans
    extern __shared__ __align__(128) unsigned char smem[];
    u16* s = (u16*)smem;
    const int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) s[i] = A[i];
    for (int i = lane; i < 128; i += 32) { s[256 + i] = Bt[i]; s[384 + i] = Vt[i]; }
    __syncthreads();
    const u32 base = __cvta_generic_to_shared(s);
    u32 a[4], b[4], bt[4];
    ldmatrix_x4(a, base + ((lane & 15) * 16 + (lane >> 4) * 8) * 2);          // A: rows lane % 16, k half lane / 16
    ldmatrix_x4(b, base + 512 + ((lane & 7) * 16 + ((lane >> 3) & 1) * 8) * 2);   // B^T rows: n lane % 8, k half
    ldmatrix_x4_trans(bt[0], bt[1], bt[2], bt[3], base + 768 + ((lane & 15) * 8) * 2);   // V: k rows lane % 16
    float c[4] = {1.f, 2.f, 3.f, 4.f}, d[4] = {0.f, 0.f, 0.f, 0.f};
    const u32 b0[2] = {b[0], b[1]}, v0[2] = {bt[0], bt[1]};
    mma_16816(c, a, b0);
    mma_16816(d, a, v0);
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
        C[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = c[e];
        PV[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = d[e];
    }
}
"""


@needs_simulator
def test_mma_sync_and_ldmatrix_as_a_gpu_computes_them():
    """mma.m16n8k16 from ldmatrix fragments (plain for A and for B stored n-row by n-row, .trans for B stored
    k-row by k-row) gives the matrix product, plus the accumulator it started from."""
    import pathlib
    import ml_dtypes
    rng = np.random.default_rng()
    f32_to_bf16 = lambda x: x.astype(ml_dtypes.bfloat16).view(np.uint16)    # noqa: E731
    a = f32_to_bf16(rng.standard_normal((16, 16)).astype(np.float32))
    bt = f32_to_bf16(rng.standard_normal((8, 16)).astype(np.float32))      # B^T: [n][k]
    vt = f32_to_bf16(rng.standard_normal((16, 8)).astype(np.float32))      # [k][n]
    f = lambda x: (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)   # noqa: E731
    c = np.zeros((16, 8), np.float32)
    pv = np.zeros((16, 8), np.float32)
    gemm = pathlib.Path(nvrtc.__file__).parent / "gemm" / "kernels"
    _run(_MMA, "k", 1, 32, [a.ctypes.data, bt.ctypes.data, vt.ctypes.data, c.ctypes.data, pv.ctypes.data],
         [ctypes.c_void_p] * 5, shared=1024, include_path=[gemm])
    assert np.allclose(c, f(a) @ f(bt).T + _start(16, 8), rtol=1e-6, atol=1e-5)
    assert np.allclose(pv, f(a) @ f(vt), rtol=1e-6, atol=1e-5)


def _start(rows, cols):
    """The accumulator's start in the kernel: c = {1, 2, 3, 4} in every lane, laid out as a C fragment."""
    out = np.zeros((rows, cols))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for e in range(4):
            out[g + 8 * (e // 2), 2 * t + e % 2] = e + 1
    return out


@needs_simulator
def test_a_write_past_the_end_is_reported_and_the_buffers_come_back():
    """Arrays handed out by device.address are fenced for the launch: a write past the end (up to a MiB past)
    faults and is reported instead of corrupting the process's heap; what the kernel wrote inside comes back."""
    from numba import cuda
    src = r"""extern "C" __global__ void k(float* out, int n, int far) {
        out[threadIdx.x] = 1.0f + threadIdx.x;
        if (far && threadIdx.x == 0) out[n + 4096] = 7.0f;
    }"""
    with emulate.emulating():
        out = cuda.to_device(np.zeros(64, np.float32))
        kern = nvrtc.load(nvrtc.compile(src, name="test.cu"), "k")
        address = device.address(out)
        kern.launch(1, 64, [address, 64, 0], [ctypes.c_void_p, ctypes.c_int, ctypes.c_int])
        assert (out.copy_to_host() == 1 + np.arange(64)).all()
        with pytest.raises(emulate.EmulationError, match=r"does not own.*16,384 bytes past the end of the array "
                                                         r"passed as argument 0 \(256 bytes\)"):
            kern.launch(1, 64, [address, 64, 1], [ctypes.c_void_p, ctypes.c_int, ctypes.c_int])


@needs_simulator
def test_a_kernel_fed_by_tensor_maps_is_fenced_too():
    """With tensor maps among its arguments a kernel's arrays are fenced all the same (each map handed over as a
    copy naming the fenced tensor): attention 06 storing the rows before row 0 that a causal block starts early
    with (its `r < 0` guard removed) is reported with the array and the distance, and the process lives on."""
    from cudabook import attention
    from cudabook.attention import s06_warp_specialized as s06
    wrong = s06.source().replace("if (r < 0 || r >= Nq) continue;", "if (r >= Nq) continue;")
    assert wrong != s06.source()
    args = attention.random_problem(1, 1, 45, 45, 64, causal=True)       # BQ = 192: the block starts 147 rows early
    p = attention.upload(*args)
    for kernel, fails in ((None, False), (wrong, True)):
        p.poison()
        with emulate.emulating():
            if fails:
                with pytest.raises(emulate.EmulationError, match="bytes before the start of the array passed as "
                                                                 "argument 3"):
                    s06.launch(p, kernel=kernel)
            else:
                s06.launch(p, kernel=kernel)
                assert attention.judge(p.result(), *args).ok


@needs_simulator
def test_which_kernels_are_launched_with_pdl(monkeypatch):
    # the host's programmatic-dependent-launch decisions, without a GPU: 07's prepass and streaming kernel with
    # PDL, the streaming kernel's last block kept out of the own searches (so it waits for the prepass, and the
    # kernel cannot end before it), even where "auto" or a count asks for every block; 08 with PDL on sm_90 for
    # every search, and on sm_80 never
    import dataclasses
    from cudabook import resample
    from cudabook.resample import problem, s08_fused_gather as s08
    seen = []
    launch = emulate.EmulatedKernel.launch
    monkeypatch.setattr(emulate.EmulatedKernel, "launch", lambda self, grid, block, args, *a, pdl=False, **kw: (
        seen.append((self.name, pdl, grid, args[-1])), launch(self, grid, block, args, *a, pdl=pdl, **kw))[1])
    args = resample.random_problem(1, 80, 64, 16, rng=np.random.default_rng(3))     # 2 items: one wave
    p = problem.upload(*args)
    with emulate.emulating():
        for params, pdl, own in (({}, True, 1), ({"self_search_blocks": 10**9}, True, 1),
                                 ({"self_search_blocks": 0}, True, 0), ({"pdl": False}, False, 0),
                                 ({"pdl": False, "self_search_blocks": 10**9}, False, 10**9)):
            seen.clear()
            p.poison()
            s07.launch(p, **params)
            assert resample.judge(p.result(), *args).ok
            assert [(n, f) for n, f, _, _ in seen] == [(s07.INTERVALS, pdl), (s07.KERNEL, pdl)], (params, seen)
            assert seen[1][2] == 2 and seen[1][3] == own, (params, seen)          # grid, self_blocks
    for cc, pdl in (((9, 0), True), ((8, 0), False)):
        # (the emulator's GPU as another compute capability: emulating() installs it, and takes it away after)
        monkeypatch.setattr(emulate, "EMULATED_GPU", dataclasses.replace(emulate.EMULATED_GPU, compute_capability=cc))
        with emulate.emulating():
            for search, kernels in (("window", [s08.KERNEL]), ("prepass", [s08.FIND, s08.KERNEL])):
                seen.clear()
                p.poison()
                s08.launch(p, search=search)
                assert resample.judge(p.result(), *args).ok
                assert [(n, f) for n, f, _, _ in seen] == [(k, pdl) for k in kernels], (search, cc, seen)
    assert device.EMULATED is None
