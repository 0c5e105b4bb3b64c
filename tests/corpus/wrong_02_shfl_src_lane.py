from corpus.mutate import mutant
from cudabook.resample.s02_warp_shuffles import launch as _launch

BUG = "lane 0 searches, but the index is broadcast from lane 1 (which never searched): every target uses interval 0"
SIZE = dict(B=2, S=23, T=4, D=5)
GPU_SIZE = dict(B=4, S=700, T=2000, D=67)

lane0_find_interval = mutant("cudabook.resample.s02_warp_shuffles", "lane0_find_interval",
                             [("cuda.shfl_sync(FULL_MASK, lo, 0)", "cuda.shfl_sync(FULL_MASK, lo, 1)")])
kernel = mutant("cudabook.resample.s02_warp_shuffles", "resample_warp_lane0", lane0_find_interval=lane0_find_interval)


def launch(p):
    _launch(p, kernel=kernel)
