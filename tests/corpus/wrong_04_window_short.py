"""Stage 04 with the window one row short: the run's rows are row0 .. last interval + 1, but the loop that
fills the window stops a row early, so a target in the run's last interval reads a stale row."""
from numba import cuda, float32, int32, uint32

from cudabook.resample import s04_smem_windows as s04
from cudabook.resample.s04_smem_windows import (BATCH, batch_bounds, buffer_words, fill_rest, fill_window,
                                                interpolate_window, load_targets, load_times, locate_targets,
                                                per_target, window_of, window_start, work_item)

BUG = "window bound off by one: the last row of the window (the upper row of the last interval) is not loaded"
SIZE = dict(B=2, S=19, T=45, D=16)
PARAMS = dict(threads=64, targets_per_block=8, window_rows=12, chunk_cols=16)

@cuda.jit
def kernel(times, feats, feats64, targets, out, is_sorted, vec, tpb, wrows, cwmax, n_runs, n_chunks):
    # Dynamic shared memory, in 4-byte words: [window: wrows * cwmax][its times: wrows][its targets: tpb]
    # [each target's interval in the window: tpb][its weight: tpb][the runs' intervals: 2 * BATCH]
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
    while item < n_items:               # the persistent loop: this block's work items are item, item + G, ...
        slot = k % BATCH
        if slot == 0 and is_sorted:     # the run bounds of this block's next BATCH items
            batch_bounds(times, targets, smi, BOFF, item, G, n_items, n_runs, n_chunks, tpb, cwmax, Dc, tid,
                         nthr)
        cuda.syncthreads()              # bounds written; every thread is done with the previous window
        b, t0, nt, c0, cw = work_item(item, n_runs, n_chunks, tpb, cwmax, T, Dc)
        row0, span = window_of(smi, BOFF + 2 * slot, is_sorted, wrows)
        if span <= wrows:
            cwl, q, rem, step, wrap, r, j, off = window_start(tid, nthr, b, row0, c0, cw, vec, times.shape[1], Dc)
            load_times(times, smf, TOFF, b, row0, span, tid, nthr)
            fill_rest(feats, feats64, sm32, 0, span - 1, cwl, vec, q, rem, step, wrap, tid, r, j, off,
                      nthr)             # the bug: span - 1 rows
            load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)
            cuda.syncthreads()
            locate_targets(smf, smi, TOFF, XOFF, LOFF, WOFF, nt, span, tid, nthr)
            cuda.syncthreads()
            interpolate_window(sm32, smf, smi, out, 0, LOFF, WOFF, b, t0, nt, c0, cw, vec, warp, nwarps, lane)
        else:
            per_target(times, feats, targets, out, b, t0, nt, c0, cw, warp, nwarps, lane)
            cuda.syncthreads()          # all have read their bounds before a new batch overwrites them
        item += G
        k += 1


def launch(p):
    s04.launch(p, kernel=kernel, **PARAMS)
