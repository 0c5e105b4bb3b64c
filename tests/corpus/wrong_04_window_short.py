"""Stage 04 with the window one row short: fill_window is asked for one row fewer than the window spans, so a
target in the run's last interval reads a stale row (and a stale time)."""
from corpus.mutate import mutant
from cudabook.resample.s04_smem_windows import launch as _launch

BUG = "window bound off by one: the last row of the window (the upper row of the last interval) is not loaded"
SIZE = dict(B=2, S=19, T=45, D=16)
PARAMS = dict(threads=64, targets_per_block=8, window_rows=12, chunk_cols=16)

kernel = mutant("cudabook.resample.s04_smem_windows", "resample_windows", [("b, row0, span, c0, cw, vec, tid, nthr)",
                                              "b, row0, span - 1, c0, cw, vec, tid, nthr)")])


def launch(p):
    _launch(p, kernel=kernel, **PARAMS)
