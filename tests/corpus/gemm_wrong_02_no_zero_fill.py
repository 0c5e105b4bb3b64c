"""GEMM 02 without the zero fill: past the edges of A and B the tiles keep what the previous tile left there."""
from corpus.mutate import mutant
from cudabook.gemm.s02_smem_tiles import launch as _launch

BUG = "no zero fill past the edges: the last K tile multiplies stale values left by the previous tile"
STAGE = "02_smem_tiles"
EXPECT = "every K tile is loaded"

kernel = mutant("cudabook.gemm.s02_smem_tiles", "gemm_tiled", [
    ("            a_val = bf16_to_f32(a[m, k0 + tx])\n        As[ty, tx] = a_val",
     "            As[ty, tx] = bf16_to_f32(a[m, k0 + tx])"),
    ("            b_val = bf16_to_f32(b[k0 + ty, n])\n        Bs[ty, tx] = b_val",
     "            Bs[ty, tx] = bf16_to_f32(b[k0 + ty, n])"),
])


def launch(p):
    _launch(p, kernel=kernel)
