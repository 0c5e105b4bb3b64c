"""GEMM 02 whose tile loop counts whole tiles only: the last, partial tile along K is skipped."""
from corpus.mutate import mutant
from cudabook.gemm.s02_smem_tiles import launch as _launch

BUG = "the tile loop rounds K down (K // TILE tiles): the last partial tile along K is never added"
STAGE = "02_smem_tiles"
EXPECT = "sum over K"

kernel = mutant("cudabook.gemm.s02_smem_tiles", "gemm_tiled",
                [("for k0 in range(0, K, TILE):", "for k0 in range(0, K - TILE + 1, TILE):")])


def launch(p):
    _launch(p, kernel=kernel)
