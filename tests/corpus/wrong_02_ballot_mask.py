from corpus.mutate import mutant
from cudabook.resample.s02_warp_shuffles import launch as _launch

BUG = "ballot with mask 0x0000FFFF while all 32 lanes call it: lanes 16-31 are not in the mask"
SIZE = dict(B=1, S=23, T=2, D=5)
SIM_ONLY = ("a mask that leaves out lanes which execute the call is undefined behaviour on a GPU (it may hang); "
            "the simulator's warp operations are the ones that catch it")

warp_find_interval = mutant("cudabook.resample.s02_warp_shuffles", "warp_find_interval",
                            [("cuda.ballot_sync(FULL_MASK, below)", "cuda.ballot_sync(0x0000FFFF, below)")])
kernel = mutant("cudabook.resample.s02_warp_shuffles", "resample_warp", warp_find_interval=warp_find_interval)


def launch(p):
    _launch(p, kernel=kernel)
