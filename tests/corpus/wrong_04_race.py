"""Stage 04 with a loader warp: warp 0 fills each window, the other warps interpolate from it. The barrier at
the end of the work item is missing, so the loader starts filling the next window while the readers are still
interpolating from the current one (shared memory reused with no barrier in between)."""
from numba import cuda, float32, int32, uint32

from cudabook import SIMULATOR
from cudabook.resample import s04_smem_windows as s04
from cudabook.resample.s04_smem_windows import (BATCH, batch_bounds, buffer_words, fill_rest, fill_window,
                                                interpolate_window, load_targets, load_times, locate_targets,
                                                per_target, window_of, window_start, work_item)

BUG = "no barrier before the loader warp refills the window: the readers still interpolate from it (a race)"
SIZE = dict(B=2, S=19, T=45, D=64)
# On a GPU: one block per run, so that a block's next work item is the next channel chunk or batch row (other
# data in the window), and long runs of long rows, so that the readers are still busy when the loader refills.
GPU_SIZE = dict(B=4, S=20, T=2000, D=1024)
PARAMS = (dict(threads=64, targets_per_block=8, window_rows=12, chunk_cols=512, vec_bytes=4, blocks=2) if SIMULATOR
          else dict(threads=64, targets_per_block=32, window_rows=12, chunk_cols=512, vec_bytes=4, blocks=63))

@cuda.jit
def kernel(times, feats, feats64, targets, out, is_sorted, vec, tpb, wrows, cwmax, n_runs, n_chunks):
    sm32 = cuda.shared.array(0, uint32)
    smf = cuda.shared.array(0, float32)
    smi = cuda.shared.array(0, int32)
    TOFF = wrows * cwmax
    XOFF = TOFF + wrows
    LOFF = buffer_words(wrows, cwmax, tpb)
    WOFF = LOFF + tpb
    BOFF = WOFF + tpb
    tid = cuda.threadIdx.x
    nthr = cuda.blockDim.x
    lane = tid % 32
    warp = tid // 32
    nwarps = nthr // 32
    T = targets.shape[1]
    Dc = out.shape[2]
    G = cuda.gridDim.x
    n_items = times.shape[0] * n_runs * n_chunks
    item = cuda.blockIdx.x
    k = 0
    while item < n_items:
        slot = k % BATCH
        if slot == 0 and is_sorted:
            cuda.syncthreads()          # everyone has read the old bounds
            batch_bounds(times, targets, smi, BOFF, item, G, n_items, n_runs, n_chunks, tpb, cwmax, Dc, tid,
                         nthr)
            cuda.syncthreads()
        b, t0, nt, c0, cw = work_item(item, n_runs, n_chunks, tpb, cwmax, T, Dc)
        row0, span = window_of(smi, BOFF + 2 * slot, is_sorted, wrows)
        if warp == 0 and span <= wrows:     # the loader warp fills the window alone
            fill_window(feats, feats64, times, sm32, smf, 0, TOFF, b, row0, span, c0, cw, vec, lane, 32)
            load_targets(targets, smf, XOFF, b, t0, nt, lane, 32)
        cuda.syncthreads()
        if span <= wrows:               # the other warps read it
            if warp > 0:
                locate_targets(smf, smi, TOFF, XOFF, LOFF, WOFF, nt, span, tid - 32, nthr - 32)
            cuda.syncthreads()
            if warp > 0:
                interpolate_window(sm32, smf, smi, out, 0, LOFF, WOFF, b, t0, nt, c0, cw, vec, warp - 1,
                                   nwarps - 1, lane)
        elif warp > 0:
            per_target(times, feats, targets, out, b, t0, nt, c0, cw, warp - 1, nwarps - 1, lane)
        # the bug: a cuda.syncthreads() belongs here, before the loader warp refills the window
        item += G
        k += 1


def launch(p):
    s04.launch(p, kernel=kernel, **PARAMS)
