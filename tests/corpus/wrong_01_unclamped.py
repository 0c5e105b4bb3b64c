from corpus.mutate import mutant
from cudabook.resample.s01_naive import launch as _launch

BUG = "weight not clamped to [0, 1]: targets outside the source range are extrapolated, not held"

weight = mutant("cudabook.resample.s01_naive", "weight", [("return min(max(w, np.float32(0.0)), np.float32(1.0))", "return w")])
kernel = mutant("cudabook.resample.s01_naive", "resample_naive", weight=weight)


def launch(p):
    _launch(p, kernel=kernel)
