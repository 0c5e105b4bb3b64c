"""Stage 05 (buffers="registers") whose fourth target of every group is never stored: its guard reads
i + 3 < 0 where i + 3 < n belongs (the output keeps its NaN poison there)."""
from corpus.mutate import mutant
from cudabook.resample.s05_double_buffered import launch as _launch

BUG = "the fourth target of every group is never stored (its guard is i + 3 < 0)"
SIZE = dict(B=2, S=19, T=45, D=16)
PARAMS = dict(threads=64, blocks=2)

kernel = mutant("cudabook.resample.s05_double_buffered", "resample_in_flight",
                [("ok and i + 3 < n", "ok and i + 3 < 0")])


def launch(p):
    _launch(p, kernel=kernel, **PARAMS)
