"""GEMM 01 accumulating in bf16: the running sum is rounded to bf16 after every multiply-add."""
from corpus.mutate import mutant
from cudabook.gemm.s01_naive import launch as _launch

BUG = "the sum is rounded to bf16 at every step instead of once at the end (bf16 accumulation)"
STAGE = "01_naive"
EXPECT = "rounding inside the loop"
CASE = (9, 16, 64)               # a long K: 64 roundings of the running sum, far beyond float32's bound

kernel = mutant("cudabook.gemm.s01_naive", "gemm_naive",
                [("acc += bf16_to_f32(a[m, k]) * bf16_to_f32(b[k, n])",
                  "acc = bf16_to_f32(f32_to_bf16(acc + bf16_to_f32(a[m, k]) * bf16_to_f32(b[k, n])))")])


def launch(p):
    _launch(p, kernel=kernel)
