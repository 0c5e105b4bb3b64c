// runtime.h: enough of a GPU to run a CUDA C++ kernel on the host, for grading a lab without a GPU.
//
// cudabook/emulate/source.py rewrites the kernel's source (each inline `asm` becomes a call to emu::ptx, the
// dynamic shared-memory declaration a pointer into the block's shared memory) and compiles it with the host's
// C++ compiler against this header, which is light (the kernel is compiled for every lab attempt); the
// runtime itself (runtime.cpp) is compiled once and linked in. Each CUDA thread of a block is a fiber (ucontext); one host thread runs
// them in turn, switching only where a thread must wait for others: __syncthreads and named barriers, warp
// operations (shuffles, ballots, redux), warpgroup ones (wgmma), mbarrier waits. Blocks run one after another
// (the blocks of a cluster together).
//
// The asynchronous copies are what this header is for. cp.async, TMA bulk tensor copies and TMA stores are
// queued, and land either at the LATEST moment the program's waits allow (landing "lazy": a cp.async group
// when its thread waits for it, a TMA load when a thread waits on its mbarrier and every arrival is in) or at
// once (landing "eager"): a correct kernel is right both ways; a wait one group too shallow, a wrong parity or
// a stage refilled while still read is wrong one way or the other. The threads take turns too in two ways:
// landing lazy in round-robin passes (warps in step), landing eager in an order of priority, each running as far
// ahead as the barriers let it before a later one moves (warps as far apart as a GPU's may drift), so that a
// stage which fast consumers release while a slow one still reads it is refilled under the slow one. Shared memory starts as 0xFF bytes (NaN for
// bf16 and float), so a read before the copy landed shows. mbarrier arrivals and transaction bytes are
// counted, and a phase whose expect_tx disagrees with the bytes its copies deliver is reported. A block whose
// threads all wait for something that can never happen is reported with what each one waits on.
// TMA boxes are filled by cudabook.tma (one implementation, in Python): the host passes a handler.
// Of the tensor-core instructions, mma.sync.m16n8k16 (bf16 in, float32 accumulators) and ldmatrix are
// emulated as warp operations, and wgmma.mma_async (m64nNk16 bf16 or m64nNk32 e4m3, float32 accumulators) as a
// warpgroup operation: asynchronous, its results landing at the wgmma.wait_group that covers it, its matrix
// descriptors decoded as the hardware does (runtime.cpp, "warpgroup MMA"); stmatrix as a warp operation. Thread-block
// clusters (__cluster_dims__): the blocks of a cluster run together, their threads interleaved, with distributed
// shared memory (mapa), remote mbarrier arrivals, multicast TMA loads and the cluster barrier (runtime.cpp,
// "clusters"). What is not modelled makes emu::ptx stop with a message that names the instruction.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <initializer_list>

// ------------------------------------------------------------------------------------ CUDA's vocabulary
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __maxnreg__(...)
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
template <class T> inline T __ldcg(const T* p) { return *p; }

namespace emu {

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned u32;

// The runtime (runtime.cpp, compiled once and linked with each kernel) keeps the threads, barriers and copies;
// a kernel sees only these calls.
[[noreturn]] void fail(const char* fmt, ...);
const uint3& thread_idx();                       // the running thread's threadIdx
int lane_id();
u64 collective(const char* op, unsigned mask, u64 value);   // a warp operation: every lane in mask meets here
u64 lane_value(int lane);                        // what `lane` brought to the last warp operation
unsigned to_shared(const void* p);               // a generic address in the block's shared memory -> its offset
unsigned char* dynamic_smem();
extern uint3 block_idx, grid_dim;
extern dim3 block_dim;

template <class T> inline u64 to_u64(T v) { u64 r = 0; std::memcpy(&r, &v, sizeof v); return r; }
template <class T> inline T from_u64(u64 v) { T r; std::memcpy(&r, &v, sizeof r); return r; }
inline int src_lane(int lane, int s, int width) { return (lane & ~(width - 1)) + (s & (width - 1)); }

}  // namespace emu

#define threadIdx (emu::thread_idx())
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    emu::collective("__shfl_sync", mask, emu::to_u64(v));
    return emu::from_u64<T>(emu::lane_value(emu::src_lane(emu::lane_id(), src, width)));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32) {
    emu::collective("__shfl_xor_sync", mask, emu::to_u64(v));
    const int lane = emu::lane_id();
    int l = lane ^ lm;
    if ((l & ~(width - 1)) != (lane & ~(width - 1))) l = lane;
    return emu::from_u64<T>(emu::lane_value(l));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
    emu::collective("__shfl_down_sync", mask, emu::to_u64(v));
    int lane = emu::lane_id(), l = lane + (int)d;
    if ((l & ~(width - 1)) != (lane & ~(width - 1))) l = lane;
    return emu::from_u64<T>(emu::lane_value(l));
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
    emu::collective("__shfl_up_sync", mask, emu::to_u64(v));
    int lane = emu::lane_id(), l = lane - (int)d;
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
