from corpus.mutate import mutant
from cudabook.resample.s02_warp_shuffles import launch as _launch

BUG = ("lanes with no channel to do (lane >= D) return before the ballot search: the ballot counts only the "
       "lanes left, so targets past the first D probe points get the wrong interval")
SIZE = dict(B=2, S=40, T=4, D=3)
SIM_ONLY = ("a warp operation whose mask names lanes that have exited is undefined behaviour on a GPU; the "
            "simulator, like hardware, skips exited lanes, and the checker sees the wrong intervals")

kernel = mutant("cudabook.resample.s02_warp_shuffles", "resample_warp", [("if warp >= targets.shape[0] * T:",
                                               "if warp >= targets.shape[0] * T or lane >= feats.shape[2]:")])


def launch(p):
    _launch(p, kernel=kernel)
