"""Measure how this GPU's FP8 tensor cores sum: wgmma.mma_async m64n128k32 e4m3 (the instruction GEMM 08 uses) on
random operands, the float32 accumulators read back exactly, written with the operands to an .npz that the CPU
tests replay through the emulator's model (tests/machinery/test_emulate_fp8.py) bit for bit.

    python tools/probe_fp8_sums.py OUT.npz            (on a Hopper GPU; a few seconds)

Each launch is one warpgroup: A [64, 32 s] and Bt [128, 32 s] e4m3 (B stored transposed, as GEMM 08 keeps it),
s k32 steps on the same accumulators starting from `init` (random float32 values), 128-byte swizzled rows of four
steps each, copied into shared memory a k-tile at a time (fence.proxy.async before the wgmma reads them). The draws
mix narrow and wide exponent ranges, signs that cancel, zeros and GEMM 08's own quantised inputs, so the
alignment, the truncation and the accumulator's part in each step all show."""
from __future__ import annotations

import ctypes
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNEL = r"""#include "hopper.cuh"
extern "C" __global__ void probe(const unsigned char* tiles, int ktiles, int steps, const float* init, float* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
  unsigned char* s = smem + (base - smem_u32(smem));
  float d[64];
  for (int i = 0; i < 64; ++i) d[i] = init[threadIdx.x * 64 + i];
  for (int t = 0; t < ktiles; ++t) {
    for (int i = threadIdx.x; i < 24576; i += blockDim.x) s[i] = tiles[t * 24576 + i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    wgmma_fence();
    for (int k = 0; k < 4 && 4 * t + k < steps; ++k)
      WgmmaFp8<128>::mma(d, smem_desc(base + 32 * k, 16, 1024), smem_desc(base + 8192 + 32 * k, 16, 1024), 1);
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();
  }
  for (int i = 0; i < 64; ++i) out[threadIdx.x * 64 + i] = d[i];
}
"""


def tiles_image(a_codes, bt_codes):
    """k-tiles of 128 bytes of K: A's 64 rows then Bt's two boxes of 64 rows, each 128-byte swizzled (TMA's
    layout), 24576 bytes a tile."""
    from cudabook import tma
    k = a_codes.shape[1]
    ktiles = -(-k // 128)
    out = []
    for t in range(ktiles):
        def rows(x):
            r = np.zeros((x.shape[0], 128), np.uint8)
            part = x[:, 128 * t:128 * t + 128]
            r[:, :part.shape[1]] = part
            return r
        a, bt = rows(a_codes), rows(bt_codes)
        out += [tma.smem_image(a, "128B"), tma.smem_image(bt[:64], "128B"), tma.smem_image(bt[64:], "128B")]
    return np.concatenate(out), ktiles


def draws(rng):
    """(label, A [64, K] values, Bt [128, K] values, init [64, 128], steps): e4m3 values as float64."""
    import ml_dtypes
    E4M3 = ml_dtypes.float8_e4m3fn

    def e4m3(x):
        return np.clip(np.asarray(x, np.float64), -448, 448).astype(E4M3).astype(np.float64)

    def codes_in(lo, hi, shape):          # random e4m3 values with exponents in [lo, hi], random signs, some zeros
        e = rng.integers(lo, hi + 1, size=shape)
        m = rng.integers(8, 16, size=shape) / 8.0
        v = np.ldexp(m, e) * rng.choice([-1.0, 1.0], size=shape)
        v[rng.random(shape) < 0.1] = 0.0
        return e4m3(v)

    for steps in (1, 1, 2, 4, 4, 8, 19):
        k = 32 * steps
        yield f"narrow exponents, {steps} steps", codes_in(-2, 2, (64, k)), codes_in(-2, 2, (128, k)), \
            rng.normal(0, 8, (64, 128)).astype(np.float32), steps
        yield f"wide exponents, {steps} steps", codes_in(-8, 8, (64, k)), codes_in(-8, 8, (128, k)), \
            rng.normal(0, 1, (64, 128)).astype(np.float32) * np.float32(2.0) ** rng.integers(-12, 12, (64, 128)), \
            steps
    from cudabook.gemm import inputs
    from cudabook.gemm import s08_fp8 as s08
    for steps in (4, 19):
        a, b = inputs.random_problem(64, 128, 32 * steps, rng=rng)
        (qa, _), (qb, _) = s08.quantize(a), s08.quantize(b)
        yield f"GEMM 08's quantised inputs, {steps} steps", qa.astype(np.float64), qb.astype(np.float64).T.copy(), \
            np.zeros((64, 128), np.float32), steps
    # cancellation: the accumulator nearly cancels the step's products
    for steps in (1, 4):
        a, bt = codes_in(-1, 3, (64, 32 * steps)), codes_in(-1, 3, (128, 32 * steps))
        exact = a @ bt.T
        yield f"cancelling accumulator, {steps} steps", a, bt, (-exact + rng.normal(0, 0.01, exact.shape)).astype(
            np.float32), steps


def accumulators(a_codes, bt_codes, init, steps):
    """D [64, 128] float32 after `steps` k32 steps of wgmma m64n128k32 e4m3 from D = init, A [64, 32 steps] and
    Bt [128, 32 steps] given as e4m3 bytes: on the GPU, or in the CPU emulator inside cudabook.emulate.emulating()
    (the emulator takes host addresses)."""
    from cudabook import emulate, nvrtc
    from cudabook.gemm.wgmma import accumulator_positions, from_registers
    kernel = nvrtc.load(nvrtc.compile(KERNEL, arch="sm_90a", name="probe_fp8_sums.cu"), "probe")
    rows, cols = accumulator_positions(128)
    img, ktiles = tiles_image(a_codes, bt_codes)
    regs = np.ascontiguousarray(np.asarray(init, np.float32)[rows, cols]).ravel()
    out = np.full(128 * 64, np.nan, np.float32)
    types = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    if emulate.active():
        kernel.launch(1, 128, [img.ctypes.data, ktiles, steps, regs.ctypes.data, out.ctypes.data], types,
                      shared=1024 + 24576)
    else:
        from numba import cuda
        d_img, d_init, d_out = cuda.to_device(img), cuda.to_device(regs), cuda.to_device(out)
        kernel.launch(1, 128, [d_img.device_ctypes_pointer.value, ktiles, steps, d_init.device_ctypes_pointer.value,
                               d_out.device_ctypes_pointer.value], types, shared=1024 + 24576)
        cuda.synchronize()
        out = d_out.copy_to_host()
    return from_registers(out, 128)


def recorded(path):
    """The draws an .npz written by this tool holds: (label, A bytes, Bt bytes, init, steps, D measured)."""
    data = np.load(path)
    n = 0
    while f"{n}_a" in data:
        yield (str(data[f"{n}_label"]), data[f"{n}_a"], data[f"{n}_bt"], data[f"{n}_init"], int(data[f"{n}_steps"]),
               data[f"{n}_d"])
        n += 1


def main(argv):
    import ml_dtypes

    from cudabook import device
    if len(argv) != 1:
        print(__doc__)
        return 2
    rng = np.random.default_rng(20261127)
    saved = {"gpu": np.str_(device.gpu().name)}
    for n, (label, a, bt, init, steps) in enumerate(draws(rng)):
        a_codes = a.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        bt_codes = bt.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        out = accumulators(a_codes, bt_codes, init, steps)
        saved.update({f"{n}_a": a_codes, f"{n}_bt": bt_codes, f"{n}_init": init, f"{n}_d": out,
                      f"{n}_steps": np.int64(steps), f"{n}_label": np.str_(label)})
        print(f"{n:2d} {label}: {np.isfinite(out).all()}")
    np.savez_compressed(argv[0], **saved)
    print(f"wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
