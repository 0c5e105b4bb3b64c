// mma_sync.cuh: the Ampere tensor-core building blocks (sm_80 and newer), one PTX instruction each. The
// mma.sync rungs of every track use them.
//
//   cp.async     cp_async16 (16 bytes global -> shared, zero-fill), cp_async_commit, cp_async_wait<N>
//   ldmatrix     ldmatrix_x4 (four 8 x 8 bf16 matrices: an A fragment, or the B fragments of two n8 tiles),
//                ldmatrix_x4_trans (the same, transposed on the way)
//   mma.sync     mma_16816: d[16 x 8] += a[16 x 16] @ b[16 x 8], bf16 in, float32 accumulators
//   epilogue     pack_bf16x2 (hopper.cuh: two floats to bf16, nearest even, one instruction)
#pragma once
#include "hopper.cuh"

typedef unsigned short u16;
typedef unsigned int u32;

__device__ __forceinline__ void cp_async16(u32 dst, const void* src, int bytes) {
    // 16 bytes global -> shared, through L2 only (.cg). bytes = 0 reads nothing and writes 16 zero bytes:
    // that is how the edges of A and B (rows past M, columns past N, k past K) are padded.
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");   // at most N groups still in flight
}

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
    // Four 8 x 8 bf16 matrices; lanes 8j..8j+7 give the row addresses of matrix j, and each lane receives
    // two elements of every matrix: exactly the A fragment of mma.m16n8k16.
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32& r0, u32& r1, u32& r2, u32& r3, u32 addr) {
    // The same, transposed on the way: B is stored k-row by k-row ([BK][BN]), and the mma wants each
    // lane to hold two consecutive k of one column n.
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    // d[16 x 8] += a[16 x 16] @ b[16 x 8], one warp, float32 accumulators in place.
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
