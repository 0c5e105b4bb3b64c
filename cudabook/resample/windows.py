"""Stage 04's shared-memory windows, in parts that stages 04 and 05 both build on (not a rung of its own).

Flat and 16-byte access to C-contiguous arrays, two bf16 channels interpolated in one word, the batched wide
loads that fill a window, work items and their run bounds, the per-target fallback, and the launch of a
persistent grid over the work items with one window buffer (stage 04) or two (stage 05, buffers="shared").
What a window is and how a block uses it is stage 04's lesson: see s04_smem_windows.py for the layout.
"""
import numpy as np
from numba import cuda

from .. import SIMULATOR, device
from ..kit.numba_rung import twin
from ..kit.params import check_settings
from ..bits import _as_float, f32_to_bf16, lerp
from .s01_naive import find_interval, weight
from .s02_warp_shuffles import warp_find_interval

SHARED_LIMIT = 48 * 1024      # shared memory a block may have without an opt-in (Numba has none)
SIM_SMS = 2                   # the simulator has no SMs: pretend 2, so that grids stay small
UNROLL = 8                    # load elements a thread has in flight at once while it fills a window
BATCH = 32                    # work items whose run bounds a block searches for at once
HALF = np.uint32(16)
HIGH = np.uint32(0xFFFF0000)


# ----------------------------------------------------------------------------------------------------------
# Flat access to C-contiguous arrays: element i of the whole buffer, whatever its shape. On the GPU these are
# one instruction each: no index arithmetic with the array's strides, and ld_v4 / st_v4 move 16 bytes at once
# (LDG.128 / STG.128 in global memory, LDS.128 / STS.128 in shared memory). i must be a multiple of 4 for
# ld_v4 / st_v4, and the buffer 16-byte aligned.
# ----------------------------------------------------------------------------------------------------------
if SIMULATOR:
    def _flat(a):
        inner = None if isinstance(a, np.ndarray) else a.__dict__.get("_item")   # a kernel argument
        return (a if inner is None else inner._ary).reshape(-1)

    def ld(a, i):
        return _flat(a)[i]

    def st(a, i, v):
        f = _flat(a)
        f[i] = f.dtype.type(v)

    def ld_v4(a, i):
        f = _flat(a)
        return np.uint32(f[i]), np.uint32(f[i + 1]), np.uint32(f[i + 2]), np.uint32(f[i + 3])

    def st_v4(a, i, w0, w1, w2, w3):
        f = _flat(a)
        f[i], f[i + 1], f[i + 2], f[i + 3] = w0, w1, w2, w3

    def pack_bf16x2(lo, hi):
        """Two float32 -> two bf16 (round to nearest even) in one uint32, lo in the low half."""
        return np.uint32(f32_to_bf16(lo)) | (np.uint32(f32_to_bf16(hi)) << HALF)
else:  # pragma: no cover - GPU only
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    _V4 = ir.VectorType(ir.IntType(32), 4)

    def _pointer(context, builder, arytype, ary, index):
        data = context.make_array(arytype)(context, builder, ary).data
        return builder.gep(data, [index])

    @intrinsic
    def ld(typingctx, a, i):
        def codegen(context, builder, sig, args):
            return builder.load(_pointer(context, builder, sig.args[0], args[0], args[1]))
        return a.dtype(a, types.intp), codegen

    @intrinsic
    def st(typingctx, a, i, v):
        def codegen(context, builder, sig, args):
            value = context.cast(builder, args[2], sig.args[2], sig.args[0].dtype)
            builder.store(value, _pointer(context, builder, sig.args[0], args[0], args[1]))
            return context.get_dummy_value()
        return types.void(a, types.intp, v), codegen

    @intrinsic
    def ld_v4(typingctx, a, i):
        def codegen(context, builder, sig, args):
            ptr = builder.bitcast(_pointer(context, builder, sig.args[0], args[0], args[1]), _V4.as_pointer())
            vec = builder.load(ptr, align=16)
            words = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, sig.return_type, words)
        return types.UniTuple(types.uint32, 4)(a, types.intp), codegen

    @intrinsic
    def st_v4(typingctx, a, i, w0, w1, w2, w3):
        def codegen(context, builder, sig, args):
            vec = ir.Constant(_V4, ir.Undefined)
            for k in range(4):
                word = context.cast(builder, args[2 + k], sig.args[2 + k], types.uint32)
                vec = builder.insert_element(vec, word, ir.Constant(ir.IntType(32), k))
            ptr = builder.bitcast(_pointer(context, builder, sig.args[0], args[0], args[1]), _V4.as_pointer())
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()
        return types.void(a, types.intp, w0, w1, w2, w3), codegen

    if (device.compute_capability() or (0, 0)) >= (8, 0):
        @intrinsic
        def pack_bf16x2(typingctx, lo, hi):
            """Two float32 -> two bf16 (round to nearest even) in one uint32, lo in the low half: one
            instruction, cvt.rn.bf16x2.f32 (compute capability 8.0 and newer)."""
            def codegen(context, builder, sig, args):
                fnty = ir.FunctionType(ir.IntType(32), [ir.FloatType(), ir.FloatType()])
                cvt = ir.InlineAsm(fnty, "cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f")
                return builder.call(cvt, [args[1], args[0]])       # the first operand goes to the high half
            return types.uint32(types.float32, types.float32), codegen
    else:
        @cuda.jit(device=True, forceinline=True)
        def pack_bf16x2(lo, hi):
            return np.uint32(f32_to_bf16(lo)) | (np.uint32(f32_to_bf16(hi)) << HALF)


@cuda.jit(device=True, forceinline=True)
def lerp2(a, c, w):
    """Interpolate the two bf16 channels of words a and c (uint32, the lower channel in the low half) with
    weight w, in float32; two bf16 out in one word. A word with one channel (odd D) has a zero high half."""
    a = np.uint32(a)
    c = np.uint32(c)
    lo = lerp(_as_float(a << HALF), _as_float(c << HALF), w)
    hi = lerp(_as_float(a & HIGH), _as_float(c & HIGH), w)
    return pack_bf16x2(lo, hi)


# ----------------------------------------------------------------------------------------------------------
# Filling a window: wide loads into registers, a batch at a time, then stores to shared memory
# ----------------------------------------------------------------------------------------------------------
@cuda.jit(device=True, forceinline=True)
def load_element(feats, feats64, off, ok, vec):
    """`vec` words of feats from flat word offset `off` (if ok), as four uint32 (unused ones 0)."""
    w0 = np.uint32(0)
    w1 = np.uint32(0)
    w2 = np.uint32(0)
    w3 = np.uint32(0)
    if ok:
        if vec == 4:
            w0, w1, w2, w3 = ld_v4(feats, off)                 # one 16-byte load
        elif vec == 2:
            v = np.uint64(ld(feats64, off // 2))               # one 8-byte load
            w0 = np.uint32(v & np.uint64(0xFFFFFFFF))
            w1 = np.uint32(v >> np.uint64(32))
        else:
            w0 = np.uint32(ld(feats, off))
    return w0, w1, w2, w3


@cuda.jit(device=True, forceinline=True)
def store_element(sm32, soff, ok, vec, w0, w1, w2, w3):
    """The words of a load_element to shared word offset soff (if ok)."""
    if ok:
        if vec == 4:
            st_v4(sm32, soff, w0, w1, w2, w3)
        elif vec == 2:
            st(sm32, soff, w0)
            st(sm32, soff + 1, w1)
        else:
            st(sm32, soff, w0)


@cuda.jit(device=True, forceinline=True)
def _next(r, j, off, q, rem, cwl, step, wrap):
    """Element (r, j) at word offset off -> the one blockDim.x further on: q rows and rem elements on,
    `step` words further in feats; `wrap` words more when the column passes the end of the chunk."""
    j += rem
    r += q
    off += step
    if j >= cwl:
        j -= cwl
        r += 1
        off += wrap
    return r, j, off


@cuda.jit(device=True)
def load_batch(feats, feats64, span, cwl, vec, q, rem, step, wrap, r, j, off):
    """Issue UNROLL (8) independent loads: window element (r, j) (row r of the window, element column j, at
    flat word offset off in feats) and the 7 that follow it blockDim.x apart. Returns the 32 registers and the
    (r, j, off) after them. Nothing here waits for the data: a load stalls only the first instruction that
    reads its register."""
    a0, a1, a2, a3 = load_element(feats, feats64, off, r < span, vec)
    r, j, off = _next(r, j, off, q, rem, cwl, step, wrap)
    b0, b1, b2, b3 = load_element(feats, feats64, off, r < span, vec)
    r, j, off = _next(r, j, off, q, rem, cwl, step, wrap)
    c0, c1, c2, c3 = load_element(feats, feats64, off, r < span, vec)
    r, j, off = _next(r, j, off, q, rem, cwl, step, wrap)
    d0, d1, d2, d3 = load_element(feats, feats64, off, r < span, vec)
    r, j, off = _next(r, j, off, q, rem, cwl, step, wrap)
    e0, e1, e2, e3 = load_element(feats, feats64, off, r < span, vec)
    r, j, off = _next(r, j, off, q, rem, cwl, step, wrap)
    f0, f1, f2, f3 = load_element(feats, feats64, off, r < span, vec)
    r, j, off = _next(r, j, off, q, rem, cwl, step, wrap)
    g0, g1, g2, g3 = load_element(feats, feats64, off, r < span, vec)
    r, j, off = _next(r, j, off, q, rem, cwl, step, wrap)
    h0, h1, h2, h3 = load_element(feats, feats64, off, r < span, vec)
    r, j, off = _next(r, j, off, q, rem, cwl, step, wrap)
    return (a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3, e0, e1, e2, e3, f0, f1, f2, f3,
            g0, g1, g2, g3, h0, h1, h2, h3, r, j, off)


@cuda.jit(device=True)
def store_batch(sm32, soff, e, nthr, n_el, vec, a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3,
                e0, e1, e2, e3, f0, f1, f2, f3, g0, g1, g2, g3, h0, h1, h2, h3):
    """Store a load_batch's registers (window elements e, e + nthr, ...) at shared word soff = base + e * vec,
    soff + nthr * vec, ...: the window is packed, row r starting at word base + r * cw."""
    s = nthr * vec
    store_element(sm32, soff, e < n_el, vec, a0, a1, a2, a3)
    store_element(sm32, soff + s, e + nthr < n_el, vec, b0, b1, b2, b3)
    store_element(sm32, soff + 2 * s, e + 2 * nthr < n_el, vec, c0, c1, c2, c3)
    store_element(sm32, soff + 3 * s, e + 3 * nthr < n_el, vec, d0, d1, d2, d3)
    store_element(sm32, soff + 4 * s, e + 4 * nthr < n_el, vec, e0, e1, e2, e3)
    store_element(sm32, soff + 5 * s, e + 5 * nthr < n_el, vec, f0, f1, f2, f3)
    store_element(sm32, soff + 6 * s, e + 6 * nthr < n_el, vec, g0, g1, g2, g3)
    store_element(sm32, soff + 7 * s, e + 7 * nthr < n_el, vec, h0, h1, h2, h3)


@cuda.jit(device=True)
def window_start(tid, nthr, b, row0, c0, cw, vec, S, Dc):
    """Where a thread starts filling a window of rows row0.. (words c0 .. c0 + cw - 1 of each): its first
    element (r, j), that element's flat word offset in feats, and the steps of _next."""
    cwl = cw // vec                     # window row width in load elements
    q = nthr // cwl                     # blockDim.x elements on = q rows and rem elements on
    rem = nthr - q * cwl
    r = tid // cwl
    j = tid - r * cwl
    off = (b * S + row0 + r) * Dc + c0 + j * vec
    return cwl, q, rem, q * Dc + rem * vec, Dc - cw, r, j, off


@cuda.jit(device=True)
def load_row(src, smf, base, b, first, n, start, nthr):
    """src[b, first .. first + n - 1] to shared floats base.., one a thread from index `start`."""
    i = start
    while i < n:
        smf[base + i] = src[b, first + i]
        i += nthr


load_times = load_row         # load_times(times, smf, tbase, b, row0, span, start, nthr): a window's source times
load_targets = load_row       # load_targets(targets, smf, xbase, b, t0, nt, start, nthr): a run's targets


@cuda.jit(device=True)
def fill_rest(feats, feats64, sm32, base, span, cwl, vec, q, rem, step, wrap, e, r, j, off, nthr):
    """Load and store window elements e, e + nthr, ... (e at row r, element column j, feats word off), a batch
    at a time."""
    n_el = span * cwl
    while e < n_el:
        (a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3, e0, e1, e2, e3, f0, f1, f2, f3,
         g0, g1, g2, g3, h0, h1, h2, h3, r, j, off) = load_batch(feats, feats64, span, cwl, vec, q, rem, step,
                                                                 wrap, r, j, off)
        store_batch(sm32, base + e * vec, e, nthr, n_el, vec, a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3,
                    d0, d1, d2, d3, e0, e1, e2, e3, f0, f1, f2, f3, g0, g1, g2, g3, h0, h1, h2, h3)
        e += UNROLL * nthr


# ----------------------------------------------------------------------------------------------------------
# Work items, their run bounds, the fallback
# ----------------------------------------------------------------------------------------------------------
@cuda.jit(device=True, forceinline=True)
def block_layout():
    """(tid, nthr, lane, warp, nwarps): this thread's index in its block, the block's threads, this thread's
    lane and warp, and the block's warps."""
    tid = cuda.threadIdx.x
    nthr = cuda.blockDim.x
    return tid, nthr, tid % 32, tid // 32, nthr // 32


@cuda.jit(device=True)
def buffer_words(wrows, cwmax, tpb):
    """Shared words of one window buffer (rows, times, targets), rounded up to a multiple of 4 so that the next
    buffer starts 16-byte aligned."""
    return (wrows * cwmax + wrows + tpb + 3) // 4 * 4


@cuda.jit(device=True)
def work_item(item, n_runs, n_chunks, tpb, cwmax, T, Dc):
    """Work item -> (batch row b, first target t0, number of targets nt, first word c0, words cw).
    Items run fastest over target runs, so the blocks working at the same time share boundary rows in L2."""
    per_b = n_runs * n_chunks
    b = item // per_b
    rest = item - b * per_b
    chunk = rest // n_runs
    run = rest - chunk * n_runs
    t0 = run * tpb
    c0 = chunk * cwmax
    return b, t0, min(tpb, T - t0), c0, min(cwmax, Dc - c0)


@cuda.jit(device=True)
def batch_bounds(times, targets, smi, bbase, item0, step, n_items, n_runs, n_chunks, tpb, cwmax, Dc, tid, nthr):
    """The source intervals of the first and the last target of the runs of BATCH work items (item0,
    item0 + step, ...) -> smi[bbase + 2k], smi[bbase + 2k + 1]: a thread a search, all at once, each one
    stage 01's binary search. Two searches per run, not one per target, and their latency is paid once for
    BATCH work items. The caller syncs before reading them."""
    T = targets.shape[1]
    i = tid
    while i < 2 * BATCH:
        item = item0 + (i // 2) * step
        if item < n_items:
            b, t0, nt, c0, cw = work_item(item, n_runs, n_chunks, tpb, cwmax, T, Dc)
            smi[bbase + i] = find_interval(times, b, targets[b, t0 + (i % 2) * (nt - 1)])
        i += nthr


@cuda.jit(device=True)
def window_of(smi, slot, is_sorted, wrows):
    """(first row, rows) of a work item's window from its two intervals smi[slot], smi[slot + 1]. More rows
    than wrows means it does not fit (or the targets are unsorted): that item takes the per-target path."""
    if is_sorted:
        row0 = smi[slot]
        return row0, smi[slot + 1] + 2 - row0
    return 0, wrows + 1


@cuda.jit(device=True)
def per_target(times, feats, targets, out, b, t0, nt, c0, cw, warp, nwarps, lane):
    """The fallback: a warp per target, searched and read straight from global memory (stage 02's way)."""
    t = warp
    while t < nt:
        x = targets[b, t0 + t]
        lo = warp_find_interval(times, b, x, lane)
        w = weight(times, b, lo, x)
        j = lane
        while j < cw:
            out[b, t0 + t, c0 + j] = lerp2(feats[b, lo, c0 + j], feats[b, lo + 1, c0 + j], w)
            j += 32
        t += nwarps


# ----------------------------------------------------------------------------------------------------------
# The launch
# ----------------------------------------------------------------------------------------------------------
def aligned(array, width):
    return SIMULATOR or array.device_ctypes_pointer.value % width == 0


def words(p):
    """(word view of feats, uint64 view of feats or the word view, word view of out, words a row Dc)."""
    D = p.shape[3]
    if D % 2:
        return p.feats, p.feats, p.out, D
    fw = p.feats.view(np.uint32)
    return fw, (p.feats.view(np.uint64) if D % 4 == 0 else fw), p.out.view(np.uint32), D // 2


def geometry(p, threads, targets_per_block, window_rows, chunk_cols, vec_bytes, buffers=1):
    """Checked launch sizes: (vec, cwmax, runs, chunks, shared bytes). cwmax is the chunk width in words."""
    B, S, T, D = p.shape
    if threads < 32 or threads % 32 or threads > 1024:
        raise ValueError(f"threads must be a multiple of 32 between 32 and 1024, got {threads}")
    if targets_per_block < 1 or window_rows < 2:
        raise ValueError(f"need targets_per_block >= 1 and window_rows >= 2, got {targets_per_block} and "
                         f"{window_rows}")
    if vec_bytes not in (16, 8, 4):
        raise ValueError(f"vec_bytes must be 16, 8 or 4, got {vec_bytes!r}")
    if chunk_cols < 2 or chunk_cols % 2:
        raise ValueError(f"chunk_cols must be even and at least 2, got {chunk_cols}")
    Dc = D if D % 2 else D // 2
    cwmax = min(chunk_cols // 2, Dc)      # words a chunk row (odd D: a word holds one channel, so fewer channels)
    vec = 1 if D % 2 else vec_bytes // 4
    while vec > 1 and (Dc % vec or cwmax % vec or not (aligned(p.feats, 4 * vec) and aligned(p.out, 4 * vec))):
        vec //= 2
    stride = (window_rows * cwmax + window_rows + targets_per_block + 3) // 4 * 4     # as buffer_words()
    smem = 4 * (buffers * stride + 2 * targets_per_block + 2 * BATCH)
    if smem > SHARED_LIMIT:
        raise ValueError(
            f"the window{'s' if buffers > 1 else ''} need {smem:,} bytes of shared memory ({buffers} x "
            f"{window_rows} rows x {cwmax} words, times and targets), more than the {SHARED_LIMIT:,} a block may "
            f"have: lower window_rows or chunk_cols")
    return vec, cwmax, (T + targets_per_block - 1) // targets_per_block, (Dc + cwmax - 1) // cwmax, smem


_COMPILED = {}


def compiled(kernel, args, threads, smem):
    """(the compiled kernel, Numba's _Kernel, that a launch with these arguments runs, how many of its blocks
    fit on the GPU at once); None in the simulator. Cached: the occupancy query is not free."""
    if SIMULATOR:
        return None
    key = (kernel, tuple(getattr(a, "dtype", type(a)) for a in args), threads, smem)
    if key not in _COMPILED:
        k = kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))
        _COMPILED[key] = k, k.max_cooperative_grid_blocks(threads, smem)
    return _COMPILED[key]


def grid_size(n_items, blocks_per_sm, blocks, resident=None, *, stage):
    """The persistent grid: `blocks` if given, else SMs x blocks_per_sm; never more blocks than work items,
    and never more than fit on the GPU at once (`resident`, from the occupancy API): a block that does not
    fit would start only when a resident one has finished all of its work items, and run its own alone."""
    check_settings(stage, blocks_per_sm=(blocks_per_sm, 1), blocks=(blocks, 0))
    if not blocks:
        g = device.gpu()
        blocks = (g.sms if g else SIM_SMS) * blocks_per_sm
    if resident:
        blocks = min(blocks, resident)
    return max(1, min(blocks, n_items))


def arguments(p, buffers, threads, targets_per_block, window_rows, chunk_cols, vec_bytes):
    """(kernel arguments, shared memory bytes, number of work items)."""
    vec, cwmax, n_runs, n_chunks, smem = geometry(p, threads, targets_per_block, window_rows, chunk_cols,
                                                  vec_bytes, buffers)
    fw, f64, ow, Dc = words(p)
    args = (p.times, fw, f64, p.targets, ow, np.int32(p.targets_sorted), np.int32(vec),
            np.int32(targets_per_block), np.int32(window_rows), np.int32(cwmax), np.int32(n_runs),
            np.int32(n_chunks))
    return args, smem, p.shape[0] * n_runs * n_chunks


_CAPPED = {}


def with_register_cap(kernel, max_registers):
    """The same kernel compiled with at most `max_registers` registers a thread (0: as the compiler likes).
    Fewer registers let more threads share an SM, at the price of spilling to local memory if too few."""
    if not max_registers or SIMULATOR:
        return kernel
    key = (kernel, max_registers)
    if key not in _CAPPED:
        _CAPPED[key] = cuda.jit(max_registers=max_registers)(kernel.py_func)
    return _CAPPED[key]


def launch_windows(p, kernel, buffers, threads, targets_per_block, window_rows, chunk_cols, blocks_per_sm, vec_bytes,
                   max_registers, blocks, stage):
    """Stage 04's launch, shared with stage 05 (buffers = 2); `stage` names the stage in a bad parameter's error."""
    if p.shape[2] == 0:
        return
    args, smem, n_items = arguments(p, buffers, threads, targets_per_block, window_rows, chunk_cols, vec_bytes)
    kernel = with_register_cap(twin(kernel), max_registers)
    found = compiled(kernel, args, threads, smem)
    if found and found[1] == 0:
        raise ValueError(f"a block of {threads} threads does not fit on an SM: the kernel needs "
                         f"{found[0].regs_per_thread} registers a thread and {smem:,} bytes of shared memory; "
                         f"use fewer threads")
    grid = grid_size(n_items, blocks_per_sm, blocks, found[1] if found else None, stage=stage)
    kernel[grid, threads, 0, smem](*args)

