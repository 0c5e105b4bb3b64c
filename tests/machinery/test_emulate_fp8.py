"""The FP8 warpgroup MMA in the CPU emulator (cudabook/emulate/runtime.cpp, "warpgroup MMA": the e4m3 wgmma that
GEMM 08 uses): wgmma.mma_async.m64nNk32.f32.e4m3.e4m3 with A and B from shared memory, both K-major in 128-byte
swizzled rows, against hand-built images; the decode of every e4m3 code against ml_dtypes; the arithmetic an H100
was measured to do (each k32 step aligns the accumulator and its 32 products to the largest exponent among them,
a product's being its operands' exponents added, and keeps 13 bits below it, truncated toward zero; a sum grown
past it keeps 14 bits), against a NumPy model of it, and the model against every accumulator an H100 gave
tools/probe_fp8_sums.py (results/fp8_sums/); the asynchrony the
bf16 wgmma has (results landing at the wait that covers them, and what is reported); then GEMM 08 itself,
clusters.cu with FP8=1 through s08_fp8.launch, bit for bit against the NumPy model and judged by the grader.

The shared-memory images are built here from the layout (PTX ISA, "Shared Memory Matrix Layout": a K-major
operand with 128-byte swizzling is 8-row atoms of 128-byte rows, 16-byte chunk c of row r stored at chunk
c ^ (r % 8); for one-byte elements a core matrix is 8 rows x 16 elements), not from the emulator's code; they
are checked against the TMA unit's swizzle (cudabook.tma.smem_image), which is what the rung's copies write.
The N = 16 test kernel gives its immediates as kernel arguments, which the emulator takes and NVRTC would not."""
import ctypes
import pathlib
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest

from cudabook import SIMULATOR, emulate, nvrtc, tma

pytestmark = [pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="no host C++ compiler"),
              pytest.mark.skipif(not SIMULATOR, reason="the emulator runs where Numba runs in its simulator")]

E4M3 = ml_dtypes.float8_e4m3fn
ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "results" / "fp8_sums").glob("*.npz"))     # tools/probe_fp8_sums.py, one a GPU
RNG = np.random.default_rng(2029)
ROW = 128                     # bytes of K a shared-memory row holds: four k32 steps of one-byte elements
B_AT = 8192                   # where Bt starts, after A's 64 rows (as in the rung: A's box, then B's boxes)


def codes(values):
    """The e4m3 bytes of values that e4m3 holds exactly (asserted)."""
    q = np.asarray(values, np.float64).astype(E4M3)
    assert np.array_equal(q.astype(np.float64), np.asarray(values, np.float64), equal_nan=True)
    return q.view(np.uint8)


def value(code_bytes):
    return np.asarray(code_bytes, np.uint8).view(E4M3).astype(np.float64)


# ------------------------------------------------------------------------------------------ operand images
def swizzled_rows(rows):
    """rows [R, 128] bytes (R a multiple of 8) as a K-major, 128-byte swizzled operand: row r at r * 128, its
    16-byte chunk c at chunk c ^ (r % 8). The descriptor: SBO 1024 (the next 8 rows), LBO unused."""
    rows = np.asarray(rows, np.uint8)
    out = np.zeros(rows.size, np.uint8)
    for r in range(rows.shape[0]):
        for c in range(ROW // 16):
            at = r * ROW + 16 * (c ^ (r % 8))
            out[at:at + 16] = rows[r, 16 * c:16 * c + 16]
    return out


def image(a_codes, bt_codes):
    """The shared image of A [64, K <= 128] at 0 and Bt [N, K] (B stored transposed, K-major) at B_AT, K padded
    with zeros to the 128-byte row; Bt in boxes of 64 rows, as the rung's TMA loads them."""
    def rows(x, n):
        r = np.zeros((n, ROW), np.uint8)
        r[:x.shape[0], :x.shape[1]] = x
        return r
    a_rows, bt_rows = rows(a_codes, 64), rows(bt_codes, max(8, -(-bt_codes.shape[0] // 8) * 8))
    img = np.zeros(B_AT + bt_rows.size, np.uint8)
    img[:B_AT] = swizzled_rows(a_rows)
    for j in range(0, bt_rows.shape[0], 64):
        box = bt_rows[j:j + 64]
        img[B_AT + j * ROW:B_AT + (j + box.shape[0]) * ROW] = swizzled_rows(box)
    return img


def test_the_hand_built_image_is_what_tma_writes():
    a = RNG.integers(0, 256, size=(64, ROW), dtype=np.uint8)
    assert np.array_equal(swizzled_rows(a), tma.smem_image(a, "128B"))


# ------------------------------------------------------------------------------------------ the test kernel
KERNEL = r"""#include "hopper.cuh"
// D[64 x N] (+)= A[64 x 32 steps] * B[32 steps x N] in `steps` k32 steps on the same accumulators (A at the
// 1024-aligned base, Bt at base + 8192, each step 32 bytes further along the 128-byte rows, as GEMM 08 does),
// starting from d = init; scale-d of the first step sd. N = 16 with the immediates sa, sb; 128 and 256 through
// hopper.cuh's WgmmaFp8<N>. mode bits: 4 skip the fence, 8 write an accumulator between issue and wait, 16
// overwrite A's byte 1 (row 0, k 1) between issue and wait, 64 no wait at all, 128 store the accumulators
// before the wait too (out[128 * N / 2 + ...]).
__device__ void mma16(float (&d)[8], unsigned long long da, unsigned long long db, int sd, int sa, int sb) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %10, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, "
               "%11, %12; }"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(da), "l"(db), "r"(sd), "n"(sa), "n"(sb));
}
__device__ void mma(float (&d)[8], unsigned long long da, unsigned long long db, int sd, int sa, int sb) {
  mma16(d, da, db, sd, sa, sb);
}
__device__ void mma(float (&d)[64], unsigned long long da, unsigned long long db, int sd, int, int) {
  WgmmaFp8<128>::mma(d, da, db, sd);
}
__device__ void mma(float (&d)[128], unsigned long long da, unsigned long long db, int sd, int, int) {
  WgmmaFp8<256>::mma(d, da, db, sd);
}
template <int N> __device__ void run(uint32_t base, uint8_t* s, int steps, float init, int sd, int sa, int sb,
                                     int mode, float* out) {
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = init;
  if (!(mode & 4)) wgmma_fence();
  for (int k = 0; k < steps; ++k)
    mma(d, smem_desc(base + 32 * k, 16, 1024), smem_desc(base + 8192 + 32 * k, 16, 1024), k == 0 ? sd : 1, sa, sb);
  if (mode & 8) d[3] = 7.0f;
  if ((mode & 16) && threadIdx.x == 0) s[1] ^= 0x40;
  wgmma_commit();
  if (mode & 64) return;
  if (mode & 128) for (int i = 0; i < N / 2; ++i) out[128 * (N / 2) + threadIdx.x * (N / 2) + i] = d[i];
  wgmma_wait<0>();
  for (int i = 0; i < N / 2; ++i) out[threadIdx.x * (N / 2) + i] = d[i];
}
extern "C" __global__ void k(const uint8_t* image, int nbytes, int n, int steps, float init, int sd, int sa, int sb,
                             int mode, float* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
  uint8_t* s = smem + (base - smem_u32(smem));
  for (int i = threadIdx.x; i < nbytes; i += blockDim.x) s[i] = image[i];
  __syncthreads();
  if (n == 16) run<16>(base, s, steps, init, sd, sa, sb, mode, out);
  if (n == 128) run<128>(base, s, steps, init, sd, sa, sb, mode, out);
  if (n == 256) run<256>(base, s, steps, init, sd, sa, sb, mode, out);
}
"""


def run(a_codes, bt_codes, *, steps=None, init=0.0, sd=1, sa=1, sb=1, mode=0, landing="lazy", src=KERNEL):
    """Launch the test kernel on A [64, K] and Bt [N, K] (e4m3 bytes, K <= 128); returns D [64, N] (float32), and
    with mode 128 also what the accumulators held before the wait."""
    n = bt_codes.shape[0]
    steps = -(-a_codes.shape[1] // 32) if steps is None else steps
    img = image(a_codes, bt_codes)
    out = np.full(2 * 128 * n // 2, -12345.0, np.float32)
    args = [img.ctypes.data, img.size, n, steps, init, sd, sa, sb, mode, out.ctypes.data]
    types = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float] + [ctypes.c_int] * 4 + \
        [ctypes.c_void_p]
    with emulate.emulating(landing, timeout_s=30):
        kern = nvrtc.load(nvrtc.compile(src, name="wgmma_fp8_test.cu"), "k")
        kern.launch(1, 128, args, types, shared=1024 + img.size)
    regs = out.reshape(2, 128, n // 2)
    frags = [fragment(r, n) for r in regs]
    return frags if mode & 128 else frags[0]


def fragment(regs, n):
    """D [64 x N] from the threads' registers: the PTX ISA's m64nNk32 D fragment, the same as m64nNk16's."""
    from cudabook.gemm.wgmma import from_registers
    return from_registers(regs, n, np.float32)


# ------------------------------------------------------------------------------------------ the arithmetic's model
def toward_zero_f32(x):
    """float64 -> float32, rounded toward zero."""
    f = x.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(x)
    f[over] = np.nextafter(f[over], np.float32(0))
    return f


def exponent_field(x):
    """The exponent an e4m3 element brings to a product as the FP8 tensor cores align it: a normal value's
    floor(log2 |x|), -6 for a subnormal one (its exponent field's)."""
    return np.where(np.abs(x) < 2.0 ** -6, -6, np.frexp(x)[1] - 1)


def model(a, b, steps, init=0.0, sd=1):
    """The H100's e4m3 wgmma, in NumPy: a [M, 32 steps] and b [32 steps, N] float64 (e4m3 values), the float32
    accumulator through `steps` k32 steps. Each step: every nonzero product brings the exponent e(a) + e(b) of its
    operands (its significand, in [1, 4), is not renormalised) and the accumulator its own; E is the largest; the
    accumulator and the 32 products each truncated toward zero to a multiple of 2^(E - 13) and summed exactly; the
    sum truncated toward zero to 2^(max(E, e(sum)) - 13) (it keeps 14 bits where it grew past 2^E) and stored as
    float32 toward zero. sd = 0: the first step starts from 0 instead of init. Measured: tools/probe_fp8_sums.py,
    replayed by test_the_recorded_accumulators_of_an_h100_are_the_models_bit_for_bit."""
    M, N = a.shape[0], b.shape[1]
    acc = np.full((M, N), init if sd else 0.0, np.float32)
    never = np.iinfo(np.int32).min
    for s in range(steps):
        sa, sb = a[:, 32 * s:32 * s + 32], b[32 * s:32 * s + 32]
        prods = sa[:, :, None] * sb[None, :, :]                                           # exact
        exps = np.where(prods != 0, exponent_field(sa)[:, :, None] + exponent_field(sb)[None, :, :], never)
        acc64 = acc.astype(np.float64)
        top = np.maximum(exps.max(axis=1), np.where(acc64 != 0, np.frexp(acc64)[1] - 1, never))
        quantum = np.ldexp(1.0, np.where(top > never, top - 13, 0))
        total = (np.trunc(prods / quantum[:, None, :]) * quantum[:, None, :]).sum(axis=1) \
            + np.trunc(acc64 / quantum) * quantum
        grown = (total != 0) & (np.frexp(total)[1] - 1 > top)
        kept = np.ldexp(1.0, np.frexp(total)[1] - 1 - 13)
        total = np.where(grown, np.trunc(total / kept) * kept, total)
        acc = toward_zero_f32(total)
    return acc


def test_the_model_is_the_measured_behaviour():
    """The model itself on the H100 probes (the brief's measurements): 2^8 - 2^8 + q in one step keeps q = 2^-5
    and loses 2^-6; the same spread over steps 1, 2 and 4 loses 2^-6 too."""
    def one_step(q):
        a, b = np.zeros((1, 32)), np.zeros((32, 1))
        a[0, :3], b[:3, 0] = (16, 16, q), (16, -16, 1)
        return model(a, b, 1)[0, 0]
    assert one_step(2.0 ** -5) == 2.0 ** -5 and one_step(2.0 ** -6) == 0
    a, b = np.zeros((1, 128)), np.zeros((128, 1))
    a[0, [0, 32, 96]], b[[0, 32, 96], 0] = (16, 2.0 ** -6, 16), (16, 1, -16)
    assert model(a, b, 4)[0, 0] == 0


# ------------------------------------------------------------------------------------------ decode, layout
def test_every_e4m3_code_decodes_as_ml_dtypes_does():
    """A one-hot A (row m: 1.0 at k = m % 32) picks row m % 32 of B, one step with scale-d 0: D[m, n] is B's
    element exactly (a single nonzero term loses nothing). Columns 0..7 of B hold codes 32 n + k (the two NaN
    codes, 0x7F and 0xFF, replaced by 0 there), column 8 has 0x7F at k = 0 and column 9 0xFF at k = 1: a NaN
    times the one-hot's zeros is NaN, so those columns are NaN in every row."""
    a = np.zeros((64, 32), np.uint8)
    a[np.arange(64), np.arange(64) % 32] = codes(1.0)
    b = np.zeros((32, 16), np.uint8)
    for n in range(8):
        b[:, n] = 32 * n + np.arange(32)
    b[(b & 0x7F) == 0x7F] = 0
    b[0, 8], b[1, 9] = 0x7F, 0xFF
    got = run(a, np.ascontiguousarray(b.T), init=5.0, sd=0)
    want = value(a) @ value(b)
    assert np.array_equal(got, want, equal_nan=True)
    for code in range(256):                       # each code, where it landed: the value ml_dtypes gives it
        want = np.uint8(code).view(E4M3).astype(np.float64)
        if (code & 0x7F) == 0x7F:
            assert np.isnan(want) and np.isnan(got[:, 8 + (code >> 7)]).all()
        else:
            assert got[code % 32, code // 32] == want and got[code % 32 + 32, code // 32] == want, hex(code)


@pytest.mark.parametrize("n", [16, 128, 256])
def test_the_fragments_and_layout_are_the_ptx_isas(n):
    """A [64 x 128] and B [128 x N] (Bt [N x 128] stored) in 128-byte swizzled rows, four k32 steps 32 bytes apart,
    as GEMM 08 issues them (N = 128 and 256 through hopper.cuh's WgmmaFp8<N>). Values: multiples of 0.5 up to 4,
    so every partial sum has fewer than 13 bits below its leading one and the product is exact."""
    a = RNG.integers(-8, 9, size=(64, ROW)) / 2.0
    b = RNG.integers(-8, 9, size=(ROW, n)) / 2.0
    for landing in ("lazy", "eager"):
        got = run(codes(a), np.ascontiguousarray(codes(b).T), init=0.0, landing=landing)
        assert np.array_equal(got, a @ b), (n, landing)


def test_scale_d_and_the_negating_immediates():
    a = RNG.integers(-8, 9, size=(64, 64)) / 2.0
    b = RNG.integers(-8, 9, size=(64, 16)) / 2.0
    ca, cbt = codes(a), np.ascontiguousarray(codes(b).T)
    assert np.array_equal(run(ca, cbt, init=3.0, sd=0, sa=-1), -(a @ b))
    assert np.array_equal(run(ca, cbt, init=3.0, sd=1, sa=-1, sb=-1), a @ b + 3.0)
    assert np.array_equal(run(ca, cbt, init=3.0, sd=1, sb=-1), 3.0 - a @ b)


# ------------------------------------------------------------------------------------------ 13 bits a step
def probe(terms_by_step, init=0.0):
    """D[0, 0]'s value after k32 steps whose products are given as [(a, b), ...] per step (the other rows and
    columns the same): A [64, 32 steps], Bt [16, 32 steps]."""
    steps = len(terms_by_step)
    a, b = np.zeros((64, 32 * steps)), np.zeros((32 * steps, 16))
    for s, terms in enumerate(terms_by_step):
        for i, (x, y) in enumerate(terms):
            a[:, 32 * s + i], b[32 * s + i, :] = x, y
    got = run(codes(a), np.ascontiguousarray(codes(b).T), init=init)
    assert (got == got[0, 0]).all()
    assert np.array_equal(got, model(a, b, steps, init=init))
    return float(got[0, 0])


@pytest.mark.parametrize("q, kept", [(2.0 ** -5, 2.0 ** -5), (2.0 ** -6, 0.0),
                                     (1.5 * 2.0 ** -5, 2.0 ** -5),      # truncated, not rounded (would be 2^-4)
                                     (-1.5 * 2.0 ** -5, -2.0 ** -5)],   # toward zero, not down (would be -2^-4)
                         ids=["2^-5 kept", "2^-6 lost", "1.5 quanta -> 1", "-1.5 quanta -> -1"])
def test_one_step_keeps_13_bits_below_its_largest_term(q, kept):
    """+2^8, -2^8 and q in one k32 step: every term is cut to multiples of 2^(8 - 13) = 2^-5 before the sum."""
    assert probe([[(16.0, 16.0), (16.0, -16.0), (q / 0.125, 0.125)]]) == kept


@pytest.mark.parametrize("q, kept", [(2.0 ** -5, 2.0 ** -5), (2.0 ** -6, 0.0)])
def test_the_accumulator_is_aligned_with_each_steps_products(q, kept):
    """+2^8 in step 1, q in step 2, nothing in step 3, -2^8 in step 4: step 2 aligns q to the accumulator's 2^8."""
    assert probe([[(16.0, 16.0)], [(q / 0.125, 0.125)], [], [(16.0, -16.0)]]) == kept
    assert probe([[(q / 0.125, 0.125)]], init=256.0) == 256.0 + kept


def test_random_steps_match_the_model_bit_for_bit():
    """Codes of every exponent (no NaN), four steps from a nonzero start: the emulator and the model agree on every
    bit, and the model is not float32 arithmetic (it differs from the float64 product rounded once)."""
    pool = np.array([c for c in range(256) if (c & 0x7F) != 0x7F], np.uint8)
    ca = RNG.choice(pool, size=(64, ROW))
    cbt = RNG.choice(pool, size=(16, ROW))
    a, b = value(ca), value(cbt).T
    got = run(ca, cbt, init=0.75)
    want = model(a, b, 4, init=0.75)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(want, (a @ b + 0.75).astype(np.float32))


def test_a_sum_grown_past_its_largest_term_keeps_14_bits():
    """Sixteen products of 1 and one of 2^-13 in a step: E = 0 keeps 2^-13, but the sum, 16 + 2^-13, has grown to
    2^4 and keeps its bits down to 2^(4 - 13) only: 16."""
    assert probe([[(1.0, 1.0)] * 16 + [(2.0 ** -6, 2.0 ** -7)]]) == 16.0


def test_a_product_brings_its_operands_exponents_not_its_own():
    """1.875 x 1.875 = 3.515625 has exponent 1, but its operands bring 0 + 0: with it and its negative, q = 2^-13
    (2^(0 - 13)) survives the step; aligned to the product's own exponent it would be lost."""
    assert probe([[(1.875, 1.875), (1.875, -1.875), (2.0 ** -6, 2.0 ** -7)]]) == 2.0 ** -13


def _probe_tool():
    sys.path.insert(0, str(ROOT))
    from tools import probe_fp8_sums
    return probe_fp8_sums


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_the_accumulators_recorded_on_a_gpu_are_the_models_bit_for_bit(path):
    """Every accumulator tools/probe_fp8_sums.py read back from the GPU (random steps of narrow and wide exponents,
    subnormals, cancellation, GEMM 08's own quantised inputs; 1 to 19 steps): the model gives the same bits."""
    draws = list(_probe_tool().recorded(path))
    assert len(draws) >= 10
    for label, ca, cbt, init, steps, measured in draws:
        want = model(value(ca), value(cbt).T, steps, init=init)
        assert np.array_equal(want.view(np.uint32), measured.view(np.uint32)), \
            f"{label}: {(want != measured).sum()} of {want.size} accumulators differ"


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_the_emulator_gives_the_accumulators_recorded_on_a_gpu(path):
    """The probe's own kernel in the emulator, on three recorded draws (one step, wide exponents, a cancelling
    accumulator over four steps): every bit as the GPU gave it."""
    tool = _probe_tool()
    draws = list(tool.recorded(path))
    for label, ca, cbt, init, steps, measured in (draws[1], draws[7], draws[-1]):
        with emulate.emulating("lazy", timeout_s=60):
            got = tool.accumulators(ca, cbt, init, steps)
        assert np.array_equal(got.view(np.uint32), measured.view(np.uint32)), \
            f"{label}: {(got != measured).sum()} of {got.size} accumulators differ"


# ------------------------------------------------------------------------------------------ asynchrony, refusals
def _operands():
    a = RNG.integers(-8, 9, size=(64, 64)) / 2.0
    b = RNG.integers(-8, 9, size=(64, 16)) / 2.0
    return a, b, codes(a), np.ascontiguousarray(codes(b).T)


def test_the_results_land_at_the_wait_that_covers_them():
    a, b, ca, cbt = _operands()
    for landing in ("lazy", "eager"):
        got, before = run(ca, cbt, mode=128, landing=landing)
        assert np.array_equal(got, a @ b) and np.isnan(before).all(), landing


@pytest.mark.parametrize("mode, match", [
    (4, "without a wgmma.fence before it"),
    (8, "accumulators of a wgmma were read or written before the wgmma_wait that covers them"),
    (16, r"shared memory a wgmma reads changed between its issue and the wgmma_wait.*A\[m 0\]\[k 1\] at shared "
         r"address 0x[0-9a-f]+ was 0x[0-9a-f]{2} at the wgmma"),
    (64, "ended with 2 wgmma.mma_async never waited for"),
], ids=["no fence", "accumulator written in flight", "operand overwritten in flight", "never waited for"])
def test_what_the_bf16_wgmma_reports_the_fp8_one_reports(mode, match):
    _, _, ca, cbt = _operands()
    for landing in ("lazy", "eager"):
        with pytest.raises(emulate.EmulationError, match=match):
            run(ca, cbt, mode=mode, landing=landing)


@pytest.mark.parametrize("old, new, error, match", [
    ("m64n16k32.f32.e4m3.e4m3", "m64n16k32.f32.e5m2.e4m3", emulate.CannotEmulate,
     "only m64nNk16 with bf16 inputs and m64nNk32 with e4m3"),
    ("%11, %12; }", "%11, %12, 0, 0; }", emulate.EmulationError, "no transpose immediates: e4m3 operands are K-major"),
    ("%7}, %8, %9,", "%7}, {%8, %8, %8, %8}, %9,", emulate.CannotEmulate, "with A from registers"),
    ("m64n16k32.f32.e4m3.e4m3", "m64n16k16.f32.e4m3.e4m3", emulate.EmulationError, r"not a wgmma shape \(m64nNk32"),
], ids=["e5m2", "transpose immediates", "A from registers", "k16 shape"])
def test_forms_not_emulated_or_malformed_are_named(old, new, error, match):
    assert KERNEL.count(old) == 1, old
    _, _, ca, cbt = _operands()
    with pytest.raises(error, match=match):
        run(ca, cbt, src=KERNEL.replace(old, new))


# ------------------------------------------------------------------------------------------ GEMM 08 on a CPU
def rung_model(a_bits, b_bits, s08):
    """C as rung 08 computes it, in NumPy: the quantised e4m3 inputs (s08.quantize), K padded with zeros to whole
    128-wide k-tiles (the TMA boxes past K are zeros), each k32 step as `model`, the float32 sums times the two
    scales, rounded to bf16."""
    from cudabook.gemm.inputs import BF16
    qa, sa = s08.quantize(np.asarray(a_bits).view(BF16))
    qb, sb = s08.quantize(np.asarray(b_bits).view(BF16))
    M, K = qa.shape
    kp = -(-K // s08.ALIGN) * s08.ALIGN                    # K as the kernel gets it (16-byte rows)
    steps = 4 * -(-kp // ROW)                                # four k32 steps a 128-wide k-tile
    a = np.zeros((M, 32 * steps))
    b = np.zeros((32 * steps, qb.shape[1]))
    a[:, :K], b[:K] = qa.astype(np.float64), qb.astype(np.float64)
    acc = model(a, b, steps)
    return (acc * np.float32(sa * sb)).astype(BF16).view(np.uint16)


@pytest.mark.parametrize("params", [dict(), dict(bn=128, consumers=1, cluster=1)],
                         ids=["defaults (BN 256, cluster 2)", "BN 128, one consumer, no cluster"])
def test_gemm_08_in_the_emulator_is_the_model_bit_for_bit(params):
    """The rung's kernel (WgmmaFp8<256>, or <128>), its TMA ring, scales and bf16 epilogue, both landings: C is the
    NumPy model's, every bit. The checker, on the inputs the rung computes with (s08.judged_on), accepts the
    correctly rounded product; the 13-bit sums move some elements of C away from it (by up to about 2^-13 of the
    largest term of a step: several bf16 steps where the sum cancels), and those are the only ones the checker may
    reject (with gemm.judge's float32 tolerance a few of them are); GEMM 08's own judge, which allows for the
    FP8 tensor cores' sums, accepts them all."""
    from cudabook import gemm
    from cudabook.gemm import inputs, problem
    from cudabook.gemm import s08_fp8 as s08
    from cudabook.gemm.inputs import BF16, reference_with_bound
    from cudabook.verdict import outside
    a, b = inputs.random_problem(130, 200, 200)
    want = rung_model(a, b, s08)
    (qa, sa), (qb, sb) = s08.quantize(a.view(BF16)), s08.quantize(b.view(BF16))
    exact = ((qa.astype(np.float64) @ qb.astype(np.float64)).astype(np.float32) * np.float32(sa * sb)).astype(BF16)
    judged = s08.judged_on(a, b)
    assert gemm.judge(exact, *judged).ok
    ref, bound = reference_with_bound(*judged)
    for landing in ("lazy", "eager"):
        p = problem.upload(a, b)
        p.poison()
        with emulate.emulating(landing, timeout_s=60):
            s08.launch(p, kernel=s08.source(), **params)
        got = np.asarray(p.result())
        assert np.array_equal(got.view(np.uint16), want), landing
        moved = got.view(np.uint16) != exact.view(np.uint16)
        rejected = outside(got.astype(np.float64), ref, bound)
        assert not (rejected & ~moved).any(), landing
        assert s08.judge(got, a, b).ok, landing          # 08's own tolerance allows for the 13-bit sums
