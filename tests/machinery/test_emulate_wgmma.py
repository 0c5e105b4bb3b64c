"""Hopper's warpgroup MMA in the CPU emulator (cudabook/emulate/runtime.cpp, "warpgroup MMA"): each form of
wgmma.mma_async against NumPy on hand-made shared-memory images (every swizzle mode, K-major and MN-major operands,
A from registers, the immediates), the asynchrony (commit and wait groups, the accumulators in flight, wgmma.fence),
the warpgroup as one issuer, and the labs it makes gradable on a CPU: GEMM 05 and attention 05, their solutions
passing and their planted mistakes failing.

The shared-memory images are built here from the layouts themselves, not from the emulator's arithmetic: a
swizzled operand is what TMA writes for a box of rows W bytes wide (cudabook.tma.smem_image, the TMA unit's
swizzle, which the emulator's TMA copies use too), and the unswizzled ("interleaved") one is written core matrix by
core matrix (8 rows of 16 bytes each, LBO and SBO apart) as the PTX ISA draws it.

The test kernels run in the emulator only: their wgmma immediates (transpose, scale) are kernel arguments, which
the emulator takes (it reads an "n" operand like any other) and NVRTC would refuse."""
import ctypes
import shutil
import time

import ml_dtypes
import numpy as np
import pytest

from cudabook import SIMULATOR, emulate, labs, nvrtc, tma, track

pytestmark = [pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="no host C++ compiler"),
              pytest.mark.skipif(not SIMULATOR, reason="the emulator runs where Numba runs in its simulator")]

SWIZZLE_BITS = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
RNG = np.random.default_rng(2027)


def bf16(shape):
    """Random bf16 bits (uint16) and their float64 values: small integers over 8 (exact products and sums)."""
    x = (RNG.integers(-24, 25, size=shape) / 8.0).astype(ml_dtypes.bfloat16)
    return x.view(np.uint16), x.astype(np.float64)


def descriptor(offset, lbo, sbo, swizzle="none", base_offset=0):
    """The 64-bit matrix descriptor of a tile `offset` bytes past the kernel's 1024-aligned shared base (the
    kernel adds the base's address): the field layout of the PTX ISA's "Matrix Descriptor Format"."""
    return ((offset >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 \
        | base_offset << 49 | SWIZZLE_BITS[swizzle] << 62


# ------------------------------------------------------------------------------------------ operand images
def k_major(values, swizzle, lbo=128, sbo=256):
    """An operand [MN rows][16 k] stored K-major. Swizzled (W bytes): rows of W bytes (the k16 slice in the first
    32 bytes of each), 8-row atoms, chunk c of row r at c ^ (r % (W / 16)), exactly a TMA box [MN][W / 2]; the
    descriptor: SBO = 8 W (the next 8 rows), LBO unused. Unswizzled: core matrices of 8 rows x 16 bytes (8 k),
    the second k half LBO on, the next 8 rows SBO on. Returns (bytes, lbo, sbo)."""
    rows = values.shape[0]
    if swizzle == "none":
        image = np.zeros(max(lbo + 128, 0) + (rows // 8) * sbo + 256, np.uint8)
        for m in range(rows):
            for k in range(16):
                at = (m % 8) * 16 + (m // 8) * sbo + (k // 8) * lbo + (k % 8) * 2
                image[at:at + 2] = np.frombuffer(values[m, k].tobytes(), np.uint8)
        return image, lbo, sbo
    w = int(swizzle[:-1])
    box = np.zeros((rows, w // 2), np.uint16)
    box[:, :16] = values
    return tma.smem_image(box, swizzle), 16, 8 * w


def mn_major(values, swizzle, lbo=None, sbo=None):
    """An operand given [16 k][MN] stored MN-major (MN contiguous). Swizzled (W bytes): each W / 2 columns of MN
    are a TMA box [16 k rows][W / 2], swizzled, the boxes LBO = 16 W bytes apart; SBO = 8 W (the next 8 k rows).
    Unswizzled: core matrices of 8 k rows x 16 bytes (8 MN), the next 8 MN SBO on, the next 8 k LBO on."""
    mn = values.shape[1]
    if swizzle == "none":
        lbo, sbo = lbo or 128, sbo or 256
        image = np.zeros(lbo + (mn // 8) * sbo + 256, np.uint8)
        for k in range(16):
            for n in range(mn):
                at = (n // 8) * sbo + (k % 8) * 16 + (k // 8) * lbo + (n % 8) * 2
                image[at:at + 2] = np.frombuffer(values[k, n].tobytes(), np.uint8)
        return image, lbo, sbo
    w = int(swizzle[:-1])
    per = w // 2
    lbo = lbo or 16 * w
    image = np.zeros(lbo * max(1, -(-mn // per)), np.uint8)
    for b in range(-(-mn // per)):
        box = np.zeros((16, per), np.uint16)
        part = values[:, b * per:(b + 1) * per]
        box[:, :part.shape[1]] = part
        image[b * lbo:b * lbo + 16 * w] = tma.smem_image(box, swizzle)
    return image, lbo, 8 * w


# ------------------------------------------------------------------------------------------ the test kernel
WGMMA_N16 = r"""#include "hopper.cuh"
// D[64 x 16] (+)= A * B, one or two wgmmas (the second one on the same accumulators), optionally in two commit
// groups with a look at the accumulators between wait_group 1 and wait_group 0. mode bits: 1 A from registers,
// 2 the same wgmma again (accumulating) in the same group, 4 skip the fence, 8 write an accumulator
// between issue and wait, 16 overwrite a byte of A's tile between issue and wait, 32 thread 5 returns first,
// 64 no wait at all, 128 a second group on other accumulators, waited for in two steps, 256 and 1024 the
// accumulators written by the thread between two wgmmas (see below).
__device__ void mma16(float (&d)[8], unsigned long long da, unsigned long long db, int sd, int sa, int sb, int ta,
                      int tb) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %10, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, "
               "%11, %12, %13, %14; }"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(da), "l"(db), "r"(sd), "n"(sa), "n"(sb), "n"(ta), "n"(tb));
}
__device__ void mma16_rs(float (&d)[8], const uint32_t (&a)[4], unsigned long long db, int sd, int sa, int sb,
                         int tb) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %13, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, "
               "{%8, %9, %10, %11}, %12, p, %14, %15, %16; }"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(sd), "n"(sa), "n"(sb), "n"(tb));
}
extern "C" __global__ void k(const uint8_t* image, int nbytes, const uint16_t* a_rows, unsigned long long da,
                             unsigned long long db, int sd, int sa, int sb, int ta, int tb, int mode, float* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
  uint8_t* s = smem + (base - smem_u32(smem));
  for (int i = threadIdx.x; i < nbytes; i += blockDim.x) s[i] = image[i];
  __syncthreads();
  if ((mode & 32) && threadIdx.x == 5) return;
  da += base >> 4;
  db += base >> 4;
  const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, g = lane / 4, t = lane % 4;
  uint32_t a[4];                                   // A's register fragment, as mma.m16n8k16's of warp w
  for (int r = 0; r < 4; ++r) {
    const int row = 16 * w + g + 8 * (r % 2), k = 2 * t + 8 * (r / 2);
    a[r] = (uint32_t)a_rows[row * 16 + k] | (uint32_t)a_rows[row * 16 + k + 1] << 16;
  }
  float d[8], e[8];
  for (int i = 0; i < 8; ++i) { d[i] = 1.0f + i; e[i] = 100.0f + i; }
  if (!(mode & 4)) wgmma_fence();
  if (mode & 1) mma16_rs(d, a, db, sd, sa, sb, tb); else mma16(d, da, db, sd, sa, sb, ta, tb);
  if (mode & 2) mma16(d, da, db, 1, sa, sb, ta, tb);
  if (mode & 8) d[3] = 7.0f;
  if ((mode & 16) && threadIdx.x == 0) s[0] ^= 0x40;
  wgmma_commit();
  if (mode & 128) { mma16(e, da, db, 1, sa, sb, ta, tb); wgmma_commit(); }
  if (mode & 64) return;
  if (mode & 128) {
    wgmma_wait<1>();
    for (int i = 0; i < 8; ++i) out[1024 + threadIdx.x * 8 + i] = e[i];   // still in flight: not landed yet
  }
  wgmma_wait<0>();
  if (mode & 256) {            // the thread writes an accumulator, then (a fence with 512) accumulates into it again
    d[0] += 1.0f;
    if (mode & 512) wgmma_fence();
    mma16(d, da, db, 1, sa, sb, ta, tb);
    wgmma_commit();
    wgmma_wait<0>();
  }
  if (mode & 1024) {           // write, fence, a wgmma on other registers and its wait, then d without a new fence
    d[0] += 1.0f;
    wgmma_fence();
    mma16(e, da, db, 1, sa, sb, ta, tb);
    wgmma_commit();
    wgmma_wait<0>();
    mma16(d, da, db, 1, sa, sb, ta, tb);
    wgmma_commit();
    wgmma_wait<0>();
  }
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i];
  if (mode & 128) for (int i = 0; i < 8; ++i) out[2048 + threadIdx.x * 8 + i] = e[i];
}
"""


def run_n16(image, a_rows, da, db, *, sd=1, sa=1, sb=1, ta=0, tb=0, mode=0, threads=128, landing="lazy",
            timeout_s=20.0):
    """Launch WGMMA_N16 on one block of `threads`; returns out (float32 [3, 128, 8]: d, then e before and after
    the last wait when mode has 128)."""
    image = np.ascontiguousarray(image, np.uint8)
    rows = np.ascontiguousarray(a_rows, np.uint16)
    out = np.full(3 * 1024, -12345.0, np.float32)
    shared = 1024 + image.size
    args = [image.ctypes.data, image.size, rows.ctypes.data, da, db, sd, sa, sb, ta, tb, mode, out.ctypes.data]
    types = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_ulonglong] + \
        [ctypes.c_int] * 6 + [ctypes.c_void_p]
    with emulate.emulating(landing, timeout_s=timeout_s):
        kern = nvrtc.load(nvrtc.compile(WGMMA_N16, name="wgmma_test.cu"), "k")
        kern.launch(1, threads, args, types, shared=shared)
    return out.reshape(3, 128, 8)


def fragment(out):
    """D [64 x 16] from the threads' registers: the PTX ISA's wgmma D fragment (gemm.wgmma.accumulator_positions)."""
    from cudabook.gemm.wgmma import from_registers
    return from_registers(out, 16, np.float64)


START = fragment(np.tile(1.0 + np.arange(8, dtype=np.float32), (128, 1)))   # d[i] = 1 + i, as the kernel sets


def operands(swz_a, swz_b, ta=0, tb=0):
    """Random A [64 x 16] and B [16 x 16], the shared image (A at 0, B at 8 KiB), their descriptors."""
    a_bits, a = bf16((64, 16))
    b_bits, b = bf16((16, 16))
    img_a, lbo_a, sbo_a = mn_major(a_bits.T.copy(), swz_a) if ta else k_major(a_bits, swz_a)
    img_b, lbo_b, sbo_b = mn_major(b_bits, swz_b) if tb else k_major(b_bits.T.copy(), swz_b)
    image = np.zeros(8192 + img_b.size, np.uint8)
    image[:img_a.size] = img_a
    image[8192:] = img_b
    return a_bits, a, b, image, descriptor(0, lbo_a, sbo_a, swz_a), descriptor(8192, lbo_b, sbo_b, swz_b)


# ------------------------------------------------------------------------------------------ each form
@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 1)], ids=["A K, B K", "A K, B MN", "A MN, B MN"])
def test_wgmma_reads_each_layout_as_the_ptx_isa_draws_it(swizzle, ta, tb):
    a_bits, a, b, image, da, db = operands(swizzle, swizzle, ta, tb)
    for landing in ("lazy", "eager"):
        got = fragment(run_n16(image, a_bits, da, db, ta=ta, tb=tb, landing=landing)[0])
        assert np.array_equal(got, a @ b + START), (swizzle, ta, tb, landing)


def test_the_immediates_negate_and_scale_d_drops_the_accumulator():
    a_bits, a, b, image, da, db = operands("128B", "none", 0, 1)
    got = fragment(run_n16(image, a_bits, da, db, sd=0, sa=-1, tb=1)[0])
    assert np.array_equal(got, -(a @ b))
    got = fragment(run_n16(image, a_bits, da, db, sd=1, sa=-1, sb=-1, tb=1)[0])
    assert np.array_equal(got, a @ b + START)


def test_a_from_registers_is_the_mma_sync_fragment_of_each_warp():
    a_bits, a, b, image, _, db = operands("64B", "32B", 0, 1)
    got = fragment(run_n16(image, a_bits, 0, db, tb=1, mode=1)[0])
    assert np.array_equal(got, a @ b + START)


def test_lbo_and_sbo_swapped_read_a_different_matrix():
    a_bits, a, b, image, da, db = operands("none", "128B", 0, 0)
    f = lambda d: (d >> 16 & 0x3FFF, d >> 32 & 0x3FFF)                           # noqa: E731
    lbo, sbo = f(da)
    assert lbo != sbo
    swapped = da & ~(0x3FFF << 16 | 0x3FFF << 32) | sbo << 16 | lbo << 32
    got = fragment(run_n16(image, a_bits, swapped, db)[0])
    assert not np.array_equal(got, a @ b + START)
    assert np.array_equal(fragment(run_n16(image, a_bits, da, db)[0]), a @ b + START)


def test_a_swizzle_the_tile_was_not_written_with_reads_a_different_matrix():
    a_bits, a, b, image, da, db = operands("128B", "128B", 0, 0)
    sixty_four = da & ~(3 << 62) | SWIZZLE_BITS["64B"] << 62
    assert not np.array_equal(fragment(run_n16(image, a_bits, sixty_four, db)[0]), a @ b + START)


def test_two_wgmmas_on_one_accumulator_add_up_in_order():
    a_bits, a, b, image, da, db = operands("32B", "64B", 0, 1)
    for landing in ("lazy", "eager"):
        got = fragment(run_n16(image, a_bits, da, db, tb=1, mode=2, landing=landing)[0])
        assert np.array_equal(got, 2 * (a @ b) + START), landing


def test_wait_group_1_lands_the_older_group_only():
    a_bits, a, b, image, da, db = operands("128B", "128B", 0, 0)
    out = run_n16(image, a_bits, da, db, mode=128)
    assert np.array_equal(fragment(out[0]), a @ b + START)                       # group 1: landed at wait_group 1
    e0 = fragment(np.tile(100.0 + np.arange(8, dtype=np.float32), (128, 1)))
    assert np.isnan(out[1]).all()                                                 # group 2: in flight, no value yet
    assert np.array_equal(fragment(out[2]), a @ b + e0)                           # ... until wait_group 0


def test_a_kit_sized_wgmma_from_tma_boxes_is_the_product():
    """hopper.cuh's Wgmma<N> as the GEMM rung calls it: A [64 x 64] K-major and B [64 x N] MN-major in 128-byte
    swizzled boxes (tech-facts section 7), four k16 steps (+32 bytes for A, +2048 for B), N = 64, 128, 256."""
    src = r"""#include "hopper.cuh"
    template <int N> __device__ void run(uint32_t a, uint32_t b, float* out) {
      float d[N / 2];
      for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
      wgmma_fence();
      for (int kk = 0; kk < 4; ++kk)
        Wgmma<N>::template mma<1>(d, smem_desc(a + 32 * kk, 16, 1024), smem_desc(b + 2048 * kk, 8192, 1024), 1);
      wgmma_commit();
      wgmma_wait<0>();
      for (int i = 0; i < N / 2; ++i) out[threadIdx.x * (N / 2) + i] = d[i];
    }
    extern "C" __global__ void k(const uint8_t* image, int nbytes, int n, float* out) {
      extern __shared__ __align__(16) unsigned char smem[];
      const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
      uint8_t* s = smem + (base - smem_u32(smem));
      for (int i = threadIdx.x; i < nbytes; i += blockDim.x) s[i] = image[i];
      __syncthreads();
      if (n == 64) run<64>(base, base + 8192, out);
      if (n == 128) run<128>(base, base + 8192, out);
      if (n == 256) run<256>(base, base + 8192, out);
    }"""
    for n in (64, 128, 256):
        a_bits, a = bf16((64, 64))
        b_bits, b = bf16((64, n))
        image = np.zeros(8192 + 8192 * (n // 64), np.uint8)
        image[:8192] = tma.smem_image(a_bits, "128B")
        for j in range(n // 64):
            image[8192 + 8192 * j:8192 + 8192 * (j + 1)] = tma.smem_image(b_bits[:, 64 * j:64 * (j + 1)].copy(), "128B")
        out = np.zeros(128 * n // 2, np.float32)
        with emulate.emulating():
            kern = nvrtc.load(nvrtc.compile(src, name="kit.cu"), "k")
            kern.launch(1, 128, [image.ctypes.data, image.size, n, out.ctypes.data],
                        [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p], shared=1024 + image.size)
        from cudabook.gemm.wgmma import from_registers
        got = from_registers(out, n, np.float64)
        assert np.array_equal(got, a @ b), n


# ------------------------------------------------------------------------------------------ what it reports
def _fails(match, **kw):
    a_bits, _, _, image, da, db = operands("128B", "128B", 0, 0)
    with pytest.raises(emulate.EmulationError, match=match):
        run_n16(image, a_bits, da, db, **kw)


def test_touching_the_accumulators_before_the_wait_is_reported():
    _fails("accumulators of a wgmma were read or written before the wgmma_wait that covers them", mode=8)


def test_the_first_wgmma_without_a_fence_is_reported():
    _fails("without a wgmma.fence before it", mode=4)


def test_accumulating_into_registers_written_without_a_fence_between_is_reported():
    _fails("wrote accumulator registers after a wgmma had written them and issues a wgmma that accumulates into "
           "them without a wgmma.fence", mode=256)


def test_a_fence_anywhere_between_the_write_and_the_wgmma_orders_it():
    a_bits, a, b, image, da, db = operands("64B", "64B", 0, 1)
    one = fragment(np.tile(np.eye(1, 8, dtype=np.float32)[0], (128, 1)))          # d[0] += 1 in every thread
    for mode in (256 | 512, 1024):
        got = fragment(run_n16(image, a_bits, da, db, tb=1, mode=mode)[0])
        assert np.array_equal(got, 2 * (a @ b) + START + one), mode


def test_overwriting_an_operand_before_the_wait_is_reported():
    for landing in ("lazy", "eager"):
        _fails(r"shared memory a wgmma reads changed between its issue and the wgmma_wait.*A\[m 0\]\[k 0\]",
               mode=16, landing=landing)


def test_a_thread_missing_from_the_warpgroup_is_a_deadlock_named():
    _fails(r"(?s)DEADLOCK.*warpgroup 0: 127 of its 128 threads wait at a wgmma.mma_async.*have left", mode=32)


def test_a_block_smaller_than_a_warpgroup_is_refused():
    _fails("a warpgroup is 128 threads", threads=64)


def test_a_wgmma_never_waited_for_is_reported():
    _fails("ended with 1 wgmma.mma_async never waited for", mode=64)


def test_threads_of_a_warpgroup_with_different_descriptors_are_reported():
    src = WGMMA_N16.replace("  da += base >> 4;", "  da += base >> 4;\n  if (threadIdx.x == 40) da += 2;")
    a_bits, _, _, image, da, db = operands("128B", "128B", 0, 0)
    out = np.zeros(3 * 1024, np.float32)
    rows = np.ascontiguousarray(a_bits)
    args = [image.ctypes.data, image.size, rows.ctypes.data, da, db, 1, 1, 1, 0, 0, 0, out.ctypes.data]
    types = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_ulonglong] + \
        [ctypes.c_int] * 6 + [ctypes.c_void_p]
    with emulate.emulating(), pytest.raises(emulate.EmulationError, match="issue different wgmmas together"):
        nvrtc.load(nvrtc.compile(src, name="wgmma_test.cu"), "k").launch(1, 128, args, types,
                                                                        shared=1024 + image.size)


def test_a_base_offset_is_named_as_not_emulated():
    a_bits, _, _, image, da, db = operands("128B", "128B", 0, 0)
    with pytest.raises(emulate.CannotEmulate, match="base offset"):
        run_n16(image, a_bits, da | 1 << 49, db)


def test_fence_proxy_async_and_wgmma_fence_are_accepted():
    src = r"""extern "C" __global__ void k(int* out) {
        asm volatile("fence.proxy.async.shared::cta;\nwgmma.fence.sync.aligned;\nwgmma.commit_group.sync.aligned;\n"
                     "wgmma.wait_group.sync.aligned 0;" ::: "memory");
        out[threadIdx.x] = 1;
    }"""
    out = np.zeros(128, np.int32)
    with emulate.emulating():
        nvrtc.load(nvrtc.compile(src, name="t.cu"), "k").launch(1, 128, [out.ctypes.data], [ctypes.c_void_p])
    assert (out == 1).all()


def test_a_stmatrix_form_the_rungs_do_not_use_is_named_as_not_emulated():
    src = r"""extern "C" __global__ void k(int* out) {
        asm volatile("stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [%0], {%1};" :: "r"(0), "r"(0) : "memory");
    }"""
    out = np.zeros(1, np.int32)
    with emulate.emulating(), pytest.raises(emulate.CannotEmulate, match="stmatrix"):
        nvrtc.load(nvrtc.compile(src, name="t.cu"), "k").launch(1, 32, [out.ctypes.data], [ctypes.c_void_p])


def test_the_warp_specialized_rungs_other_instructions():
    """bar.arrive (a producer warp signals consumers waiting in bar.sync on the same named barrier, without waiting
    itself) and ex2.approx.ftz.f32 (2^x), which the Hopper rungs' warp-specialized kernels use."""
    src = r"""extern "C" __global__ void k(const float* x, float* out) {
        __shared__ float v[32];
        if (threadIdx.x >= 32) {                       // warp 1: writes, arrives, goes on
            v[threadIdx.x - 32] = 2.0f * x[threadIdx.x - 32];
            asm volatile("bar.arrive 1, 64;" ::: "memory");
            return;
        }
        asm volatile("bar.sync 1, 64;" ::: "memory");  // warp 0: waits for warp 1's arrival
        float r;
        asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v[threadIdx.x]));
        out[threadIdx.x] = r;
    }"""
    x = np.linspace(-70.0, 3.0, 32).astype(np.float32)
    out = np.zeros(32, np.float32)
    with emulate.emulating():
        nvrtc.load(nvrtc.compile(src, name="t.cu"), "k").launch(1, 64, [x.ctypes.data, out.ctypes.data],
                                                                [ctypes.c_void_p] * 2)
    want = np.exp2(2.0 * x.astype(np.float64))
    want[want < np.finfo(np.float32).tiny] = 0.0                                   # .ftz: no denormal results
    assert np.allclose(out, want, rtol=1e-6, atol=0)


# ------------------------------------------------------------------------------------------ the labs on a CPU
def _mistakes_grading():
    import mistakes_grading
    return mistakes_grading


@pytest.mark.parametrize("name", ["gemm", "attention"])
def test_lab_05_is_graded_in_the_emulator_and_the_solution_passes(name, capsys):
    t = track.get(name)
    if not t.unavailable("05_wgmma_tma"):
        pytest.skip("this machine runs the stage: the GPU grades it")
    start = time.monotonic()
    assert labs.grade("05_wgmma_tma", _mistakes_grading().region(t.stage("05_wgmma_tma")), track=name), \
        capsys.readouterr().out
    out = capsys.readouterr().out
    print(f"{name} 05 graded in {time.monotonic() - start:.1f} s")
    assert "PASS" in out and "run on the CPU by the emulator" in out and "cannot run it" not in out


def _lab05_mistakes():
    from cudabook.attention.mistakes import MISTAKES as ATTENTION
    from cudabook.gemm.mistakes import ANY_MACHINE, MISTAKES as GEMM
    return [pytest.param(name, m, id=f"{name}-{m.what[:40]}") for name, table in (("gemm", GEMM),
                                                                                 ("attention", ATTENTION))
            for m in table if m.stage == "05_wgmma_tma" and not set(m.says) & set(ANY_MACHINE)]


@pytest.mark.parametrize("name, m", _lab05_mistakes())
def test_lab_05_planted_mistakes_fail_in_the_emulator(name, m, capsys):
    """Each of the lab's planted mistakes (cudabook/<track>/mistakes.py) that a run must show fails in the
    emulator, with the phrase its record expects (those the compiler's log shows fail before any run)."""
    if not track.get(name).unavailable(m.stage):
        pytest.skip("this machine runs the stage: tests/<track>/test_<track>_mistakes.py grades it")
    wrong = _mistakes_grading().wrong_attempt(name, m)
    assert not labs.grade(m.stage, wrong, track=name)
    out = capsys.readouterr().out
    assert "run on the CPU by the emulator" in out.replace("Run on", "run on"), out
    assert any(f in out for f in m.fails), out
    for s in m.says:
        assert any(a in out for a in (s if isinstance(s, tuple) else (s,))), (m.what, out)


def _gemm05_case(edits, landing, shape=(70, 72, 600)):
    """The whole GEMM 05 source with `edits`, on one case whose K tiles turn the TMA ring (K = 600: ten tiles of
    64 through four stages). Returns the verdict, or raises the emulator's error."""
    from cudabook import gemm
    from cudabook.gemm import inputs, problem
    from cudabook.gemm import s05_wgmma_tma as s05
    text = s05.source()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    a, b = inputs.random_problem(*shape)
    p = problem.upload(a, b)
    p.poison()
    with emulate.emulating(landing, timeout_s=30):
        s05.launch(p, kernel=text)
    return gemm.judge(p.result(), a, b)


def test_gemm_05_right_both_ways_when_its_ring_turns():
    for landing in ("lazy", "eager"):
        assert _gemm05_case([], landing).ok, landing


REFILL = "if (tid == 0 && kt + STAGES < k_tiles) load(kt + STAGES, s);"


def test_gemm_05_a_stage_refilled_before_the_wgmma_wait_is_reported():
    """The wait moved after the refill: with the copies landing at once the refill overwrites A and B under the
    wgmmas still in flight, and the emulator says so (landing late, the refill lands after the wait: right)."""
    edits = [("wgmma_wait<0>();", ""), (REFILL, REFILL + "\n    wgmma_wait<0>();")]
    with pytest.raises(emulate.EmulationError, match="changed between its issue and the wgmma_wait"):
        _gemm05_case(edits, "eager")


def test_gemm_05_wgmmas_issued_before_the_stage_arrived_are_reported():
    wait = "    mbar_wait(full + 8 * s, (kt / STAGES) & 1);\n"
    edits = [(wait, ""), ("    wgmma_commit();", wait + "    wgmma_commit();")]
    with pytest.raises(emulate.EmulationError, match=r"changed between its issue.*was 0xffff at the wgmma"):
        _gemm05_case(edits, "lazy")
