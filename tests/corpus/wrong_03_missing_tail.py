from corpus.mutate import mutant
from cudabook.resample.s03_coalesced import launch as _launch

BUG = ("16-byte loop runs only whole 32-lane sweeps (32 x 8 channels): with D = 264 the last 8 channels, "
       "the tail sweep, are never written")
SIZE = dict(B=1, S=9, T=3, D=264)
GPU_SIZE = dict(B=4, S=700, T=2000, D=264)

kernel = mutant("cudabook.resample.s03_coalesced", "resample_vec16", [("for i in range(4 * lane, feats.shape[2], 4 * WARP):",
                                                "for i in range(4 * lane, feats.shape[2] // (4 * WARP) * (4 * WARP), 4 * WARP):")])


def launch(p):
    _launch(p, kernel=kernel, vec_bytes=16)
