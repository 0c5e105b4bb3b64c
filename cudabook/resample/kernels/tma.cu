// 07 TMA bulk tensor copies (sm_90: Hopper).
//
// Work items: up to TW consecutive targets of one batch row (and DC channels of them), plus the window of
// consecutive source rows [L, L+n) that holds their intervals. The copies are made by the Tensor Memory
// Accelerator: one thread asks for a whole box of feature rows with one instruction (cp.async.bulk.tensor),
// described by a tensor map that the host built with cuTensorMapEncodeTiled over feats viewed as [B, S, D]
// bf16, box = (1, BOXR rows, DC channels).
//
// Where the searches happen (SEARCH):
//   1 prepass   a first small kernel, resample_intervals, finds every target's interval lo (a binary search in
//               a row of source times held in shared memory) and its weight w, and writes them as one int2 per
//               target (B*T*8 bytes: 2 MB at the benchmark size). The streaming kernel only reads them: an
//               item's window is [min lo, max lo + 2). With programmatic dependent launch (the host's pdl),
//               the streaming kernel's blocks start while the prepass runs: the prepass lets them
//               (griddepcontrol.launch_dependents), and the producer waits (griddepcontrol.wait) only before it
//               reads the first pair, so the barriers' set-up and the launch itself hide under the search.
//               The first self_blocks blocks (a kernel argument: the host gives the first wave) do not wait
//               at all: their producer finds its own pairs (own_pairs: an interpolation guess, else the search
//               of SEARCH 2), so the first wave streams while the prepass still runs instead of sitting idle.
//               (With PDL the host keeps the grid's last block out of them: some block must wait, or this kernel
//               could end before the prepass, and the next call's prepass would write pairs this one still does.)
//               The prepass is launched with programmatic dependent launch too: its blocks wait
//               (griddepcontrol.wait) for the kernel before it on the stream (the last call's streaming kernel,
//               when calls follow each other) before they read anything, and only then let the streaming kernel
//               start. The streaming kernel never runs launch_dependents, so the prepass is launched only once
//               its last block has exited: what that saves is the gap between the two kernels (the prepass's
//               launch runs while the kernel before completes, not after), not that kernel's tail. The order of
//               everything in memory stays the stream's.
//   2 producer  the producer warp of the streaming kernel finds them: the item's window by a warp-wide search
//               in global memory (seeded by the last window when the items follow each other), then every
//               target's lo by a binary search in the window's source times, which it loads into a scratch
//               area. The consumers get the same (lo, w) pairs in the stage as with the prepass, and one
//               kernel does everything.
//   0 inline    the first version of this stage: the producer finds the window, the consumers search every
//               target inside the window's source times (brought by the producer, or by a second tensor map
//               over times when TIMES_TMA), then meet at a barrier before they interpolate.
// The lesson times all three.
//
// Warp specialisation in resample_tma:
//   warp 0 (producer): for each item, work out its window, wait until the stage is free (mbarrier "empty"),
//     put the item's (lo, w) pairs (or targets) in the stage, and have one lane announce how many bytes will
//     land (mbarrier.arrive.expect_tx) and issue the box copies; they complete on the stage's "full" mbarrier.
//   warps 1..NCW (consumers): wait on "full" (try_wait.parity with the phase bit), read which item it is from
//     the stage's header (an item of no targets: the end), interpolate from shared memory, store 16 bytes a
//     thread (or, with OUT_TMA, write a tile to shared memory and let one thread TMA-store it), and arrive on
//     "empty" so the producer can refill the stage.
// STAGES stages form a ring. The host either launches one block per item (SCHED 0 with a grid of every chunk,
// STAGES 1: the default; the blocks sharing an SM overlap each other's copies) or a persistent grid whose blocks
// each walk many items through the ring. Which items a block takes (SCHED):
//   1 contiguous   an equal share of the B*T targets (to one target), in runs of up to TW
//   2 interleaved  the same amount, as R slices spread over the whole problem: block b takes slices b, b + G,
//                  b + 2G, ... of G*R equal slices (G blocks), so all blocks sweep through memory together
//   0 strided      the TW-aligned chunks b, b + G, b + 2G, ... (blocks may differ by one chunk)
// A run stops at the end of a batch row. Targets whose interval is not inside the window (unsorted targets, a
// window wider than WMAX rows) read their rows from global memory: slower, never wrong.
//
// Compile-time constants (NVRTC -D): SEARCH, SCHED, TW, WMAX (a multiple of BOXR and of 4, at most 252), BOXR,
// STAGES, NCW consumer warps, DC (a multiple of 8, at most 256), OUT_TMA, ST_CS (streaming stores), TIMES_TMA
// (SEARCH=0 only), BF16_CVT (resample_common.cuh) (0/1 each).
#include "resample_common.cuh"
#include "tma.cuh"                   // mbarriers, TMA copies (the kit's: cudabook/kit/include)

#ifndef SEARCH
#define SEARCH 1
#endif
#ifndef SCHED
#define SCHED 2
#endif
#ifndef TW
#define TW 32
#endif
#ifndef WMAX
#define WMAX 40
#endif
#ifndef BOXR
#define BOXR 8
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef NCW
#define NCW 8
#endif
#ifndef DC
#define DC 256
#endif
#ifndef OUT_TMA
#define OUT_TMA 0
#endif
#ifndef ST_CS
#define ST_CS 0
#endif
#ifndef TIMES_TMA
#define TIMES_TMA 0
#endif
#define PAIRS (SEARCH != 0)                 // the stage carries (lo, w) pairs for the consumers
#if PAIRS
#undef TIMES_TMA
#define TIMES_TMA 0                         // (the consumers need no source times)
#endif

#define NCT (NCW * 32)                      // consumer threads
#define VPR (DC / 8)                        // 16-byte vectors per row of the chunk
#define R16(x) (((x) + 15) / 16 * 16)

// Shared-memory layout (bytes, from a 128-byte aligned base). s07_tma.py:smem_bytes() mirrors SMEM_BYTES.
constexpr int BOX_BYTES = BOXR * DC * 2;
constexpr int FS_BYTES = WMAX * DC * 2;                    // one stage of feature rows
constexpr int OT_BYTES = OUT_TMA ? TW * DC * 2 : 0;        // one output tile (TMA store)
// One stage of source times (SEARCH=0; a TMA destination with TIMES_TMA). A TMA read must start at a 16-byte
// aligned address, so the times box starts at row L rounded down to a multiple of 4 (the window's times then
// begin at L % 4) and is 4 rows longer than the window.
constexpr int WT_ROWS = WMAX + 4;
constexpr int WT_BYTES = PAIRS ? 0 : (WT_ROWS * 4 + 127) / 128 * 128;
constexpr int XS_BYTES = R16(TW * (PAIRS ? 8 : 4));        // one stage of (lo, w) pairs, or of targets
constexpr int MB_BYTES = PAIRS ? 0 : R16(TW * 4);          // one buffer of the consumers' lo or w (SEARCH=0)
// (SEARCH 1) an own search loads OWN_ROWS source times around its guess, the first OWN_BACK of them before it
#define OWN_ROWS 128
#define OWN_BACK 46
constexpr int PW_ROWS = SEARCH == 1 ? (WMAX > OWN_ROWS ? WMAX : OWN_ROWS) : WMAX;
constexpr int PW_BYTES = PAIRS ? R16(PW_ROWS * 4) : 0;    // the producer's copy of the window's times
constexpr int OFF_OT = STAGES * FS_BYTES;
constexpr int OFF_WT = OFF_OT + 2 * OT_BYTES;
constexpr int OFF_XS = OFF_WT + STAGES * WT_BYTES;
constexpr int OFF_MLO = OFF_XS + STAGES * XS_BYTES;
constexpr int OFF_MW = OFF_MLO + 2 * MB_BYTES;
constexpr int OFF_PW = OFF_MW + 2 * MB_BYTES;
constexpr int OFF_HDR = OFF_PW + PW_BYTES;
constexpr int OFF_BAR = OFF_HDR + STAGES * 32;           // a stage's header: L, n, b, t0, nT, d0 (8 ints)
constexpr int SMEM_BYTES = OFF_BAR + 2 * STAGES * 8 + 128; // + slack to align the base to 128 bytes
#ifdef EXPECT_SMEM   // the host's mirror of this layout (tests compile with it)
static_assert(SMEM_BYTES == EXPECT_SMEM, "smem_bytes() in the stage module disagrees with SMEM_BYTES");
#endif

static_assert(DC % 8 == 0 && DC <= 256, "DC: a multiple of 8 channels, at most 256 (the TMA box limit)");
static_assert(WMAX % BOXR == 0 && WMAX % 4 == 0 && WT_ROWS <= 256, "WMAX: a multiple of BOXR and of 4, at most 252");
static_assert(BOX_BYTES % 128 == 0, "each box must start 128-byte aligned in shared memory");
static_assert(TW % 8 == 0 && TW <= 256, "TW: a multiple of 8, at most 256");
static_assert(NCT >= 32 && STAGES >= 1, "bad configuration");

// The mbarriers and the TMA copies (mbar_init, mbar_expect_tx, mbar_wait, tma_load_3d, tma_store_3d, bulk groups,
// fence_proxy_async, TmaDesc: the 128-byte CUtensorMap) are the kit's, in tma.cuh: every TMA rung uses one copy.
// A barrier for the consumer warps only (barrier 0 is __syncthreads).
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(NCT) : "memory"); }

__device__ __forceinline__ void store_out(u16* p, uint4 v) {
#if ST_CS
    __stcs(reinterpret_cast<uint4*>(p), v);
#else
    *reinterpret_cast<uint4*>(p) = v;
#endif
}

// Warp-wide minimum and maximum of an int (sm_80's redux.sync: one instruction each).
__device__ __forceinline__ int warp_min(int v) {
    int r;
    asm volatile("redux.sync.min.s32 %0, %1, 0xffffffff;\n" : "=r"(r) : "r"(v));
    return r;
}
__device__ __forceinline__ int warp_max(int v) {
    int r;
    asm volatile("redux.sync.max.s32 %0, %1, 0xffffffff;\n" : "=r"(r) : "r"(v));
    return r;
}

// ---------------------------------------------------------------------------- the prepass
// One block of PRE_NT threads finds the intervals of PRE_T = PRE_NT * PRE_PER consecutive targets of one batch
// row. When the row of source times is short enough, the block first copies it to shared memory (coalesced
// loads, all in flight at once) and every search probes shared memory; otherwise the searches probe global
// memory. Each thread searches PRE_PER targets side by side (their probes are independent loads).
#ifndef PRE_NT
#define PRE_NT 256
#endif
#ifndef PRE_PER
#define PRE_PER 4
#endif
#define PRE_T (PRE_NT * PRE_PER)
#define PRE_SMAX 8192                       // source times a block may hold in shared memory (32 KB)

template <bool SHARED> __device__ __forceinline__ float time_at(const float* p) {
    if constexpr (SHARED) return *p;
    else return __ldg(p);
}

// find_interval's answer (the largest lo in [0, S-2] with row[lo] <= x, else 0) for PRE_PER values at once,
// without data-dependent branches: the candidates are [lo, lo + len); each step halves len.
template <bool SHARED>
__device__ __forceinline__ void intervals(const float* row, int S, const float (&x)[PRE_PER], int (&lo)[PRE_PER]) {
#pragma unroll
    for (int q = 0; q < PRE_PER; ++q) lo[q] = 0;
    for (int len = S - 1; len > 1;) {
        const int half = len >> 1;
#pragma unroll
        for (int q = 0; q < PRE_PER; ++q) lo[q] = time_at<SHARED>(row + lo[q] + half) <= x[q] ? lo[q] + half : lo[q];
        len -= half;
    }
}

template <bool SHARED>
__device__ __forceinline__ void write_intervals(const float* row, int S, const float (&x)[PRE_PER], int nt,
                                                int2* __restrict__ lw) {
    int lo[PRE_PER];
    intervals<SHARED>(row, S, x, lo);
#pragma unroll
    for (int q = 0; q < PRE_PER; ++q) {
        const int i = threadIdx.x + q * PRE_NT;
        if (i < nt) {
            const float w = weight(time_at<SHARED>(row + lo[q]), time_at<SHARED>(row + lo[q] + 1), x[q]);
            lw[i] = make_int2(lo[q], __float_as_int(w));
        }
    }
}

// lw[b * T + t] = (lo, bits of w) for every target; a 1-D grid of B * ceil(T / PRE_T) blocks.
extern "C" __global__ void __launch_bounds__(PRE_NT)
resample_intervals(const float* __restrict__ times, const float* __restrict__ targets, int2* __restrict__ lw,
                   int B, int S, int T) {
    __shared__ float st[PRE_SMAX];
#if __CUDA_ARCH__ >= 900
    // (PDL) first wait for the kernel before this one (it may have written times or targets); the streaming
    // kernel's blocks may start after that, and its first wave reads times, targets and feats without waiting
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
#endif
    const int ntb = (T + PRE_T - 1) / PRE_T;
    const int b = blockIdx.x / ntb, t0 = (blockIdx.x - b * ntb) * PRE_T, nt = min(PRE_T, T - t0);
    const float* row = times + (size_t)b * S;
    float x[PRE_PER];
#pragma unroll
    for (int q = 0; q < PRE_PER; ++q) {
        const int i = threadIdx.x + q * PRE_NT;
        x[q] = i < nt ? __ldg(targets + (size_t)b * T + t0 + i) : 0.0f;
    }
    // shared memory only pays when the row is not much longer than the block's targets
    if (S <= PRE_SMAX && S <= 16 * nt) {
        for (int i0 = threadIdx.x; i0 < S; i0 += 16 * PRE_NT) {   // 16 loads in flight, then 16 stores (a plain
            float v[16];                                            // loop would wait for each load in turn)
#pragma unroll
            for (int u = 0; u < 16; ++u) v[u] = i0 + u * PRE_NT < S ? __ldg(row + i0 + u * PRE_NT) : 0.0f;
#pragma unroll
            for (int u = 0; u < 16; ++u)
                if (i0 + u * PRE_NT < S) st[i0 + u * PRE_NT] = v[u];
        }
        __syncthreads();
        write_intervals<true>(st, S, x, nt, lw + (size_t)b * T + t0);
    } else {
        write_intervals<false>(row, S, x, nt, lw + (size_t)b * T + t0);
    }
}

// ---------------------------------------------------------------------------- work items
#include "resample_items.cuh"            // Item, decode(), XPL, load_targets()

// A block's walk through its items (the producer's: it tells the consumers each item in the stage's header).
// SCHED 1 and 2: the N = B * T targets (flattened index g = b * T + t) are cut into G * R slices of equal size
// (to one target), G the grid; block b takes slices b, b + G, ..., b + (R-1) G. Contiguous: R = 1 (one share a
// block). Interleaved: R = ceil(N / (G * TW)), so a slice is at most TW targets and, at any moment, the blocks
// work on neighbouring slices. A slice is walked in runs that stop at the end of a batch row; each run is one
// item per channel chunk. SCHED 0: the TW-aligned chunks blockIdx.x, blockIdx.x + G, ...
struct Walk {
    long long g, g1, N;                     // the current run's first target; the end of its slice; B * T
    int r, R, dc, j;                        // slice round and rounds; channel chunk; step (SCHED 0)
};

__device__ __forceinline__ void slice_of(Walk& w) {
    const long long GR = (long long)gridDim.x * w.R, s = (long long)w.r * gridDim.x + blockIdx.x;
    w.g = w.N * s / GR;
    w.g1 = w.N * (s + 1) / GR;
}

__device__ __forceinline__ Walk walk_start(int B, int T) {
    Walk w;
    w.N = (long long)B * T;
    const long long per_round = (long long)gridDim.x * TW;
    w.R = SCHED == 2 ? (int)((w.N + per_round - 1) / per_round) : 1;
    w.r = 0;
    w.dc = 0;
    w.j = 0;
    slice_of(w);
    while (w.g >= w.g1 && ++w.r < w.R) slice_of(w);       // (no slice is empty when G <= N; to be safe)
    return w;
}

// The walk's current item; false when the block has no more.
__device__ __forceinline__ bool walk_item(const Walk& w, int B, int T, int ntc, int ndc, Item& it) {
#if SCHED != 0
    if (w.g >= w.g1) return false;
    it.b = (int)(w.g / T);
    it.t0 = (int)(w.g - (long long)it.b * T);
    it.nT = (int)min((long long)min(TW, T - it.t0), w.g1 - w.g);
    it.d0 = w.dc * DC;
    return true;
#else
    const long long item = blockIdx.x + (long long)w.j * gridDim.x;
    if (item >= (long long)B * ntc * ndc) return false;
    it = decode((int)item, ntc, ndc, T);
    return true;
#endif
}

__device__ __forceinline__ void walk_next(Walk& w, const Item& it, int ndc) {
#if SCHED != 0
    if (++w.dc == ndc) {
        w.dc = 0;
        w.g += it.nT;
        while (w.g >= w.g1 && ++w.r < w.R) slice_of(w);
    }
#else
    ++w.j;
#endif
}


#if SEARCH == 1
// Warp-wide: lane j loads the (lo, w) pair of the item's targets j, j + 32, ... (lo = -1 past its end). Issued
// one item ahead, so the loads are in flight while the warp works on the current item.
__device__ __forceinline__ void load_pairs(const int2* __restrict__ lw, int T, const Item& it, int2 (&e)[XPL]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int q = 0; q < XPL; ++q) {
        const int j = lane + 32 * q;
        e[q] = j < it.nT ? __ldg(lw + (size_t)it.b * T + it.t0 + j) : make_int2(-1, 0);
    }
}

// Warp-wide: the window [L, L+n) holding every interval of the item: from the smallest lo to one past the
// largest (n at most WMAX: a target beyond that reads global memory).
__device__ __forceinline__ void pairs_window(const int2 (&e)[XPL], int& L, int& n) {
    int mn = 0x7fffffff, mx = -1;
#pragma unroll
    for (int q = 0; q < XPL; ++q) {
        if (e[q].x >= 0) {
            mn = min(mn, e[q].x);
            mx = max(mx, e[q].x);
        }
    }
    L = warp_min(mn);
    n = min(warp_max(mx) + 2 - L, WMAX);
}
#endif


// Warp-wide: the smallest and the largest of the item's targets (fminf/fmaxf skip the NaN padding).
__device__ __forceinline__ void targets_range(const float (&x)[XPL], float& xmin, float& xmax) {
    xmin = __int_as_float(0x7f800000);
    xmax = -xmin;
#pragma unroll
    for (int q = 0; q < XPL; ++q) {
        xmin = fminf(xmin, x[q]);
        xmax = fmaxf(xmax, x[q]);
    }
    for (int o = 16; o > 0; o >>= 1) {
        xmin = fminf(xmin, __shfl_xor_sync(0xffffffffu, xmin, o));
        xmax = fmaxf(xmax, __shfl_xor_sync(0xffffffffu, xmax, o));
    }
}

// Warp-wide: the window [L, L+n) of source rows holding the intervals of all the item's targets: from the
// interval of the smallest target to one past that of the largest.
// hint: a row at or below the smallest target's interval, or -1; lb returns the largest target's interval.
__device__ __forceinline__ void item_window(const float* __restrict__ times, int S, const Item& it,
                                            const float (&x)[XPL], int hint, int& L, int& n, int& lb) {
    float xmin, xmax;
    targets_range(x, xmin, xmax);
    int la;
    warp_interval2_hint(times + (size_t)it.b * S, S, xmin, xmax, hint, la, lb);
    L = la;
    n = min(lb + 2 - la, WMAX);
}

#if PAIRS
// The (lo, w) pair of target x, given the window's source times pw[0 .. n) = times[L .. L+n), where L is at or
// below x's interval: lo = L + j, j = how many of pw[1 .. n-2] are <= x. A target at or past pw[n-1], when the
// row goes on beyond it, needs a row outside the window: a search of the whole row.
__device__ __forceinline__ int2 window_pair(const float* __restrict__ row, int S, int L, int n, const float* pw,
                                            float x) {
    int lo = 1, hi = n - 1;                                // the first index in [1, n-1) with pw > x, else n-1
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (pw[mid] <= x) lo = mid + 1; else hi = mid;
    }
    const int j = lo - 1;
    if (!(pw[n - 1] <= x && L + n - 1 <= S - 2)) return make_int2(L + j, __float_as_int(weight(pw[j], pw[j + 1], x)));
    const int g = find_interval(row, S, x);
    return make_int2(g, __float_as_int(weight(__ldg(row + g), __ldg(row + g + 1), x)));
}

// Warp-wide: the lanes copy the item's window of source times to pw, then each finds the pairs of its targets
// x[q] (lo = -1 past the item's end). Every lo is at least L: the window starts at the smallest target's interval.
__device__ __forceinline__ void producer_pairs(const float* __restrict__ times, int S, const Item& it, int L, int n,
                                               const float (&x)[XPL], float* pw, int2 (&e)[XPL]) {
    const int lane = threadIdx.x & 31;
    const float* row = times + (size_t)it.b * S;
    __syncwarp();                                          // (every lane is done with the last window's times)
    for (int r = lane; r < n; r += 32) pw[r] = __ldg(row + L + r);
    __syncwarp();
#pragma unroll
    for (int q = 0; q < XPL; ++q) {
        const int2 none = make_int2(-1, 0);
        e[q] = lane + 32 * q < it.nT ? window_pair(row, S, L, n, pw, x[q]) : none;
    }
}
#endif

#if SEARCH == 1
// Warp-wide (a block that does not wait for the prepass): the item's pairs found here. First the guess of
// stage 08's search: where the smallest target would sit if the row's times were evenly spread between its
// first and last (loaded with the targets); the OWN_ROWS times around it, one round of loads, are both the
// probes and the window. When they do not hold every target's interval, the search SEARCH 2 does.
__device__ __forceinline__ void own_pairs(const float* __restrict__ times, const float* __restrict__ targets, int S,
                                          int T, const Item& it, float* pw, int2 (&e)[XPL]) {
    const int lane = threadIdx.x & 31;
    const float* row = times + (size_t)it.b * S;
    float x[XPL];
    load_targets(targets, T, it, x);
    int L, n, lb;
    const float first = __ldg(row), last = __ldg(row + S - 1);
    float xmin, xmax;
    targets_range(x, xmin, xmax);
    const float at = fminf(fmaxf((xmin - first) / (last - first) * (float)(S - 1), 0.0f), (float)(S - 1));
    const int start = max(min((int)at - OWN_BACK, S - OWN_ROWS), 0);
    const int m = min(OWN_ROWS, S - start), end = min(start + m - 1, S - 1);   // probes: rows start .. end-1
    float v[OWN_ROWS / 32];
#pragma unroll
    for (int u = 0; u < OWN_ROWS / 32; ++u) v[u] = lane + 32 * u < m ? __ldg(row + start + lane + 32 * u) : 0.0f;
    int ca = 0, cb = 0;
    __syncwarp();                                          // (every lane is done with the last item's times)
#pragma unroll
    for (int u = 0; u < OWN_ROWS / 32; ++u) {
        const int r = lane + 32 * u;
        if (r < m) pw[r] = v[u];
        ca += __popc(__ballot_sync(0xffffffffu, r < end - start && v[u] <= xmin));
        cb += __popc(__ballot_sync(0xffffffffu, r < end - start && v[u] <= xmax));
    }
    __syncwarp();
    int la;
    if (probe_result(ca, start, end, S, la) && probe_result(cb, start, end, S, lb)) {
        L = la;
        n = min(lb + 2 - la, WMAX);
        const float* w = pw + (L - start);                 // times[L .. L+n)
#pragma unroll
        for (int q = 0; q < XPL; ++q)
            e[q] = lane + 32 * q < it.nT ? window_pair(row, S, L, n, w, x[q]) : make_int2(-1, 0);
        return;
    }
    item_window(times, S, it, x, -1, L, n, lb);
    producer_pairs(times, S, it, L, n, x, pw, e);
}
#endif

// ---------------------------------------------------------------------------- the streaming kernel
extern "C" __global__ void __launch_bounds__((NCW + 1) * 32)
resample_tma(const __grid_constant__ TmaDesc fmap, const __grid_constant__ TmaDesc tmap,
             const __grid_constant__ TmaDesc omap, const float* __restrict__ times,
             const u16* __restrict__ feats, const float* __restrict__ targets, u16* __restrict__ out,
             const int2* __restrict__ lw, int B, int S, int T, int D, int self_blocks) {
    extern __shared__ unsigned char smem_raw[];
    u32 have;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(have));
    if (have < SMEM_BYTES) __trap();                       // the host's layout disagrees with this one
    unsigned char* smem = smem_raw + ((128 - (smem_u32(smem_raw) & 127)) & 127);

    u16* fs = reinterpret_cast<u16*>(smem);
    int* hdr = reinterpret_cast<int*>(smem + OFF_HDR);
    const u32 full0 = smem_u32(smem + OFF_BAR), empty0 = full0 + 8 * STAGES;

    const int ntc = (T + TW - 1) / TW, ndc = (D + DC - 1) / DC;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8 * s, 32);                  // the producer warp's 32 lanes arrive
            mbar_init(empty0 + 8 * s, NCT);                // every consumer thread arrives
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");   // visible to the TMA unit
    }
    __syncthreads();

    if (warp == 0) {
        // ------------------------------------------------------------ producer
        if (lane == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(&fmap)) : "memory");
            if (TIMES_TMA) asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(&tmap)) : "memory");
        }
        Walk w = walk_start(B, T);
        Item it;
        bool more = walk_item(w, B, T, ntc, ndc, it);
#if SEARCH == 1
        int2 e[XPL], enext[XPL];                           // this item's (lo, w) pairs; the next item's
        float* pw = reinterpret_cast<float*>(smem + OFF_PW);
        const bool own = blockIdx.x < self_blocks;         // (PDL) this block finds its pairs itself
        if (own) {
            if (more) own_pairs(times, targets, S, T, it, pw, e);
        } else {
#if __CUDA_ARCH__ >= 900
            asm volatile("griddepcontrol.wait;" ::: "memory");  // (PDL) from here on the prepass has finished
#endif
            if (more) load_pairs(lw, T, it, e);
        }
#else
        float x[XPL], xnext[XPL];                          // this item's targets; the next item's
        if (more) load_targets(targets, T, it, x);
        int prev_lb = -1;
#if SEARCH == 2
        int2 e[XPL];                                       // this item's (lo, w) pairs
        float* pw = reinterpret_cast<float*>(smem + OFF_PW);
#endif
#endif
        int prev_b = -1, prev_t0 = -1, L = 0, n = 2, k = 0;
        for (; more; ++k) {
            Walk wn = w;
            walk_next(wn, it, ndc);
            Item nx;
            const bool next = walk_item(wn, B, T, ntc, ndc, nx);
#if SEARCH == 1
            if (next && own) own_pairs(times, targets, S, T, nx, pw, enext);
            else if (next) load_pairs(lw, T, nx, enext);   // in flight meanwhile
            if (it.b != prev_b || it.t0 != prev_t0) pairs_window(e, L, n);   // (same targets, next channel chunk: same window)
#else
            if (next) load_targets(targets, T, nx, xnext); // in flight meanwhile
            if (it.b != prev_b || it.t0 != prev_t0) {      // (same targets, next channel chunk: same window)
                int lb;
                item_window(times, S, it, x, it.b == prev_b ? prev_lb : -1, L, n, lb);
                prev_lb = lb;
#if SEARCH == 2
                producer_pairs(times, S, it, L, n, x, pw, e);
#endif
            }
#endif
            prev_b = it.b;
            prev_t0 = it.t0;
            const int s = k % STAGES;
            mbar_wait(empty0 + 8 * s, ((k / STAGES) & 1) ^ 1);   // the consumers have finished with this stage
#if PAIRS
            int2* xs = reinterpret_cast<int2*>(smem + OFF_XS + s * XS_BYTES);
#pragma unroll
            for (int q = 0; q < XPL; ++q)
                if (lane + 32 * q < it.nT) xs[lane + 32 * q] = e[q];
#else
            float* xs = reinterpret_cast<float*>(smem + OFF_XS + s * XS_BYTES);
#pragma unroll
            for (int q = 0; q < XPL; ++q)
                if (lane + 32 * q < it.nT) xs[lane + 32 * q] = x[q];
            float* wts = reinterpret_cast<float*>(smem + OFF_WT);
#if !TIMES_TMA
            for (int r = lane; r < n; r += 32) wts[s * (WT_BYTES / 4) + (L & 3) + r] = __ldg(times + (size_t)it.b * S + L + r);
#endif
#endif
            const u32 full = full0 + 8 * s;
            if (lane == 0) {
                int* h = hdr + 8 * s;
                h[0] = L;
                h[1] = n;
                h[2] = it.b;
                h[3] = it.t0;
                h[4] = it.nT;
                h[5] = it.d0;
                // >>> lab: announce the bytes that will land on the stage's "full" barrier, then issue one TMA copy per box of BOXR window rows
                const int nbox = (n + BOXR - 1) / BOXR;
                // boxes past row S-1 are zero-filled and still count their bytes
                mbar_expect_tx(full, nbox * BOX_BYTES + (TIMES_TMA ? WT_ROWS * 4 : 0));
                const u32 dst = smem_u32(fs) + s * FS_BYTES;
                for (int r = 0; r < nbox; ++r)
                    tma_load_3d(dst + r * BOX_BYTES, &fmap, full, it.d0, L + r * BOXR, it.b);
                // <<< lab
#if TIMES_TMA
                tma_load_2d(smem_u32(wts) + s * WT_BYTES, &tmap, full, L & ~3, it.b);   // 16-byte aligned start
#endif
            } else {
                mbar_arrive(full);                         // (after this lane's stores to the stage)
            }
#pragma unroll
            for (int q = 0; q < XPL; ++q) {
#if SEARCH == 1
                e[q] = enext[q];
#else
                x[q] = xnext[q];
#endif
            }
            it = nx;
            w = wn;
            more = next;
        }
        // the end: one more stage whose header holds no item (nT = 0); the consumers stop when they read it
        const int s = k % STAGES;
        mbar_wait(empty0 + 8 * s, ((k / STAGES) & 1) ^ 1);
        if (lane == 0) hdr[8 * s + 4] = 0;
        mbar_arrive(full0 + 8 * s);                        // 32 arrivals and no bytes complete the phase
    } else {
        // ------------------------------------------------------------ consumers
        const int ct = threadIdx.x - 32;
        int tiles = 0;                                     // (OUT_TMA) tiles stored so far: picks the tile buffer
        for (int k = 0;; ++k) {
            const int s = k % STAGES;
            mbar_wait(full0 + 8 * s, (k / STAGES) & 1);    // the window has landed in stage s
            const int* h = hdr + 8 * s;                    // which item, and its window [L, L+n)
            Item it;
            it.nT = h[4];
            if (it.nT == 0) break;                         // the producer has no more
            it.b = h[2];
            it.t0 = h[3];
            it.d0 = h[5];
            const int L = h[0], n = h[1];
#if PAIRS
            const int2* pairs = reinterpret_cast<const int2*>(smem + OFF_XS + s * XS_BYTES);
#else
            const int buf = k & 1;                         // two buffers: one barrier an item is enough
            const float* wt = reinterpret_cast<const float*>(smem + OFF_WT) + s * (WT_BYTES / 4) + (L & 3);   // times[L .. L+n)
            const float* xs = reinterpret_cast<const float*>(smem + OFF_XS + s * XS_BYTES);
            int* lo_of = reinterpret_cast<int*>(smem + OFF_MLO + buf * MB_BYTES);
            float* w_of = reinterpret_cast<float*>(smem + OFF_MW + buf * MB_BYTES);
            const float* row = times + (size_t)it.b * S;
            for (int i = ct; i < it.nT; i += NCT) {        // each target's interval, inside the window
                const float x = xs[i];
                const int j = window_interval(wt, n, L, S, x);
                if (j >= 0) {
                    lo_of[i] = L + j;
                    w_of[i] = weight(wt[j], wt[j + 1], x);
                } else {                                   // not in the window: search the whole row
                    const int g = find_interval(row, S, x);
                    lo_of[i] = g;
                    w_of[i] = weight(__ldg(row + g), __ldg(row + g + 1), x);
                }
            }
            consumers_sync();
#endif
            const u16* stage = fs + s * (FS_BYTES / 2);
            const u16* fb = feats + (size_t)it.b * S * D;
            // (OUT_TMA) a whole tile of TW rows, or the last rows of the batch row (the store clips at T); a
            // shorter run ends a block's share in mid-row, and its neighbour owns the rows after it
            const bool to_tile = OUT_TMA && (it.nT == TW || it.t0 + it.nT == T);
            u16* tile = reinterpret_cast<u16*>(smem + OFF_OT + (tiles & 1) * OT_BYTES);
            if (to_tile) {                                 // the store that last read this buffer is done
                if (ct == 0) bulk_wait_read<1>();
                consumers_sync();
            }
            for (int idx = ct; idx < it.nT * VPR; idx += NCT) {
                const int i = idx / VPR, v = idx - i * VPR, d = it.d0 + v * 8;
                if (d < D) {
#if PAIRS
                    const int2 pr = pairs[i];
                    const int lo = pr.x;
                    const float wi = __int_as_float(pr.y);
#else
                    const int lo = lo_of[i];
                    const float wi = w_of[i];
#endif
                    const int j = lo - L;                  // the interval's first row, in the window
                    uint4 a, c;
                    if (j >= 0 && j + 1 < n) {
                        a = *reinterpret_cast<const uint4*>(stage + j * DC + v * 8);
                        c = *reinterpret_cast<const uint4*>(stage + (j + 1) * DC + v * 8);
                    } else {                               // not in the window: global memory
                        a = __ldg(reinterpret_cast<const uint4*>(fb + (size_t)lo * D + d));
                        c = __ldg(reinterpret_cast<const uint4*>(fb + (size_t)(lo + 1) * D + d));
                    }
                    const uint4 r = lerp_vec(a, c, wi);
                    if (to_tile) *reinterpret_cast<uint4*>(tile + i * DC + v * 8) = r;
                    else store_out(out + ((size_t)it.b * T + it.t0 + i) * D + d, r);
                }
            }
            mbar_arrive(empty0 + 8 * s);                   // stage s may be refilled
            if (to_tile) {
                fence_proxy_async();                       // the tile's stores, visible to the TMA unit
                consumers_sync();
                if (ct == 0) {
                    tma_store_3d(&omap, smem_u32(tile), it.d0, it.t0, it.b);   // rows past T, columns past D: clipped
                    bulk_commit();
                }
                ++tiles;
            }
        }
        if (OUT_TMA && ct == 0) bulk_wait<0>();
    }
}
