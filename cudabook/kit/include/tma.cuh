// tma.cuh: the Hopper (sm_90) copy machinery of every track's TMA rungs, each a few lines of PTX.
//
//   mbarriers        mbar_init, mbar_expect_tx, mbar_arrive (local and, in a cluster, remote), mbar_wait (with
//                    a watchdog: a wait that never ends traps after WATCHDOG_NS instead of hanging the GPU)
//   clusters         cluster_ctarank, cluster_sync
//   TMA              tma_load_2d (+ multicast to the CTAs of a cluster), tma_load_3d, tma_load_5d, tma_store_2d,
//                    tma_store_3d, bulk commit/wait, fence_proxy_async
//   named barriers   named_barrier, named_arrive
//
// hopper.cuh adds the sm_90a pieces (wgmma, setmaxnreg). No headers: NVRTC compiles this with nothing but the
// compiler's built-ins.
#pragma once

typedef unsigned int uint32_t;
typedef unsigned short uint16_t;
typedef unsigned long long uint64_t;

#ifndef WATCHDOG_NS
#define WATCHDOG_NS 20000000000ull   // 20 s: no correct wait in these kernels comes within a factor 1000 of it
#endif

// The CUtensorMap the host encodes (cuTensorMapEncodeTiled): 128 opaque bytes, passed by value as a
// `const __grid_constant__` kernel parameter so that its address is a parameter-space address TMA accepts.
struct __align__(64) TmaDesc { uint64_t opaque[16]; };

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The dynamic shared memory this launch was given. The kernels trap when it is less than they lay out (the
// host computes the size separately; a disagreement must fail loudly, not scribble past the end).
__device__ __forceinline__ uint32_t dynamic_smem_bytes() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}

// ------------------------------------------------------------------------------------------------ mbarrier

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

// Make the initialised barriers visible to the async proxy (TMA) and, in a cluster, to the other CTAs.
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrive (one of the barrier's `count`) and announce `bytes` that TMA copies will bring in this phase.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

// Arrive on the barrier at the same shared-memory offset in CTA `cta` of this cluster (this CTA included).
// Relaxed: it orders none of this thread's memory accesses. That is all a consumer's "I am done reading this
// stage" needs (its wgmmas have finished reading; it wrote nothing the producer reads), and it matters: the
// release.cluster form makes every arrive wait for a GPU-wide memory barrier (MEMBAR.ALL.GPU in the SASS),
// which halved this GEMM's speed when it was tried (an H100, while rung 07 was built).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta) {
  asm volatile("{ .reg .b32 remote; mapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [remote]; }"
               :: "r"(bar), "r"(cta) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Wait until the phase of parity `parity` has completed. A barrier starts in phase 0, so waiting for parity 1
// on a fresh barrier returns at once ("the phase before the first is complete"): that is how a producer
// passes its first lap of "empty" barriers without waiting. The watchdog traps (the launch fails with
// an error the host sees) instead of spinning forever on a protocol bug.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t t0 = globaltimer_ns();
  for (uint32_t n = 1;; ++n) {
    if (mbar_try_wait(bar, parity)) return;
    if ((n & 0x3FFF) == 0 && globaltimer_ns() - t0 > WATCHDOG_NS) asm volatile("trap;");
  }
}

// ------------------------------------------------------------------------------------------------ clusters

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ------------------------------------------------------------------------------------------------ TMA

// Copy the box at element coordinates (x innermost, y) of the tensor map into shared memory at `dst`;
// the bytes complete on the mbarrier `bar` (expect_tx must have announced them).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TmaDesc* map, uint32_t bar, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}

// A 3-D box at element coordinates (c0 innermost, c1, c2); parts outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const TmaDesc* map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}

// A 5-D box at element coordinates (c0 innermost .. c4); coordinates may be negative or past the end: the
// parts of the box outside the tensor arrive as zeros and still count their bytes.
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const TmaDesc* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar) : "memory");
}

// The same box, written to the same offset `dst` in every CTA of the cluster named in `cta_mask` (bit i: CTA
// rank i); each destination CTA's mbarrier at offset `bar` receives the bytes.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const TmaDesc* map, uint32_t bar, int x, int y,
                                                      uint16_t cta_mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar), "h"(cta_mask) : "memory");
}

// Write the shared-memory box at `src` to the tensor at (x, y); the parts outside the tensor are not written.
__device__ __forceinline__ void tma_store_2d(const TmaDesc* map, uint32_t src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               :: "l"(map), "r"(src), "r"(x), "r"(y) : "memory");
}
// The same for a 3-D tensor, at element coordinates (c0 innermost, c1, c2).
__device__ __forceinline__ void tma_store_3d(const TmaDesc* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];"
               :: "l"(map), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most N bulk groups of this thread are still reading their shared memory.
template <int N> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
}
// Order this thread's ordinary shared-memory writes before later async-proxy (TMA, WGMMA) reads of them.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Named barrier for `count` threads (a warpgroup's epilogue; id 0 is __syncthreads).
__device__ __forceinline__ void named_barrier(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}
// Count this thread's arrival at named barrier `id` and go on without waiting (the other side bar.syncs).
__device__ __forceinline__ void named_arrive(uint32_t id, uint32_t count) {
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(count) : "memory");
}
