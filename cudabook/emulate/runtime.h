// runtime.h: enough of a GPU to run a CUDA C++ kernel on the host, for grading a lab without a GPU.
//
// cudabook/emulate/source.py rewrites the kernel's source (each inline `asm` becomes a call to emu::ptx, the
// dynamic shared-memory declaration a pointer into the block's shared memory) and compiles it with the host's
// C++ compiler against this header. Each CUDA thread of a block is a fiber (ucontext); one host thread runs
// them in turn, switching only where a thread must wait for others: __syncthreads and named barriers, warp
// operations (shuffles, ballots, redux), mbarrier waits. Blocks run one after another.
//
// The asynchronous copies are what this header is for. cp.async, TMA bulk tensor copies and TMA stores are
// queued, and land either at the LATEST moment the program's waits allow (landing "lazy": a cp.async group
// when its thread waits for it, a TMA load when a thread waits on its mbarrier and every arrival is in) or at
// once (landing "eager"): a correct kernel is right both ways; a wait one group too shallow, a wrong parity or
// a stage refilled while still read is wrong one way or the other. Shared memory starts as 0xFF bytes (NaN for
// bf16 and float), so a read before the copy landed shows. mbarrier arrivals and transaction bytes are
// counted, and a phase whose expect_tx disagrees with the bytes its copies deliver is reported. A block whose
// threads all wait for something that can never happen is reported with what each one waits on.
// TMA boxes are filled by cudabook.tma (one implementation, in Python): the host passes a handler.
// Tensor-core instructions (mma, wgmma, ldmatrix, stmatrix) and clusters are not emulated: emu::ptx stops
// with a message that names the instruction.
#pragma once
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

// ------------------------------------------------------------------------------------ CUDA's vocabulary
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) alignas(n)
#define __shared__ static
#define __constant__ static

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

template <class To, class From> inline To emu_bits(From v) {
    static_assert(sizeof(To) == sizeof(From), "bit cast of different sizes");
    To t;
    std::memcpy(&t, &v, sizeof t);
    return t;
}
inline float __int_as_float(int v) { return emu_bits<float>(v); }
inline int __float_as_int(float v) { return emu_bits<int>(v); }
inline float __uint_as_float(unsigned v) { return emu_bits<float>(v); }
inline unsigned __float_as_uint(float v) { return emu_bits<unsigned>(v); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v ? __builtin_clz((unsigned)v) : 32; }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float a) { return expf(a); }
inline float __logf(float a) { return logf(a); }
inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
inline float __saturatef(float a) { return fminf(fmaxf(a, 0.0f), 1.0f); }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline T __ldcs(const T* p) { return *p; }

namespace emu {

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned u32;

// ------------------------------------------------------------------------------------ errors
[[noreturn]] void fail(const char* fmt, ...);
void cannot(const char* what);

// ------------------------------------------------------------------------------------ threads and block
enum State { RUNNABLE, BLOCKED, DONE };

struct Copy { u32 dst; const unsigned char* src; u32 bytes; u32 src_bytes; };            // cp.async
struct TmaOp { unsigned char map[128]; int coords[5]; int rank; u32 smem; u32 bar; int store; u64 bytes; int phase; };

struct Thread {
    ucontext_t ctx;
    uint3 idx;
    int linear, warp, lane;
    State state = RUNNABLE;
    const char* waiting = "";       // what it waits on, for the deadlock report
    char wait_detail[160] = {0};
    std::vector<Copy> open;         // cp.async copies since the last commit
    std::deque<std::vector<Copy>> groups;
    std::vector<TmaOp> bulk_open;   // TMA stores since the last bulk commit
    std::deque<std::vector<TmaOp>> bulk_groups;
};

struct Warp { u32 arrived = 0, mask = 0, gen = 0; u64 vals[2][32]; const char* op = ""; std::vector<int> waiters; };

struct Bar { int arrived = 0, count = 0; std::vector<int> waiters; };

struct Mbar {
    bool inited = false;
    u32 count = 0, pending = 0, phase = 0;
    i64 tx = 0, expected = 0, issued = 0;
    std::vector<TmaOp> copies;      // lazy: issued, not landed
};

struct Svc { int kind = 0; TmaOp op; };   // a request the scheduler serves on the host stack

typedef int (*TmaHandler)(int store, const unsigned char* map, const int* coords, int rank, unsigned char* smem,
                          u64 bytes, u32 smem_address, char* err, int errlen);

struct Block {
    std::vector<Thread> threads;
    std::vector<Warp> warps;
    std::map<int, Bar> bars;
    std::map<u32, Mbar> mbars;
    unsigned char* smem = nullptr;
    u64 smem_size = 0;
    int live = 0;
};

extern Block* B;
extern Thread* cur;
extern uint3 block_idx, grid_dim;
extern dim3 block_dim;
extern u64 events;
extern int lazy;
extern Svc svc;
extern ucontext_t sched;

const u32 SMEM_BASE = 0x400;        // shared addresses start above a reserved area, as on Hopper

inline u32 to_shared(const void* p) {
    const unsigned char* q = (const unsigned char*)p;
    if (q < B->smem || q > B->smem + B->smem_size)
        fail("__cvta_generic_to_shared of an address that is not in the block's dynamic shared memory "
             "(static __shared__ arrays cannot be used with async copies here)");
    return SMEM_BASE + (u32)(q - B->smem);
}
inline unsigned char* from_shared(u32 a, u64 bytes, const char* what) {
    if (a < SMEM_BASE || (u64)(a - SMEM_BASE) + bytes > B->smem_size)
        fail("%s at shared address 0x%x (%llu bytes) is outside the block's %llu bytes of shared memory", what, a,
             (unsigned long long)bytes, (unsigned long long)B->smem_size);
    return B->smem + (a - SMEM_BASE);
}

void yield();                                   // back to the scheduler, still runnable
void block(const char* what);                   // back to the scheduler until woken
void wake(int t);
void serve(int kind, const TmaOp& op);          // run a host request (TMA fill) on the scheduler's stack

// ------------------------------------------------------------------------------------ warp operations
inline u64 collective(const char* op, u32 mask, u64 value) {
    Thread* t = cur;
    Warp& w = B->warps[t->warp];
    if (!(mask >> t->lane & 1))
        fail("thread %d calls %s with a mask (0x%08x) that leaves out its own lane %d", t->linear, op, mask, t->lane);
    const u32 slot = w.gen & 1, gen = w.gen;
    if (w.arrived == 0) { w.mask = mask; w.op = op; }
    else if (w.mask != mask || std::strcmp(w.op, op) != 0)
        fail("the lanes of warp %d meet at different warp operations (%s with mask 0x%08x, %s with mask 0x%08x): "
             "every lane in the mask must call the same one", t->warp, w.op, w.mask, op, mask);
    w.vals[slot][t->lane] = value;
    w.arrived |= 1u << t->lane;
    events++;
    if ((w.arrived & mask) == mask) {
        w.arrived = 0;
        w.gen++;
        events++;
        for (int i : w.waiters) wake(i);
        w.waiters.clear();
    } else {
        w.waiters.push_back(t->linear);
        snprintf(t->wait_detail, sizeof t->wait_detail, "%s (mask 0x%08x) in warp %d", op, mask, t->warp);
        while (w.gen == gen) block("a warp operation");
    }
    (void)slot;
    return 0;
}
inline u64 lane_value(int lane) { Warp& w = B->warps[cur->warp]; return w.vals[(w.gen - 1) & 1][lane]; }

template <class T> inline u64 to_u64(T v) { u64 r = 0; std::memcpy(&r, &v, sizeof v); return r; }
template <class T> inline T from_u64(u64 v) { T r; std::memcpy(&r, &v, sizeof r); return r; }

inline int src_lane(int lane, int s, int width) { return (lane & ~(width - 1)) + (s & (width - 1)); }

}  // namespace emu

#define threadIdx (emu::cur->idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    emu::collective("__shfl_sync", mask, emu::to_u64(v));
    return emu::from_u64<T>(emu::lane_value(emu::src_lane(emu::cur->lane, src, width)));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32) {
    emu::collective("__shfl_xor_sync", mask, emu::to_u64(v));
    int l = emu::cur->lane ^ lm;
    if ((l & ~(width - 1)) != (emu::cur->lane & ~(width - 1))) l = emu::cur->lane;
    return emu::from_u64<T>(emu::lane_value(l));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
    emu::collective("__shfl_down_sync", mask, emu::to_u64(v));
    int lane = emu::cur->lane, l = lane + (int)d;
    if ((l & ~(width - 1)) != (lane & ~(width - 1))) l = lane;
    return emu::from_u64<T>(emu::lane_value(l));
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
    emu::collective("__shfl_up_sync", mask, emu::to_u64(v));
    int lane = emu::cur->lane, l = lane - (int)d;
    if (l < 0 || (l & ~(width - 1)) != (lane & ~(width - 1))) l = lane;
    return emu::from_u64<T>(emu::lane_value(l));
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    emu::collective("__ballot_sync", mask, pred ? 1 : 0);
    unsigned r = 0;
    for (int l = 0; l < 32; ++l)
        if ((mask >> l & 1) && emu::lane_value(l)) r |= 1u << l;
    return r;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::collective("__syncwarp", mask, 0); }
inline unsigned __activemask() { return 0xffffffffu; }
void __syncthreads();
[[noreturn]] void __trap();
long long clock64();
template <class T> inline unsigned __cvta_generic_to_shared(T* p) { return emu::to_shared((const void*)p); }
template <class T> inline T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <class T> inline T atomicMax(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
template <class T> inline T atomicMin(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
template <class T> inline T atomicExch(T* p, T v) { T o = *p; *p = v; return o; }
inline void __threadfence() {}
inline void __threadfence_block() {}

namespace emu {
// ------------------------------------------------------------------------------------ inline PTX
struct Operand { void* out; u32 size; u64 value; };
template <class T> inline Operand out(T& v) { return Operand{(void*)&v, (u32)sizeof v, to_u64(v)}; }
template <class T> inline Operand in(T v) { return Operand{nullptr, 0, (u64)v}; }
inline Operand in(float v) { return Operand{nullptr, 0, (u64)__float_as_uint(v)}; }
inline Operand in(double v) { return Operand{nullptr, 0, emu_bits<u64>(v)}; }
template <class T> inline Operand in(T* v) { return Operand{nullptr, 0, (u64)(uintptr_t)v}; }
void ptx(const char* text, std::initializer_list<Operand> ops);
}  // namespace emu
