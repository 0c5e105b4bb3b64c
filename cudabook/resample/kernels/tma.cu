// 07 TMA bulk tensor copies (sm_90: Hopper).
//
// The same work items as 06 (TW consecutive targets of one batch row, DC channels), but the copies are made
// by the Tensor Memory Accelerator: one thread asks for a whole box of feature rows with one instruction
// (cp.async.bulk.tensor), described by a tensor map that the host built with cuTensorMapEncodeTiled over
// feats viewed as [B, S, D] bf16, box = (1, BOXR rows, DC channels). A second map over times [B, S] float32
// brings the window's source times the same way (when S % 4 == 0: TMA rows must be whole 16-byte chunks).
//
// Warp specialisation:
//   warp 0 (producer): for each item, find the window [L, L+n) of source rows its targets need (a warp-wide
//     search; with sorted targets and consecutive items, one round of probes from the previous window), wait
//     until the stage is free (mbarrier "empty"), put the item's targets in the stage, and have one elected
//     lane announce how many bytes will land (mbarrier.arrive.expect_tx) and issue the box copies; they
//     complete on the stage's "full" mbarrier.
//   warps 1..NCW (consumers): wait on "full" (try_wait.parity with the phase bit), find each target's interval
//     inside the window, interpolate from shared memory, store 16 bytes a thread (or, with OUT_TMA, write a
//     tile to shared memory and let one thread TMA-store it), and arrive on "empty" so the producer can
//     refill the stage. Everything a consumer reads comes from shared memory.
// STAGES stages form a ring; a persistent grid walks the items (each block a contiguous run of them with
// CONTIG, or every gridDim.x-th). Targets whose interval is not inside the window (unsorted targets, a
// window wider than WMAX rows) read their rows from global memory: slower, never wrong.
//
// Compile-time constants (NVRTC -D): TW, WMAX (a multiple of BOXR and of 4, at most 252), BOXR, STAGES, NCW consumer
// warps, DC (a multiple of 8, at most 256), OUT_TMA, ST_CS (streaming stores), CONTIG, TIMES_TMA (0/1 each).
#include "resample_common.cuh"

#ifndef TW
#define TW 32
#endif
#ifndef WMAX
#define WMAX 48
#endif
#ifndef BOXR
#define BOXR 8
#endif
#ifndef STAGES
#define STAGES 4
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
#ifndef CONTIG
#define CONTIG 1
#endif
#ifndef TIMES_TMA
#define TIMES_TMA 1
#endif

#define NCT (NCW * 32)                      // consumer threads
#define VPR (DC / 8)                        // 16-byte vectors per row of the chunk
#define R16(x) (((x) + 15) / 16 * 16)

// Shared-memory layout (bytes, from a 128-byte aligned base). s07_tma.py:smem_bytes() mirrors SMEM_BYTES.
constexpr int BOX_BYTES = BOXR * DC * 2;
constexpr int FS_BYTES = WMAX * DC * 2;                    // one stage of feature rows
constexpr int OT_BYTES = OUT_TMA ? TW * DC * 2 : 0;        // one output tile (TMA store)
// One stage of source times (a TMA destination). A TMA read must start at a 16-byte aligned address, so the
// times box starts at row L rounded down to a multiple of 4 (the window's times then begin at L % 4) and is
// 4 rows longer than the window.
constexpr int WT_ROWS = WMAX + 4;
constexpr int WT_BYTES = (WT_ROWS * 4 + 127) / 128 * 128;
constexpr int XS_BYTES = R16(TW * 4);                      // one stage of targets; also one buffer of lo, w
constexpr int OFF_OT = STAGES * FS_BYTES;
constexpr int OFF_WT = OFF_OT + 2 * OT_BYTES;
constexpr int OFF_XS = OFF_WT + STAGES * WT_BYTES;
constexpr int OFF_MLO = OFF_XS + STAGES * XS_BYTES;
constexpr int OFF_MW = OFF_MLO + 2 * XS_BYTES;
constexpr int OFF_HDR = OFF_MW + 2 * XS_BYTES;
constexpr int OFF_BAR = OFF_HDR + R16(STAGES * 8);
constexpr int SMEM_BYTES = OFF_BAR + 2 * STAGES * 8 + 128; // + slack to align the base to 128 bytes
#ifdef EXPECT_SMEM   // the host's mirror of this layout (tests compile with it)
static_assert(SMEM_BYTES == EXPECT_SMEM, "smem_bytes() in the stage module disagrees with SMEM_BYTES");
#endif

static_assert(DC % 8 == 0 && DC <= 256, "DC: a multiple of 8 channels, at most 256 (the TMA box limit)");
static_assert(WMAX % BOXR == 0 && WMAX % 4 == 0 && WT_ROWS <= 256, "WMAX: a multiple of BOXR and of 4, at most 252");
static_assert(BOX_BYTES % 128 == 0, "each box must start 128-byte aligned in shared memory");
static_assert(TW % 8 == 0 && TW <= 256, "TW: a multiple of 8, at most 256");
static_assert(NCT >= 32 && STAGES >= 2, "bad configuration");

// The 128-byte CUtensorMap, passed by value as a __grid_constant__ kernel parameter (so it lives in the
// constant parameter space and has an address the TMA unit can read). cuda.h cannot be included under NVRTC.
struct __align__(64) TensorMap { u64 opaque[16]; };

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// ---------------------------------------------------------------------------- mbarriers
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Wait until the phase with this parity has completed (parity = how many times the barrier has completed,
// mod 2). A phase that completed before the current one counts as completed: waiting on parity 1 of a fresh
// barrier returns at once, which is how the producer's first pass through the ring needs no special case.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

// ---------------------------------------------------------------------------- TMA
__device__ __forceinline__ void tma_load_3d(u32 dst, const TensorMap* map, int c0, int c1, int c2, u32 bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n"
                 ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_2d(u32 dst, const TensorMap* map, int c0, int c1, u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_store_3d(const TensorMap* map, u32 src, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 ::"l"(reinterpret_cast<u64>(map)), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// Ordinary stores to shared memory must be made visible to the async proxy (the TMA unit) before it reads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// A barrier for the consumer warps only (barrier 0 is __syncthreads).
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(NCT) : "memory"); }

__device__ __forceinline__ void store_out(u16* p, uint4 v) {
#if ST_CS
    __stcs(reinterpret_cast<uint4*>(p), v);
#else
    *reinterpret_cast<uint4*>(p) = v;
#endif
}

// ---------------------------------------------------------------------------- work items
struct Item { int b, t0, nT, d0; };

__device__ __forceinline__ Item decode(int item, int ntc, int ndc, int T) {
    Item it;
    int dc = item % ndc, r = item / ndc, tc = r % ntc;
    it.b = r / ntc;
    it.t0 = tc * TW;
    it.nT = min(TW, T - it.t0);
    it.d0 = dc * DC;
    return it;
}

#define XPL ((TW + 31) / 32)                // targets per producer lane

// Warp-wide: lane j loads targets j, j + 32, ... of the item (NaN past its end). Issued one item ahead, so the
// loads are in flight while the warp works on the current item.
__device__ __forceinline__ void load_targets(const float* __restrict__ targets, int T, const Item& it, float (&x)[XPL]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int q = 0; q < XPL; ++q) {
        const int j = lane + 32 * q;
        x[q] = j < it.nT ? __ldg(targets + (size_t)it.b * T + it.t0 + j) : __int_as_float(0x7fc00000);
    }
}

// The item this block handles at its step j, or nitems when it has no more: a contiguous run of items per
// block (CONTIG: consecutive items are neighbouring targets, so each window starts where the last one ended)
// or every gridDim.x-th item.
__device__ __forceinline__ int block_item(int j, int nitems) {
#if CONTIG
    const long long first = (long long)nitems * blockIdx.x / gridDim.x;
    const long long last = (long long)nitems * (blockIdx.x + 1) / gridDim.x;
    return first + j < last ? (int)(first + j) : nitems;
#else
    const long long item = blockIdx.x + (long long)j * gridDim.x;
    return item < nitems ? (int)item : nitems;
#endif
}

// Warp-wide: the window [L, L+n) of source rows holding the intervals of all the item's targets: from the
// interval of the smallest target to one past that of the largest (fminf/fmaxf skip the NaN padding).
// hint: a row at or below the smallest target's interval, or -1; lb returns the largest target's interval.
__device__ __forceinline__ void item_window(const float* __restrict__ times, int S, const Item& it,
                                            const float (&x)[XPL], int hint, int& L, int& n, int& lb) {
    float xmin = __int_as_float(0x7f800000), xmax = -xmin;
#pragma unroll
    for (int q = 0; q < XPL; ++q) {
        xmin = fminf(xmin, x[q]);
        xmax = fmaxf(xmax, x[q]);
    }
    for (int o = 16; o > 0; o >>= 1) {
        xmin = fminf(xmin, __shfl_xor_sync(0xffffffffu, xmin, o));
        xmax = fmaxf(xmax, __shfl_xor_sync(0xffffffffu, xmax, o));
    }
    int la;
    warp_interval2_hint(times + (size_t)it.b * S, S, xmin, xmax, hint, la, lb);
    L = la;
    n = min(lb + 2 - la, WMAX);
}

extern "C" __global__ void __launch_bounds__((NCW + 1) * 32)
resample_tma(const __grid_constant__ TensorMap fmap, const __grid_constant__ TensorMap tmap,
             const __grid_constant__ TensorMap omap, const float* __restrict__ times,
             const u16* __restrict__ feats, const float* __restrict__ targets, u16* __restrict__ out,
             int B, int S, int T, int D) {
    extern __shared__ unsigned char smem_raw[];
    u32 have;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(have));
    if (have < SMEM_BYTES) __trap();                       // the host's layout disagrees with this one
    unsigned char* smem = smem_raw + ((128 - (smem_addr(smem_raw) & 127)) & 127);

    u16* fs = reinterpret_cast<u16*>(smem);
    float* wts = reinterpret_cast<float*>(smem + OFF_WT);
    float* xss = reinterpret_cast<float*>(smem + OFF_XS);
    int* mlo = reinterpret_cast<int*>(smem + OFF_MLO);
    float* mw = reinterpret_cast<float*>(smem + OFF_MW);
    int* hdr = reinterpret_cast<int*>(smem + OFF_HDR);
    const u32 full0 = smem_addr(smem + OFF_BAR), empty0 = full0 + 8 * STAGES;

    const int ntc = (T + TW - 1) / TW, ndc = (D + DC - 1) / DC, nitems = B * ntc * ndc;
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
        // >>> lab: producer: find the item's window, wait for a free stage, expect its bytes, issue the box copies
        if (lane == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(&fmap)) : "memory");
            if (TIMES_TMA) asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(&tmap)) : "memory");
        }
        float x[XPL], xnext[XPL];
        int item = block_item(0, nitems);
        if (item < nitems) load_targets(targets, T, decode(item, ntc, ndc, T), x);
        int prev_b = -1, prev_t0 = -1, prev_lb = -1, L = 0, n = 2;
        for (int k = 0; item < nitems; ++k) {
            const int next = block_item(k + 1, nitems);
            const Item it = decode(item, ntc, ndc, T);
            if (next < nitems) load_targets(targets, T, decode(next, ntc, ndc, T), xnext);   // in flight meanwhile
            if (it.b != prev_b || it.t0 != prev_t0) {      // (another channel chunk of the same targets: same window)
                int lb;
                item_window(times, S, it, x, it.b == prev_b ? prev_lb : -1, L, n, lb);
                prev_b = it.b;
                prev_t0 = it.t0;
                prev_lb = lb;
            }
            const int s = k % STAGES;
            mbar_wait(empty0 + 8 * s, ((k / STAGES) & 1) ^ 1);   // the consumers have finished with this stage
            float* xs = xss + s * (XS_BYTES / 4);
#pragma unroll
            for (int q = 0; q < XPL; ++q)
                if (lane + 32 * q < it.nT) xs[lane + 32 * q] = x[q];
#if !TIMES_TMA
            for (int r = lane; r < n; r += 32) wts[s * (WT_BYTES / 4) + (L & 3) + r] = __ldg(times + (size_t)it.b * S + L + r);
#endif
            const u32 full = full0 + 8 * s;
            if (lane == 0) {
                hdr[2 * s] = L;
                hdr[2 * s + 1] = n;
                const int nbox = (n + BOXR - 1) / BOXR;
                // boxes past row S-1 are zero-filled and still count their bytes
                mbar_arrive_expect_tx(full, nbox * BOX_BYTES + (TIMES_TMA ? WT_ROWS * 4 : 0));
                const u32 dst = smem_addr(fs) + s * FS_BYTES;
                for (int r = 0; r < nbox; ++r)
                    tma_load_3d(dst + r * BOX_BYTES, &fmap, it.d0, L + r * BOXR, it.b, full);
#if TIMES_TMA
                tma_load_2d(smem_addr(wts) + s * WT_BYTES, &tmap, L & ~3, it.b, full);   // 16-byte aligned start
#endif
            } else {
                mbar_arrive(full);                         // (after this lane's stores to the stage)
            }
#pragma unroll
            for (int q = 0; q < XPL; ++q) x[q] = xnext[q];
            item = next;
        }
        // <<< lab
    } else {
        // ------------------------------------------------------------ consumers
        const int ct = threadIdx.x - 32;
        int item = block_item(0, nitems);
        for (int k = 0; item < nitems; item = block_item(++k, nitems)) {
            const int s = k % STAGES, buf = k & 1;
            const Item it = decode(item, ntc, ndc, T);
            mbar_wait(full0 + 8 * s, (k / STAGES) & 1);    // the window has landed in stage s
            const int L = hdr[2 * s], n = hdr[2 * s + 1];
            const float* wt = wts + s * (WT_BYTES / 4) + (L & 3);   // times[L .. L+n)
            const float* xs = xss + s * (XS_BYTES / 4);
            int* lo_of = mlo + buf * (XS_BYTES / 4);       // two buffers: one barrier an item is enough
            float* w_of = mw + buf * (XS_BYTES / 4);
            const float* row = times + (size_t)it.b * S;
            for (int i = ct; i < it.nT; i += NCT) {        // each target's interval, inside the window
                const float x = xs[i];
                const int j = window_interval(wt, n, L, S, x);
                if (j >= 0) {
                    lo_of[i] = j;
                    w_of[i] = weight(wt[j], wt[j + 1], x);
                } else {                                   // not in the window: search the whole row
                    const int g = find_interval(row, S, x);
                    lo_of[i] = -1 - g;
                    w_of[i] = weight(__ldg(row + g), __ldg(row + g + 1), x);
                }
            }
            consumers_sync();
            const u16* stage = fs + s * (FS_BYTES / 2);
            const u16* fb = feats + (size_t)it.b * S * D;
#if OUT_TMA
            u16* tile = reinterpret_cast<u16*>(smem + OFF_OT + buf * OT_BYTES);
#endif
            for (int idx = ct; idx < it.nT * VPR; idx += NCT) {
                const int i = idx / VPR, v = idx - i * VPR, d = it.d0 + v * 8;
                if (d < D) {
                    const int lo = lo_of[i];
                    const float w = w_of[i];
                    uint4 a, c;
                    if (lo >= 0) {
                        a = *reinterpret_cast<const uint4*>(stage + lo * DC + v * 8);
                        c = *reinterpret_cast<const uint4*>(stage + (lo + 1) * DC + v * 8);
                    } else {
                        const int g = -1 - lo;
                        a = __ldg(reinterpret_cast<const uint4*>(fb + (size_t)g * D + d));
                        c = __ldg(reinterpret_cast<const uint4*>(fb + (size_t)(g + 1) * D + d));
                    }
#if OUT_TMA
                    *reinterpret_cast<uint4*>(tile + i * DC + v * 8) = lerp_vec(a, c, w);
#else
                    store_out(out + ((size_t)it.b * T + it.t0 + i) * D + d, lerp_vec(a, c, w));
#endif
                }
            }
            mbar_arrive(empty0 + 8 * s);                   // stage s may be refilled
#if OUT_TMA
            fence_proxy_async();                           // the tile's stores, visible to the TMA unit
            consumers_sync();
            if (ct == 0) {
                tma_store_3d(&omap, smem_addr(tile), it.d0, it.t0, it.b);   // rows past T, columns past D: clipped
                bulk_commit();
                bulk_wait_read<1>();                       // the store before this one has read its tile
            }
#endif
        }
#if OUT_TMA
        if (ct == 0) bulk_wait<0>();
#endif
    }
}
