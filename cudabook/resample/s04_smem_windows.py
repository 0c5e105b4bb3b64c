"""04 shared-memory windows, persistent grid: a block stages the source rows a run of targets needs.

Sorted targets are the common case, and then a run of consecutive targets needs a short, contiguous stretch of
source rows. A block takes a work item, a run of `targets_per_block` targets of one batch row (and one chunk of
channels), and needs only two searches for it: the source intervals of its first and its last target. It loads
that window of source rows, with their times and the run's targets, into shared memory once, with 16-byte
coalesced loads; then every target of the run is located and interpolated from shared memory. Each source row
is requested once per window however many of its targets use it, and every global access is a coalesced row
segment.

The grid is persistent: a fixed number of blocks (SMs x `blocks_per_sm`, never more than fit on the GPU at
once) loops over the work items, so each block's shared memory is reused window after window, and a block
searches the run bounds of its next 32 work items at once, a thread a search (their latency paid once).

Correct for every input: when the targets are unsorted, or a run of targets spans more source rows than the
window holds, that work item falls back to a per-target path that reads global memory directly (a warp per
target, as in stage 02).

Data layout. A "word" is a uint32 holding two bf16 channels (even D: `feats` and `out` viewed as uint32
[.., D/2]) or, for odd D, a uint16 holding one (the kernels see uint16 [.., D], and a word's upper half is 0).
The window in shared memory is `cw` words a row, packed. Loads move `vec` words at once: 4 (16 bytes) when D
is a multiple of 8, 2 (8 bytes, a uint64 view) when D is a multiple of 4, else 1. The channel dimension is cut
into chunks of `chunk_cols / 2` words (`chunk_cols` channels; half as many for odd D, whose words hold one
channel each), so any D fits the shared memory.

Instruction economy matters here too: the 16-byte accesses use flat offsets (one add a load, no
stride arithmetic), and float32 -> bf16 rounding of two channels is one instruction (cvt.rn.bf16x2.f32, on
compute capability 8.0 and newer) instead of a dozen integer operations.
"""
import numpy as np
from numba import cuda, float32, int32, uint32

from .. import SIMULATOR, device
from .windows import (BATCH, arguments, batch_bounds, block_layout, buffer_words, compiled, fill_rest, grid_size,
                      launch_windows, ld_v4, lerp2, load_targets, load_times, per_target, st, st_v4, window_of,
                      window_start, with_register_cap, work_item)

NAME = "04_smem_windows"
TITLE = "shared-memory windows, persistent grid"
PARAMS = {"threads": 128, "targets_per_block": 32, "window_rows": 64, "chunk_cols": 256, "blocks_per_sm": 16,
          "vec_bytes": 16, "max_registers": 0, "blocks": 0}

# ----------------------------------------------------------------------------------------------------------
# Filling a window: wide loads into registers, a batch at a time, then stores to shared memory
# ----------------------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def fill_window(feats, feats64, times, sm32, smf, base, tbase, b, row0, span, c0, cw, vec, tid, nthr):
    """The whole block copies window rows row0 .. row0 + span - 1 (words c0 .. c0 + cw - 1) to shared words
    base.. and their times to shared floats tbase... Consecutive threads take consecutive elements, so each
    warp-wide load reads one contiguous stretch of a row: coalesced."""
    cwl, q, rem, step, wrap, r, j, off = window_start(tid, nthr, b, row0, c0, cw, vec, times.shape[1],
                                                      feats.shape[2])
    load_times(times, smf, tbase, b, row0, span, tid, nthr)
    fill_rest(feats, feats64, sm32, base, span, cwl, vec, q, rem, step, wrap, tid, r, j, off, nthr)


# ----------------------------------------------------------------------------------------------------------
# Interpolating from a window
# ----------------------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def window_interval(wt, base, n, x):
    """Binary search in the n window times wt[base : base + n] (shared memory): the local li in [0, n-2].
    The window holds every interval its targets can fall in, so this equals the search over the whole row."""
    lo = 0
    hi = n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if wt[base + mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def window_weight(wt, base, li, x):
    """s01's weight, with the two times read from the window in shared memory."""
    t0 = wt[base + li]
    w = (x - t0) / (wt[base + li + 1] - t0)
    return min(max(w, np.float32(0.0)), np.float32(1.0))


@cuda.jit(device=True)
def locate_targets(smf, smi, tbase, xbase, lbase, wbase, nt, span, tid, nthr):
    """Each thread takes a target of the run (shared smf[xbase + t]) and finds its interval in the window
    times (-> smi[lbase + t]) and its weight (-> smf[wbase + t])."""
    t = tid
    while t < nt:
        x = smf[xbase + t]
        li = window_interval(smf, tbase, span, x)
        smi[lbase + t] = li
        smf[wbase + t] = window_weight(smf, tbase, li, x)
        t += nthr


@cuda.jit(device=True)
def interpolate_window(sm32, smf, smi, out, base, lbase, wbase, b, t0, nt, c0, cw, vec, warp, nwarps, lane):
    """A warp per target, its lanes along the row: both source rows come from the window, and each
    warp-wide store writes one contiguous stretch of an output row (16 bytes a lane when vec == 4)."""
    Dc = out.shape[2]
    t = warp
    while t < nt:
        a = base + smi[lbase + t] * cw             # the target's lower row in the window
        w = smf[wbase + t]
        o = (b * out.shape[1] + t0 + t) * Dc + c0  # its output row, flat
        if vec == 4:
            j = 4 * lane
            while j < cw:
                a0, a1, a2, a3 = ld_v4(sm32, a + j)
                c0_, c1, c2, c3 = ld_v4(sm32, a + cw + j)
                st_v4(out, o + j, lerp2(a0, c0_, w), lerp2(a1, c1, w), lerp2(a2, c2, w), lerp2(a3, c3, w))
                j += 128
        else:
            j = lane
            while j < cw:
                st(out, o + j, lerp2(sm32[a + j], sm32[a + cw + j], w))
                j += 32
        t += nwarps


# ----------------------------------------------------------------------------------------------------------
# The kernel
# ----------------------------------------------------------------------------------------------------------
@cuda.jit
def resample_windows(times, feats, feats64, targets, out, is_sorted, vec, tpb, wrows, cwmax, n_runs, n_chunks):
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
    tid, nthr, lane, warp, nwarps = block_layout()
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
            # >>> lab: fill the window (rows, times, targets), sync, locate each target in it, sync, interpolate from it
            fill_window(feats, feats64, times, sm32, smf, 0, TOFF, b, row0, span, c0, cw, vec, tid, nthr)
            load_targets(targets, smf, XOFF, b, t0, nt, tid, nthr)
            cuda.syncthreads()
            locate_targets(smf, smi, TOFF, XOFF, LOFF, WOFF, nt, span, tid, nthr)
            cuda.syncthreads()
            interpolate_window(sm32, smf, smi, out, 0, LOFF, WOFF, b, t0, nt, c0, cw, vec, warp, nwarps, lane)
            # <<< lab
        else:
            per_target(times, feats, targets, out, b, t0, nt, c0, cw, warp, nwarps, lane)
            cuda.syncthreads()          # all have read their bounds before a new batch overwrites them
        item += G
        k += 1


# ----------------------------------------------------------------------------------------------------------
# The launch
# ----------------------------------------------------------------------------------------------------------
def occupancy(p, kernel=None, buffers=1, **params):
    """What a launch with these parameters gets on this GPU: a dict of blocks per SM (how many fit at once),
    registers per thread, shared bytes per block, work items, and the persistent grid. None in the simulator."""
    if SIMULATOR:
        return None
    params = {**PARAMS, **params}
    kernel = with_register_cap(kernel or resample_windows, params["max_registers"])
    args, smem, n_items = arguments(p, buffers, params["threads"], params["targets_per_block"],
                                     params["window_rows"], params["chunk_cols"], params["vec_bytes"])
    k, resident = compiled(kernel, args, params["threads"], smem)
    return dict(blocks_per_sm=resident // device.gpu().sms, regs_per_thread=k.regs_per_thread,
                shared_bytes=smem, work_items=n_items,
                grid=grid_size(n_items, params["blocks_per_sm"], params["blocks"], resident, stage=NAME))


def launch(p, kernel=resample_windows, threads=PARAMS["threads"], targets_per_block=PARAMS["targets_per_block"],
           window_rows=PARAMS["window_rows"], chunk_cols=PARAMS["chunk_cols"],
           blocks_per_sm=PARAMS["blocks_per_sm"], vec_bytes=PARAMS["vec_bytes"],
           max_registers=PARAMS["max_registers"], blocks=PARAMS["blocks"]):
    launch_windows(p, kernel, 1, threads, targets_per_block, window_rows, chunk_cols, blocks_per_sm, vec_bytes,
                   max_registers, blocks, stage=NAME)
