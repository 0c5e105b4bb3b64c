// 06 cp.async pipeline (sm_80 and newer).
//
// A work item is a run of TW consecutive targets of one batch row (and DC channels of them). Sorted targets
// need only a short window of consecutive source rows, so the block copies that window of feature rows (and
// its source times) into shared memory with cp.async, STAGES items deep, and interpolates from there.
//
//   fill(j): warp 0 loads item j's targets, and finds the window [L, L+n) of source rows that holds their
//            intervals (a warp-wide search); then every thread issues cp.async copies of the window's feature
//            rows (16 bytes each) and source times (4 bytes each) into stage j % STAGES, and commits them as one
//            group.
//   loop:    fill(k + STAGES - 1); wait until item k's group has landed (cp.async.wait_group STAGES-1);
//            find each target's interval inside the window (shared memory); interpolate; 16-byte stores.
//
// A persistent grid: each block walks a contiguous run of items (CONTIG: consecutive items are neighbouring
// targets, so each window search starts where the last window ended, one round of probes) or every
// gridDim.x-th item.
// Targets whose interval is not inside the window (unsorted targets, or a window wider than WMAX rows) are
// still right: they take their rows from global memory (slower, never wrong).
//
// Compile-time constants (NVRTC -D): TW targets per item, WMAX window rows, STAGES pipeline depth, NT threads,
// DC channels per item, VEC channels per copy (8 = 16 bytes; 4 and 2 for rows that are not whole 16-byte
// chunks), CONTIG (0/1), BF16_CVT (resample_common.cuh: round with cvt.rn.bf16x2.f32, 0/1).
#include "resample_common.cuh"

#ifndef TW
#define TW 32
#endif
#ifndef WMAX
#define WMAX 48
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef NT
#define NT 256
#endif
#ifndef DC
#define DC 256
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef CONTIG
#define CONTIG 1
#endif

#define VPR (DC / VEC)                      // vectors per row of the chunk
#define R16(x) (((x) + 15) / 16 * 16)

// Shared-memory layout (bytes). cudabook/resample/s06_cp_async.py:smem_bytes() mirrors SMEM_BYTES.
constexpr int FS_BYTES = R16(WMAX * DC * 2);   // one stage of feature rows
constexpr int WT_BYTES = R16(WMAX * 4);        // one stage of source times
constexpr int XS_BYTES = R16(TW * 4);          // one stage of targets
constexpr int OFF_WT = STAGES * FS_BYTES;
constexpr int OFF_XS = OFF_WT + STAGES * WT_BYTES;
constexpr int OFF_HDR = OFF_XS + STAGES * XS_BYTES;
constexpr int OFF_MLO = OFF_HDR + R16(STAGES * 8);
constexpr int OFF_MW = OFF_MLO + XS_BYTES;
constexpr int SMEM_BYTES = OFF_MW + XS_BYTES;
#ifdef EXPECT_SMEM   // the host's mirror of this layout (tests compile with it)
static_assert(SMEM_BYTES == EXPECT_SMEM, "smem_bytes() in the stage module disagrees with SMEM_BYTES");
#endif

static_assert(DC % VEC == 0, "DC must be a multiple of VEC");
static_assert(WMAX >= 2 && STAGES >= 2 && NT % 32 == 0, "bad configuration");

template <int V> struct VecOf;
template <> struct VecOf<8> { typedef uint4 T; };
template <> struct VecOf<4> { typedef uint2 T; };
template <> struct VecOf<2> { typedef u32 T; };
typedef VecOf<VEC>::T vec_t;

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// cp.async: copy BYTES from global to shared memory without passing through registers. 16-byte copies may
// bypass L1 (.cg); 4- and 8-byte ones must go through it (.ca).
template <int BYTES> __device__ __forceinline__ void cp_async(u32 dst, const void* src) {
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(src), "n"(BYTES) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#include "resample_items.cuh"            // Item, decode(), XPL, load_targets()


// The item this block handles at its step j, or nitems when it has no more.
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

// What warp 0 remembers between items: the last window, and the batch row and first target it was for.
struct Window { int b, t0, L, n, lb; };

// Warp-wide: store the item's targets to xs, and find the window [L, L+n) of source rows that holds the
// intervals of all of them: from the interval of the smallest target to one past that of the largest
// (fminf/fmaxf skip the NaN padding). The next item of the same row starts its search at the last one's end.
__device__ __forceinline__ void item_window(const float* __restrict__ times, int S, const Item& it,
                                            const float (&x)[XPL], float* xs, Window& win) {
    const int lane = threadIdx.x & 31;
    float xmin = __int_as_float(0x7f800000), xmax = -xmin;
#pragma unroll
    for (int q = 0; q < XPL; ++q) {
        if (lane + 32 * q < it.nT) xs[lane + 32 * q] = x[q];
        xmin = fminf(xmin, x[q]);
        xmax = fmaxf(xmax, x[q]);
    }
    if (it.b == win.b && it.t0 == win.t0) return;         // another channel chunk of the same targets
    for (int o = 16; o > 0; o >>= 1) {
        xmin = fminf(xmin, __shfl_xor_sync(0xffffffffu, xmin, o));
        xmax = fmaxf(xmax, __shfl_xor_sync(0xffffffffu, xmax, o));
    }
    int la, lb;
    warp_interval2_hint(times + (size_t)it.b * S, S, xmin, xmax, it.b == win.b ? win.lb : -1, la, lb);
    win.b = it.b;
    win.t0 = it.t0;
    win.L = la;
    win.n = min(lb + 2 - la, WMAX);
    win.lb = lb;
}

__device__ __forceinline__ vec_t ldg_vec(const u16* p) { return __ldg(reinterpret_cast<const vec_t*>(p)); }

// Start the copies of the item this block meets at step j, into stage j % STAGES (all threads call it).
// x: warp 0's registers holding item j's targets; on return, item j+1's (their loads still in flight).
__device__ __forceinline__ void fill(int j, int nitems, int ntc, int ndc, const float* __restrict__ times,
                                     const u16* __restrict__ feats, const float* __restrict__ targets,
                                     int S, int T, int D, unsigned char* smem, float (&x)[XPL], Window& win) {
    const int tid = threadIdx.x, item = block_item(j, nitems), s = j % STAGES;
    int* hdr = reinterpret_cast<int*>(smem + OFF_HDR);
    if (item < nitems && tid < 32) {
        const Item it = decode(item, ntc, ndc, T);
        const int next = block_item(j + 1, nitems);
        float xnext[XPL];
        if (next < nitems) load_targets(targets, T, decode(next, ntc, ndc, T), xnext);
        item_window(times, S, it, x, reinterpret_cast<float*>(smem + OFF_XS + s * XS_BYTES), win);
        if (tid == 0) { hdr[2 * s] = win.L; hdr[2 * s + 1] = win.n; }
#pragma unroll
        for (int q = 0; q < XPL; ++q) x[q] = xnext[q];
    }
    __syncthreads();                                       // the window is known to every thread
    if (item < nitems) {
        Item it = decode(item, ntc, ndc, T);
        const int L = hdr[2 * s], n = hdr[2 * s + 1];
        const float* tsrc = times + (size_t)it.b * S + L;
        const u32 tdst = smem_addr(smem + OFF_WT + s * WT_BYTES);
        for (int r = tid; r < n; r += NT) cp_async<4>(tdst + 4 * r, tsrc + r);
        const u16* src = feats + ((size_t)it.b * S + L) * D + it.d0;
        const u32 dst = smem_addr(smem + s * FS_BYTES);
        for (int c = tid; c < n * VPR; c += NT) {
            int r = c / VPR, v = c - r * VPR;
            if (it.d0 + v * VEC < D) cp_async<VEC * 2>(dst + 2 * (r * DC + v * VEC), src + (size_t)r * D + v * VEC);
        }
    }
    cp_async_commit();                                     // one group per item (empty past the end)
}

extern "C" __global__ void __launch_bounds__(NT)
resample_cp_async(const float* __restrict__ times, const u16* __restrict__ feats,
                  const float* __restrict__ targets, u16* __restrict__ out, int B, int S, int T, int D) {
    extern __shared__ __align__(16) unsigned char smem[];
    u32 have;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(have));
    if (have < SMEM_BYTES) __trap();                       // the host's layout disagrees with this one

    u16* fs = reinterpret_cast<u16*>(smem);
    float* wts = reinterpret_cast<float*>(smem + OFF_WT);
    float* xs = reinterpret_cast<float*>(smem + OFF_XS);
    int* hdr = reinterpret_cast<int*>(smem + OFF_HDR);
    int* mlo = reinterpret_cast<int*>(smem + OFF_MLO);
    float* mw = reinterpret_cast<float*>(smem + OFF_MW);

    const int ntc = (T + TW - 1) / TW, ndc = (D + DC - 1) / DC, nitems = B * ntc * ndc;
    const int tid = threadIdx.x;

    float x[XPL];                                          // warp 0: the next item's targets
    Window win = {-1, -1, 0, 2, -1};                       // warp 0: the last window
    if (tid < 32 && block_item(0, nitems) < nitems) load_targets(targets, T, decode(block_item(0, nitems), ntc, ndc, T), x);
    for (int j = 0; j < STAGES - 1; ++j) fill(j, nitems, ntc, ndc, times, feats, targets, S, T, D, smem, x, win);
    for (int k = 0; block_item(k, nitems) < nitems; ++k) {
        // >>> lab: keep STAGES-1 items in flight: start the copies of item k + STAGES - 1, then wait until item k's copies have landed, this thread's and everyone's
        fill(k + STAGES - 1, nitems, ntc, ndc, times, feats, targets, S, T, D, smem, x, win);  // (its barrier frees the stage)
        cp_async_wait<STAGES - 1>();                       // this thread's copies for item k have landed...
        __syncthreads();                                   // ...and so have everyone else's
        // <<< lab

        const int s = k % STAGES;
        const Item it = decode(block_item(k, nitems), ntc, ndc, T);
        const int L = hdr[2 * s], n = hdr[2 * s + 1];
        const float* wt = wts + s * (WT_BYTES / 4);
        const float* row = times + (size_t)it.b * S;
        for (int i = tid; i < it.nT; i += NT) {            // each target's interval, inside the window
            float x = xs[s * (XS_BYTES / 4) + i];
            int j = window_interval(wt, n, L, S, x);
            if (j >= 0) {
                mlo[i] = j;
                mw[i] = weight(wt[j], wt[j + 1], x);
            } else {                                       // not in the window: search the whole row
                int g = find_interval(row, S, x);
                mlo[i] = -1 - g;
                mw[i] = weight(__ldg(row + g), __ldg(row + g + 1), x);
            }
        }
        __syncthreads();

        const u16* stage = fs + s * (FS_BYTES / 2);
        const u16* fb = feats + (size_t)it.b * S * D;
        u16* ob = out + ((size_t)it.b * T + it.t0) * D;
        for (int idx = tid; idx < it.nT * VPR; idx += NT) {
            const int i = idx / VPR, v = idx - i * VPR, d = it.d0 + v * VEC;
            if (d < D) {
                const int lo = mlo[i];
                const float w = mw[i];
                vec_t a, c;
                if (lo >= 0) {
                    a = *reinterpret_cast<const vec_t*>(stage + lo * DC + v * VEC);
                    c = *reinterpret_cast<const vec_t*>(stage + (lo + 1) * DC + v * VEC);
                } else {
                    const int g = -1 - lo;
                    a = ldg_vec(fb + (size_t)g * D + d);
                    c = ldg_vec(fb + (size_t)(g + 1) * D + d);
                }
                *reinterpret_cast<vec_t*>(ob + (size_t)i * D + d) = lerp_vec(a, c, w);
            }
        }
    }
    cp_async_wait<0>();
}
