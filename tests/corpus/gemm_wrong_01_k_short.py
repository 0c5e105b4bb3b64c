"""GEMM 01 with the loop over K one step short: the last term of every dot product is missing."""
from corpus.mutate import mutant
from cudabook.gemm.s01_naive import launch as _launch

BUG = "the loop over K stops one step early: every element of C misses its last term"
STAGE = "01_naive"
EXPECT = "sum over K"            # the checker's diagnosis: a term of the sum is missing

kernel = mutant("cudabook.gemm.s01_naive", "gemm_naive",
                [("for k in range(a.shape[1]):", "for k in range(a.shape[1] - 1):")])


def launch(p):
    _launch(p, kernel=kernel)
