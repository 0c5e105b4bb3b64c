"""GEMM 03 with the row guard of the A loads removed: the last block of rows reads past the end of A."""
from corpus.mutate import mutant
from cudabook.gemm.s03_register_blocking import launch as _launch

BUG = "no row guard on the A loads: rows past M are read (past the end of A)"
STAGE = "03_register_blocking"
EXPECT = "out of bounds"
SIM_ONLY = ("on a GPU nothing checks the index: the kernel reads past the end of A, and may fault, which would "
            "leave the test process's CUDA context unusable. The simulator checks every index and says which")

kernel = mutant("cudabook.gemm.s03_register_blocking", "gemm_blocked",
                [("load_vector(ra, l, a, m0 + v // (BK // 8), k0 + (v % (BK // 8)) * 8, M, K, VEC)",
                  "load_vector(ra, l, a, m0 + v // (BK // 8), k0 + (v % (BK // 8)) * 8, m0 + v // (BK // 8) + 1, K, VEC)")])


def launch(p):
    _launch(p, kernel=kernel)
