"""Stage 05 (buffers="shared") that forgets to flip buffers: each thread stores its prefetched registers for
window k+1 into the buffer that holds window k, right after its own share of the interpolation, while other
warps still read it."""
from corpus.mutate import mutant
from cudabook import SIMULATOR
from cudabook.resample import s05_double_buffered as s05

BUG = "the next window is stored into the buffer still being read (no flip), with no barrier: a race"
SIZE = dict(B=2, S=19, T=45, D=64)
# On a GPU: one block per run, so that a block's next work item is another batch row (other data), and 33
# targets over 4 warps: the warp with one target more still reads the window when the others
# overwrite it.
GPU_SIZE = dict(B=4, S=20, T=2000, D=256)
PARAMS = (dict(buffers="shared", threads=64, targets_per_block=8, window_rows=12, chunk_cols=64, vec_bytes=4,
               blocks=2) if SIMULATOR
          else dict(buffers="shared", threads=128, targets_per_block=33, window_rows=12, chunk_cols=256, blocks=61))

kernel = mutant("cudabook.resample.s05_double_buffered", "resample_double",
                [("nbase = BUF - base", "nbase = base")])


def launch(p):
    s05.launch(p, kernel=kernel, **PARAMS)
