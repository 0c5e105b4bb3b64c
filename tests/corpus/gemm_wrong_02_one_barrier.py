"""GEMM 02 without its second barrier: a fast thread loads the next tile over the one slower threads still read."""
from corpus.mutate import mutant
from cudabook.gemm.s02_smem_tiles import launch as _launch

BUG = "no barrier after the multiply-adds: the next tile overwrites shared memory that others still read (a race)"
STAGE = "02_smem_tiles"
EXPECT = "race"
SIM_ONLY = ("on a GPU the race shows only when one warp gets a whole tile ahead of another, which is rare at "
            "one tile per block: the simulator, which runs thread after thread, shows it every time")

kernel = mutant("cudabook.gemm.s02_smem_tiles", "gemm_tiled", [(
    "            acc += As[ty, k] * Bs[k, tx]\n        cuda.syncthreads()",
    "            acc += As[ty, k] * Bs[k, tx]")])


def launch(p):
    _launch(p, kernel=kernel)
