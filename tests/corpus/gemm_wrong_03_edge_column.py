"""GEMM 03 whose ragged-edge store tests the pair, not the element: an odd N's last column is never written."""
from corpus.mutate import mutant
from cudabook.gemm.s03_register_blocking import launch as _launch

BUG = "the edge store writes a column only when its whole pair fits: the last column of an odd N stays unwritten"
STAGE = "03_register_blocking"
EXPECT = "never written"

kernel = mutant("cudabook.gemm.s03_register_blocking", "gemm_blocked",
                [("                    if col < N:\n", "                    if col + 1 < N:\n")])


def launch(p):
    _launch(p, kernel=kernel)
