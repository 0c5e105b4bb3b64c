from corpus.mutate import mutant
from cudabook.resample.s01_naive import launch as _launch

BUG = "bound check `t >= T - 1`: the last target of every row is never written"

kernel = mutant("cudabook.resample.s01_naive", "resample_naive", [("if t >= targets.shape[1]:", "if t >= targets.shape[1] - 1:")])


def launch(p):
    _launch(p, kernel=kernel)
