"""Stage 05 (buffers="registers") that hands every target of a group the first target's weight: a shuffle
from the wrong lane."""
from corpus.mutate import mutant
from cudabook.resample.s05_double_buffered import launch as _launch

BUG = "w1 shuffled from lane 0, not lane 1: the group's second target is interpolated with the first one's weight"
SIZE = dict(B=2, S=19, T=45, D=16)
PARAMS = dict(threads=64, blocks=2)

kernel = mutant("cudabook.resample.s05_double_buffered", "resample_in_flight",
                [("w1 = cuda.shfl_sync(0xFFFFFFFF, w, 1)", "w1 = cuda.shfl_sync(0xFFFFFFFF, w, 0)")])


def launch(p):
    _launch(p, kernel=kernel, **PARAMS)
