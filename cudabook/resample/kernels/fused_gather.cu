// fused_gather.cu: stage 08, searching and gathering without shared-memory staging (sm_80 and newer).
//
// What the code torch.compile generates does: no windows of feature rows copied to shared memory, no barriers;
// each lane loads its 16-byte pieces of the two source rows straight from global memory, and L1 and L2 catch
// the rows that neighbouring targets share. A warp owns TPW consecutive targets of one batch row, one a lane:
//   1. Search: each owning lane finds its target's interval and weight (SEARCH):
//        0 lane     a binary search over the whole row of source times (twelve dependent loads at S = 4096);
//        1 window   the warp copies WIN source times into shared memory and each lane searches them: first the
//                   window around an interpolation guess (where the warp's smallest target would sit if the
//                   times were evenly spread; one round of loads), and if some target is not inside, the window
//                   that 64 probes of the row point to; a target outside that too searches the whole row;
//        2 prepass  as torch.compile does: a first kernel, resample_find, writes every (interval, weight) pair
//                   and this one reads them back.
//   Launched with programmatic dependent launch (the host's pdl, on Hopper), this kernel may be launched before
//   the kernel before it on the stream has completed: once every block of that one has run
//   griddepcontrol.launch_dependents or exited (a block that never runs it triggers when it exits). With the
//   prepass that kernel is resample_find, which triggers right after its wait, so this kernel's blocks may run
//   beside the search; else it is the last call's gather, which never triggers, so this launch begins only when that
//   gather's last block has exited: it overlaps that gather's completion, not its tail. Either way each block
//   waits (griddepcontrol.wait) before it reads anything, so nothing is read early.
//   2. Gather: the warp sweeps its targets' (target, slot) elements, lane-fastest. A slot is PPL vectors of a
//      row, EPR = VPR / PPL apart, so in each load lanes side by side read 16-byte pieces side by side. Each element
//      learns its target's interval and weight from the owning lane (a shuffle), loads its 2 x PPL pieces (all
//      from one address, the rest constant offsets), lerps and stores. UNROLL elements a lane are loaded before
//      any is used.
// Few targets a warp (TPW = 4 at D = 256: each lane writes 4 of the warp's 128 output vectors, 2 a sweep) and
// small blocks keep warps short-lived: many waves of blocks stream through memory the way the compiler's
// 16-row blocks do, and the search is paid once per TPW targets.
//
// Compile-time constants (defines): DCH (channels, D), VEC (channels per load: 8, 4, 2 or 1, the largest dividing
// DCH), NT (threads per block), TPW, PPL (vectors a lane moves a sweep), UNROLL, SEARCH, GUESS, WIN, MINB
// (__launch_bounds__ minimum blocks per SM), STREAM (1: st.global.cs, evict-first stores), TRIGGER (1: the
// gather runs launch_dependents right after its wait, so the next call's blocks may be launched under this
// one's tail; they wait before they read or write anything).
#include "resample_common.cuh"

#ifndef DCH
#define DCH 256
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef NT
#define NT 128
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef STREAM
#define STREAM 0
#endif
#ifndef SEARCH
#define SEARCH 1               // 0 lane, 1 window, 2 prepass (see the top of this file)
#endif
#ifndef GUESS
#define GUESS 1                // (window, block) first try the window around an interpolation guess
#endif
#ifndef TRIGGER
#define TRIGGER 0              // (PDL) 1: let the next kernel launch once every block has started (launch_dependents)
#endif
#ifndef WIN
#define WIN 128                // source times in a warp's window (SEARCH 1), a multiple of 32
#endif

#ifndef TPW
#define TPW 4                  // targets per warp (at most 32: one a lane for the search)
#endif
#define VPR (DCH / VEC)        // vectors per row
#ifndef PPL
#define PPL 2                  // vectors a lane moves in each of its sweeps (VPR must be a multiple)
#endif
#define EPR (VPR / PPL)        // elements (slots of PPL vectors) per row
#if VPR % PPL
#error "PPL must divide the vectors in a row (VPR)"
#endif

#if VEC == 8
typedef uint4 vec_t;
#elif VEC == 4
typedef uint2 vec_t;
#elif VEC == 2
typedef u32 vec_t;
#else
typedef u16 vec_t;
__device__ __forceinline__ u16 lerp_vec(u16 a, u16 c, float w) {
    return (u16)(pack_bf16x2(lerp(__uint_as_float((u32)a << 16), __uint_as_float((u32)c << 16), w), 0.0f)
                 & 0xFFFFu);
}
#endif

__device__ __forceinline__ void store_vec(vec_t* p, vec_t v) {
#if STREAM
    __stcs(p, v);
#else
    *p = v;
#endif
}

// Copy WIN source times from row `start` into the warp's window `win` and search it for x: true (with lo and w)
// when this lane's target lies inside; false leaves lo and w alone. Every lane of the warp must call it.
__device__ __forceinline__ bool window_try(const float* __restrict__ row, int S, float x, float* win, int start,
                                           int& lo, float& w) {
    const int lane = threadIdx.x & 31;
    const int n = min(WIN, S - start);
    __syncwarp();                                       // (a window searched before is no longer read)
#pragma unroll
    for (int k = 0; k < WIN / 32; ++k) {
        const int j = 32 * k + lane;
        if (j < n) win[j] = __ldg(row + start + j);
    }
    __syncwarp();
    const int j = window_interval(win, n, start, S, x);
    if (j >= 0) {
        lo = start + j;
        w = weight(win[j], win[j + 1], x);
    }
    return j >= 0;
}

// SEARCH 1 ("window"): the warp searches its targets in a window of WIN source times in shared memory, so that
// each lane's binary search costs shared-memory loads, not dependent loads from L1/L2. Which window:
//   a. (GUESS) interpolation search: where the warp's smallest target xmin would sit if the row's times were
//      evenly spread between its first and last (loaded alongside x): one round of loads, right whenever the
//      times are close to evenly spread and the warp's targets close together;
//   b. else 64 evenly spaced probes of the row; ballots tell which stretch holds xmin (narrowed again while a
//      stretch is longer than 64 rows: S > 4096), and the window starts there: two or more rounds;
//   c. a target outside that window too (targets far apart, or unsorted) searches the whole row: slower, right.
__device__ __forceinline__ void window_search(const float* __restrict__ row, int S, float x, float* win,
                                              int& lo, float& w) {
    const int lane = threadIdx.x & 31;
    float xmin = x;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) xmin = fminf(xmin, __shfl_xor_sync(0xffffffffu, xmin, o));
#if GUESS
    {   // interpolation search: guess where xmin sits from the row's first and last times (loaded with x), and
        // try the window around the guess; with evenly spread times that is usually right, in one round of loads
        const float first = __ldg(row), last = __ldg(row + S - 1);
        const float at = fminf(fmaxf((xmin - first) / (last - first) * (float)(S - 1), 0.0f), (float)(S - 1));
        const int start = min(max((int)at - (WIN / 2 - 8), 0), S - 2);
        if (__all_sync(0xffffffffu, window_try(row, S, x, win, start, lo, w))) return;
    }
#endif
    int base = 0, len = S;                              // the answer for xmin lies in [base, base + len)
    int g = (S + 63) >> 6;                              // 64 probes, g rows apart (they depend on no target)
    int i0 = lane * g, i1 = (lane + 32) * g;
    float q0 = i0 < S ? __ldg(row + i0) : 0.0f, q1 = i1 < S ? __ldg(row + i1) : 0.0f;
    while (true) {
        const int k = __popc(__ballot_sync(0xffffffffu, i0 < base + len && q0 <= xmin))
                    + __popc(__ballot_sync(0xffffffffu, i1 < base + len && q1 <= xmin)) - 1;
        const int nb = base + max(k, 0) * g;
        len = min(g, base + len - nb);
        base = nb;
        if (len <= 64) break;
        g = (len + 63) >> 6;                            // a stretch longer than 64 rows: narrow it again
        i0 = base + lane * g;
        i1 = base + (lane + 32) * g;
        q0 = i0 < base + len ? __ldg(row + i0) : 0.0f;
        q1 = i1 < base + len ? __ldg(row + i1) : 0.0f;
    }
    if (!window_try(row, S, x, win, min(base, S - 2), lo, w)) {
        lo = find_interval(row, S, x);                  // this lane's target is outside the window
        w = weight(__ldg(row + lo), __ldg(row + lo + 1), x);
    }
}

// The warp gathers its nt targets' rows. Lane i < nt owns target i: `src` is the first vector of its lower
// source row in f, `dst32` the first vector of its output row in o, `wt` its weight. A row's VPR vectors are EPR
// slots of PPL vectors each: slot v holds vectors v, v + EPR, v + 2 EPR, ... Element e is slot e % EPR of target
// e / EPR: the slot is fastest, so in each of a lane's PPL loads, lanes side by side read vectors side by side
// (at D = 256 with PPL = 2, EPR = 16: in the first load lanes 0-15 read the first 256 bytes of one target's row
// and lanes 16-31 those of the next target's, in the second load the last 256 bytes of each). A lane's PPL
// vectors share one address: the others are constant offsets, free in the load instruction.
__device__ __forceinline__ void gather(const vec_t* __restrict__ f, vec_t* __restrict__ o, int src, int dst32,
                                       float wt, int nt, int lane) {
    const int E = nt * EPR;
    // >>> lab: the gather
    for (int base = 0; base < E; base += 32 * UNROLL) {
        vec_t a[UNROLL][PPL], c[UNROLL][PPL];
        float ws[UNROLL];
        int to[UNROLL];
        bool has[UNROLL];                                         // this lane has element u
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int e = base + 32 * u + lane;
            const int i = min(e / EPR, nt - 1);                   // this element's target (kept in range)
            const int v = e - (e / EPR) * EPR;                    // and which slot of the row
            const int from = __shfl_sync(0xffffffffu, src, i) + v;   // every lane shuffles, in range or not
            to[u] = __shfl_sync(0xffffffffu, dst32, i) + v;
            ws[u] = __shfl_sync(0xffffffffu, wt, i);
            has[u] = e < E;
            if (has[u]) {
#pragma unroll
                for (int q = 0; q < PPL; ++q) {
                    a[u][q] = __ldg(f + from + q * EPR);
                    c[u][q] = __ldg(f + from + q * EPR + VPR);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            if (has[u]) {
#pragma unroll
                for (int q = 0; q < PPL; ++q) store_vec(o + to[u] + q * EPR, lerp_vec(a[u][q], c[u][q], ws[u]));
            }
    }
    // <<< lab
}

#ifndef MINB
#define MINB 16                // blocks an SM must hold (__launch_bounds__): caps a thread's registers
#endif

extern "C" __global__ void __launch_bounds__(NT, MINB)
resample_fused(const float* __restrict__ times, const u16* __restrict__ feats,
               const float* __restrict__ targets, u16* __restrict__ out, int B, int S, int T,
               const int2* __restrict__ pairs) {
#if __CUDA_ARCH__ >= 900
    // (PDL) nothing is read before the kernel before this one has completed (launched with programmatic
    // dependent launch, this block may start once that kernel has triggered: resample_find after its wait, the
    // last call's gather only when its last block has exited)
    asm volatile("griddepcontrol.wait;" ::: "memory");
#if TRIGGER
    // the next kernel may be launched once every block of this one has come this far: its blocks then take the
    // SMs this grid's last wave leaves, and wait there (griddepcontrol.wait) until this grid has completed
    asm volatile("griddepcontrol.launch_dependents;");
#endif
#endif
    const int lane = threadIdx.x & 31;
    const int w = blockIdx.x * (NT / 32) + (threadIdx.x >> 5);  // this warp
    // warp w owns TPW consecutive targets of one batch row, lane i the i-th of them (lanes 0 .. nt-1)
    const int chunks = (T + TPW - 1) / TPW;                       // warps per batch row
    if (w >= B * chunks) return;                                  // whole warps leave together
    const int b = w / chunks;
    const int t0 = (w - b * chunks) * TPW;
    const int nt = min(TPW, T - t0);
    const long long dst = (long long)b * T + t0 + min(lane, nt - 1);   // lanes past nt repeat the last

    // 1. each lane finds its target's interval and weight
    const float* row = times + (size_t)b * S;
    const float x = __ldg(targets + dst);
    int lo;
    float wt;
#if SEARCH == 2
    const int2 pair = __ldg(pairs + dst);                        // found by resample_find, the first kernel
    lo = pair.x;
    wt = __int_as_float(pair.y);
#elif SEARCH == 1
    __shared__ float windows[NT / 32][WIN];
    window_search(row, S, x, windows[threadIdx.x >> 5], lo, wt);
#else
    lo = find_interval(row, S, x);
    wt = weight(__ldg(row + lo), __ldg(row + lo + 1), x);
#endif
    // offsets in vectors, 32-bit (the host checks that B * S * D / VEC and B * T * D / VEC fit): fewer registers
    // a lane means more lanes on an SM, and more loads in flight
    const int src = (b * S + lo) * VPR;                         // the first of the two rows this target mixes
    const int dst32 = (int)dst * VPR;                             // its row of out

    // 2. the warp gathers its nt rows
    gather(reinterpret_cast<const vec_t*>(feats), reinterpret_cast<vec_t*>(out), src, dst32, wt, nt, lane);
}

// SEARCH 2 ("prepass"): what torch.compile does, a first kernel that finds every target's interval and weight
// (one thread a target, a binary search over its row) and writes them as one int2 per target; resample_fused
// reads them back. Both are launched with programmatic dependent launch: this one waits for the kernel before it,
// then lets resample_fused's blocks start, which wait for this one (at their start) before they read anything.
extern "C" __global__ void __launch_bounds__(256)
resample_find(const float* __restrict__ times, const float* __restrict__ targets, int2* __restrict__ pairs,
              int B, int S, int T) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");          // (PDL) the kernel before this one has finished
    asm volatile("griddepcontrol.launch_dependents;");         // the gather's blocks may start now
#endif
    const int k = blockIdx.x * 256 + threadIdx.x;                // (the host keeps B * T below 2**31)
    if (k >= B * T) return;
    const int b = k / T;
    const float* row = times + (size_t)b * S;
    const float x = __ldg(targets + k);
    const int lo = find_interval(row, S, x);
    pairs[k] = make_int2(lo, __float_as_int(weight(__ldg(row + lo), __ldg(row + lo + 1), x)));
}
