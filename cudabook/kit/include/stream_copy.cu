// stream_copy.cu: copy kernels for the copy ceiling (cudabook.bench.copy_ceilings), in the shapes a streaming
// kernel would take: every thread of a block of NT moves UNROLL 16-byte vectors a step, all UNROLL loads in
// flight before the first store. The loads skip L1 (ld.global.nc.L1::no_allocate: each byte is read once), the
// stores are marked streaming (st.global.cs: evict first, nobody reads them back soon).
//   PERSISTENT 0: one step a block, as many blocks as steps; 1: gridDim.x blocks walk the steps.
// Compile-time constants (NVRTC -D): NT, UNROLL, PERSISTENT.
typedef unsigned int uint32_t;

#ifndef NT
#define NT 256
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ void store_stream(uint4* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Vectors [first, first + NT * UNROLL) of the copy: thread t moves first + t, + NT, + 2 NT, ...
__device__ __forceinline__ void copy_step(const uint4* __restrict__ src, uint4* __restrict__ dst, long long first,
                                          long long n) {
  const long long i = first + threadIdx.x;
  uint4 v[UNROLL];
  if (first + NT * UNROLL <= n) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = load_stream(src + i + u * NT);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) store_stream(dst + i + u * NT, v[u]);
  } else {                                         // the last, partial step
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * NT < n) store_stream(dst + i + u * NT, load_stream(src + i + u * NT));
  }
}

extern "C" __global__ void __launch_bounds__(NT) stream_copy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                             long long n) {
  const long long span = (long long)NT * UNROLL;
#if PERSISTENT
  for (long long first = blockIdx.x * span; first < n; first += (long long)gridDim.x * span) copy_step(src, dst, first, n);
#else
  copy_step(src, dst, blockIdx.x * span, n);
#endif
}

// The ceiling's bookkeeping, on the GPU so that a copy of gigabytes is filled and checked without the host
// touching a byte of it. fill_words: word i of a becomes a mix of i (no two nearby words alike, none zero by
// pattern); count_unequal: adds to *count the 16-byte vectors where a and b differ.
extern "C" __global__ void fill_words(uint32_t* a, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    a[i] = (uint32_t)(i * 2654435761ull) ^ (uint32_t)(i >> 32) ^ 0x9e3779b9u;
}

extern "C" __global__ void count_unequal(const uint4* a, const uint4* b, long long n, unsigned long long* count) {
  unsigned int unequal = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 x = a[i], y = b[i];
    unequal += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
  }
  if (unequal) atomicAdd(count, (unsigned long long)unequal);
}
