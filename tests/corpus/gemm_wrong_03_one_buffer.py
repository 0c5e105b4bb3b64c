"""GEMM 03 with one shared buffer instead of two, and still one barrier per tile: a race."""
from corpus.mutate import mutant
from cudabook.gemm.s03_register_blocking import launch as _launch

BUG = ("one shared buffer with one barrier a tile: a thread stores tile t while others still compute on tile "
       "t - 1 in the same buffer (a race)")
STAGE = "03_register_blocking"
EXPECT = "race"

kernel = mutant("cudabook.gemm.s03_register_blocking", "gemm_blocked",
                [("s = (t - 1) % 2", "s = 0"), ("s = t % 2", "s = 0")])


def launch(p):
    _launch(p, kernel=kernel)
