"""GEMM 03 with the number of K tiles rounded down: the last, partial tile along K is never computed."""
from corpus.mutate import mutant
from cudabook.gemm.s03_register_blocking import launch as _launch

BUG = "n_tiles = K // BK: the last partial tile along K is loaded by nobody and never added"
STAGE = "03_register_blocking"
EXPECT = "sum over K"

kernel = mutant("cudabook.gemm.s03_register_blocking", "gemm_blocked",
                [("n_tiles = (K + BK - 1) // BK", "n_tiles = K // BK")])


def launch(p):
    _launch(p, kernel=kernel)
