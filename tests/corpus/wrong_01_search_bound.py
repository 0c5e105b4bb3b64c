from corpus.mutate import mutant
from cudabook.resample.s01_naive import launch as _launch

BUG = "binary search upper bound S-2 instead of S-1: the last source interval is never found"

find_interval = mutant("cudabook.resample.s01_naive", "find_interval", [("hi = times.shape[1] - 1", "hi = times.shape[1] - 2")])
kernel = mutant("cudabook.resample.s01_naive", "resample_naive", find_interval=find_interval)


def launch(p):
    _launch(p, kernel=kernel)
