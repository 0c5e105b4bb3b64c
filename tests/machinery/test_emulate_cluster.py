"""Hopper's cluster and epilogue machinery in the CPU emulator (cudabook/emulate/runtime.cpp: "stmatrix", "shared
memory, proxies", "setmaxnreg", "clusters"): stmatrix's fragments, TMA stores (clipping at the tensor's edges,
bulk groups, the proxy fence), named barriers, setmaxnreg's rules, thread-block clusters (the special registers,
mapa and distributed shared memory, remote mbarrier arrivals, multicast TMA loads, the cluster barrier), each
against results worked out here from the PTX ISA's description; then the labs it makes gradable on a CPU, GEMM 06
(warp specialisation) and 07 (clusters, multicast, TMA-store epilogue): their solutions passing the grader, and
learner-style mistakes failing with a message that names the cause, within the grader's watchdog.

GEMM 06 and 07's host code still asks a GPU array for its device pointer (gemm/hopper.py `pointer`), copies C back
with the driver (Problem.copy_back) and does not mark the stages EMULATED; the `gemm_emulated` fixture stands in for
those host-side changes, and adds a grading case whose K turns the ring of stages."""
import ctypes
import shutil
import time

import numpy as np
import pytest

from cudabook import SIMULATOR, emulate, labs, notebooks, nvrtc, tma, track

pytestmark = [pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="no host C++ compiler"),
              pytest.mark.skipif(not SIMULATOR, reason="the emulator runs where Numba runs in its simulator")]

P = ctypes.c_void_p
I = ctypes.c_int


def run(src, grid, block, args, types, *, shared=0, landing="lazy", cluster=None, timeout_s=20.0, name="k"):
    with emulate.emulating(landing, timeout_s=timeout_s):
        kern = nvrtc.load(nvrtc.compile(src, name="cluster_test.cu"), name)
        kern.launch(grid, block, args, types, shared=shared, **({"cluster": cluster} if cluster else {}))


def both(src, grid, block, args, types, **kw):
    for landing in ("lazy", "eager"):
        run(src, grid, block, args, types, landing=landing, **kw)


# ------------------------------------------------------------------------------------------ stmatrix
STMATRIX = r"""#include "hopper.cuh"
// One warp: lane l's register i holds (i << 12 | l << 4 | 0) in its low half and (... | 1) in its high half. Lane
// 8 i + r gives the address of row r of matrix i: rows in reverse order, 32 bytes apart, matrices 256 bytes apart
// (the other lanes give an address that is not in shared memory: .x1 and .x2 read only the first 8 n). The warp
// stores with stmatrix (form `v`), the image goes to out[0..1023], then ldmatrix of the same form reads it back
// into out[1024 + 4 l + i].
extern "C" __global__ void k(int v, uint16_t* out, uint32_t* back) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int l = threadIdx.x;
  for (int i = l; i < 1024; i += 32) reinterpret_cast<uint16_t*>(smem)[i] = 0xEEEE;
  __syncwarp();
  const uint32_t base = smem_u32(smem);
  const int n = v % 3 == 0 ? 1 : v % 3 == 1 ? 2 : 4;
  const uint32_t a = l < 8 * n ? base + (l / 8) * 256 + (7 - l % 8) * 32 : 0xFFFFFFF0u;
  uint32_t r[4], q[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) r[i] = (uint32_t)(i << 12 | l << 4) | (uint32_t)(i << 12 | l << 4 | 1) << 16;
  switch (v) {
    case 0: asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" :: "r"(a), "r"(r[0]) : "memory");
            asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(q[0]) : "r"(a)); break;
    case 1: asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" :: "r"(a), "r"(r[0]), "r"(r[1])
                         : "memory");
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(q[0]), "=r"(q[1]) : "r"(a));
            break;
    case 2: asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" :: "r"(a), "r"(r[0]),
                         "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                         : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3]) : "r"(a)); break;
    case 3: asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" :: "r"(a), "r"(r[0]) : "memory");
            asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(q[0]) : "r"(a)); break;
    case 4: asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" :: "r"(a), "r"(r[0]),
                         "r"(r[1]) : "memory");
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(q[0]), "=r"(q[1])
                         : "r"(a)); break;
    case 5: asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" :: "r"(a),
                         "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                         : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3]) : "r"(a)); break;
  }
  __syncwarp();
  for (int i = l; i < 1024; i += 32) out[i] = reinterpret_cast<uint16_t*>(smem)[i];
  for (int i = 0; i < 4; ++i) back[4 * l + i] = q[i];
}
"""


def stmatrix_image(n, trans):
    """The shared memory (1024 uint16) after STMATRIX's store, from the PTX ISA's fragment layout: of matrix i,
    element (row, col) is, without .trans, register i of lane 4 row + col / 2, half col % 2; with .trans, register i
    of lane 4 col + row / 2, half row % 2. Matrix i's row r sits at byte i * 256 + (7 - r) * 32."""
    image = np.full(1024, 0xEEEE, np.uint16)
    for i in range(n):
        for row in range(8):
            for col in range(8):
                lane, half = (4 * col + row // 2, row % 2) if trans else (4 * row + col // 2, col % 2)
                image[(i * 256 + (7 - row) * 32) // 2 + col] = i << 12 | lane << 4 | half
    return image


@pytest.mark.parametrize("variant", range(6), ids=["x1", "x2", "x4", "x1.trans", "x2.trans", "x4.trans"])
def test_stmatrix_stores_the_fragments_the_ptx_isa_draws_and_ldmatrix_reads_them_back(variant):
    n, trans = (1, 2, 4)[variant % 3], variant >= 3
    out, back = np.zeros(1024, np.uint16), np.zeros(128, np.uint32)
    run(STMATRIX, 1, 32, [variant, out.ctypes.data, back.ctypes.data], [I, P, P], shared=2048)
    assert np.array_equal(out, stmatrix_image(n, trans))
    lanes = np.arange(32)[:, None]
    regs = np.arange(4)[None, :]
    sent = (regs << 12 | lanes << 4) | (regs << 12 | lanes << 4 | 1) << 16
    got = back.reshape(32, 4)
    assert np.array_equal(got[:, :n], sent[:, :n].astype(np.uint32))     # ldmatrix is its inverse


def test_stmatrix_checks_its_row_addresses():
    src = STMATRIX.replace("(7 - l % 8) * 32", "(7 - l % 8) * 32 + (l == 5 ? 8 : 0)")
    with pytest.raises(emulate.EmulationError, match="lane 5's row address 0x[0-9a-f]+ is not 16-byte aligned"):
        run(src, 1, 32, [2, np.zeros(1024, np.uint16).ctypes.data, np.zeros(128, np.uint32).ctypes.data], [I, P, P],
            shared=2048)


# ------------------------------------------------------------------------------------------ TMA stores
STORE = r"""#include "hopper.cuh"
// The box image (nbytes, already in TMA's shared-memory layout) into shared memory with st.shared, then thread 0
// stores it at (x, y) with TMA. mode: 1 no fence.proxy.async, 2 rewrite the box after the store and before the
// wait, 4 wait_group.read only (no full wait), 8 a second store of the same box at (x2, y2) in its own group, then
// wait_group.read 1 (the first group) and wait_group 0.
extern "C" __global__ void k(const __grid_constant__ TmaDesc map, const uint32_t* image, int nbytes, int x, int y,
                             int x2, int y2, int mode) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
  for (int i = threadIdx.x; i < nbytes / 4; i += blockDim.x)
    asm volatile("st.shared.u32 [%0], %1;" :: "r"(base + 4 * i), "r"(image[i]) : "memory");
  if (!(mode & 1)) fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store_2d(&map, base, x, y);
    bulk_commit();
    if (mode & 8) { tma_store_2d(&map, base, x2, y2); bulk_commit(); bulk_wait_read<1>(); }
    if (mode & 2) asm volatile("st.shared.u32 [%0], %1;" :: "r"(base), "r"(0x12345678u) : "memory");
    if (mode & 4) bulk_wait_read<0>(); else bulk_wait<0>();
  }
}
"""


def store_case(shape, box, coords, swizzle="none", mode=0, landing="lazy", coords2=(0, 0)):
    """A float32 tensor of `shape` (rows, columns) holding -1, the box (rows, columns) of values 1, 2, ... stored at
    coords (x = column, y = row). Returns the tensor after the kernel and the box's values."""
    tensor = np.full(shape, -1.0, np.float32)
    values = np.arange(1, box[0] * box[1] + 1, dtype=np.float32).reshape(box)
    image = np.ascontiguousarray(tma.smem_image(values, swizzle)).view(np.uint32)
    with emulate.emulating(landing, timeout_s=10):
        tmap = tma.encode_tiled("float32", shape, (shape[1] * 4, 4), box, tensor.ctypes.data, swizzle=swizzle)
        kern = nvrtc.load(nvrtc.compile(STORE, name="store.cu"), "k")
        kern.launch(1, 64, [tmap, image.ctypes.data, image.nbytes, coords[0], coords[1], coords2[0], coords2[1],
                            mode], [None, P, I, I, I, I, I, I], shared=1024 + image.nbytes + 1024)
    return tensor, values


@pytest.mark.parametrize("swizzle", ["none", "128B"])
def test_a_tma_store_writes_the_box_and_clips_it_at_the_tensor_edges(swizzle):
    for landing in ("lazy", "eager"):
        # box 4 x 8 at column 8, row 3 of a 5 x 12 tensor: rows 3, 4 and columns 8..11 are inside
        got, values = store_case((5, 12), (4, 8), (8, 3), swizzle, landing=landing)
        want = np.full((5, 12), -1.0, np.float32)
        want[3:5, 8:12] = values[:2, :4]
        assert np.array_equal(got, want), landing
        # negative coordinates: the box at column -4, row -2 covers rows 0, 1 and columns 0..3 with its far corner
        got, values = store_case((5, 12), (4, 8), (-4, -2), swizzle, landing=landing)
        want = np.full((5, 12), -1.0, np.float32)
        want[0:2, 0:4] = values[2:4, 4:8]
        assert np.array_equal(got, want), landing


def test_two_bulk_groups_each_store_their_box():
    got, values = store_case((16, 16), (4, 8), (0, 0), mode=8, coords2=(8, 12))
    want = np.full((16, 16), -1.0, np.float32)
    want[0:4, 0:8] = values
    want[12:16, 8:16] = values
    assert np.array_equal(got, want)


def test_the_source_rewritten_before_the_read_wait_is_reported_both_ways():
    for landing in ("lazy", "eager"):
        with pytest.raises(emulate.EmulationError, match=r"the shared memory a TMA store reads changed between the "
                           r"store \(thread 0 of block 0\) and the cp.async.bulk.wait_group.read that covers it"):
            store_case((8, 8), (4, 8), (0, 0), mode=2 | 4, landing=landing)


def test_a_generic_proxy_write_stored_without_the_proxy_fence_is_reported():
    with pytest.raises(emulate.EmulationError, match=r"a TMA store .* reads shared memory that thread \d+ wrote "
                       r"through the generic proxy .* no fence.proxy.async between"):
        store_case((8, 8), (4, 8), (0, 0), mode=1)


def test_st_and_ld_shared_move_each_width_and_vector():
    src = r"""extern "C" __global__ void k(unsigned long long* out) {
      extern __shared__ __align__(16) unsigned char smem[];
      const unsigned a = __cvta_generic_to_shared(smem);
      unsigned long long w = 0x0123456789ABCDEFull; unsigned x, y, z, v; unsigned short h; int s8;
      asm volatile("st.shared.u64 [%0], %1;" :: "r"(a), "l"(w) : "memory");
      asm volatile("st.shared::cta.v2.u32 [%0+8], {%1, %2};" :: "r"(a), "r"(7u), "r"(9u) : "memory");
      asm volatile("st.shared.b16 [%0+16], %1;" :: "r"(a), "h"((unsigned short)0xBEEF) : "memory");
      asm volatile("st.shared.u8 [%0+18], %1;" :: "r"(a), "r"(0x80u) : "memory");
      asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(x), "=r"(y) : "r"(a));
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(z), "=r"(v), "=r"(x), "=r"(y) : "r"(a + 0));
      asm volatile("ld.shared.u16 %0, [%1+16];" : "=h"(h) : "r"(a));
      asm volatile("ld.shared.s8 %0, [%1+18];" : "=r"(s8) : "r"(a));
      out[0] = z; out[1] = v; out[2] = x; out[3] = y; out[4] = h; out[5] = (unsigned long long)(long long)s8;
    }"""
    out = np.zeros(6, np.uint64)
    run(src, 1, 1, [out.ctypes.data], [P], shared=64)
    assert [int(v) for v in out] == [0x89ABCDEF, 0x01234567, 7, 9, 0xBEEF, (1 << 64) - 128]


# ------------------------------------------------------------------------------------------ named barriers, setmaxnreg
def test_named_barriers_check_their_id_and_count():
    for text, match in (("bar.sync 16, 64;", "16 named barriers, 0..15"),
                        ("bar.sync 1, 48;", "a positive multiple of 32"),
                        ("bar.arrive 2, 96;", "more threads than the block's 64")):
        src = 'extern "C" __global__ void k() { asm volatile("%s" ::: "memory"); }' % text
        with pytest.raises(emulate.EmulationError, match=match):
            run(src, 1, 64, [], [])


SETMAXNREG = r"""#include "hopper.cuh"
extern "C" __global__ void k(int mode, int* out) {
  const int wg = threadIdx.x / 128, warp = threadIdx.x / 32;
  if (mode == 0) { if (wg == 0) setmaxnreg_dec<40>(); else setmaxnreg_inc<232>(); }      // 06's split: fits
  if (mode == 1) { if (wg == 0) setmaxnreg_dec<40>(); else setmaxnreg_inc<240>(); }      // 128 (40 + 2 240) > 65536
  if (mode == 2) { if (warp == 1) setmaxnreg_dec<48>(); else setmaxnreg_dec<40>(); }     // warps of a group differ
  if (mode == 3 && wg == 0) { setmaxnreg_inc<64>(); setmaxnreg_inc<56>(); }             // .inc that lowers
  if (mode == 4) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "r"(out[1]));     // not a multiple of 8
  out[0] = 1;
}
"""


def test_setmaxnreg_is_checked_then_ignored():
    out = np.zeros(2, np.int32)
    run(SETMAXNREG, 1, 384, [0, out.ctypes.data], [I, P])
    assert out[0] == 1
    for mode, match in ((1, "can never complete: the counts the block's warps have set add up to 66560"),
                        (2, "the warps of warpgroup 0 of block 0 execute different setmaxnreg"),
                        (3, r"setmaxnreg.inc 56 in warp 0 .* .inc may only raise the count"),
                        (4, "must be a multiple of 8 in 24..256")):
        out = np.array([0, 100], np.int32)
        with pytest.raises(emulate.EmulationError, match=match):
            run(SETMAXNREG, 1, 384, [mode, out.ctypes.data], [I, P])


# ------------------------------------------------------------------------------------------ clusters
CLUSTER = r"""#include "hopper.cuh"
// Clusters of 2 blocks of 64 threads. out[block][0..6]: %cluster_ctarank, %cluster_nctarank, %clusterid.x,
// %cluster_ctaid.x, %nclusterid.x, %is_explicit_cluster, getctarank of a mapa address; then [8 + t]: what the peer
// wrote into this block's shared memory (st.shared::cluster through mapa) before the cluster barrier; [72]: the
// phase this block's barrier reached after every peer thread arrived on it remotely (count 64).
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(int* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t buf = smem_u32(smem), bar = buf + 512;
  const int t = threadIdx.x;
  uint32_t rank, n, id, cta, nid, expl, peer_rank;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(id));
  asm("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(cta));
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(nid));
  asm("mov.u32 %0, %%is_explicit_cluster;" : "=r"(expl));
  uint32_t peer_buf;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(peer_buf) : "r"(buf), "r"(rank ^ 1));
  asm("getctarank.shared::cluster.u32 %0, %1;" : "=r"(peer_rank) : "r"(peer_buf));
  int* o = out + blockIdx.x * 80;
  if (t == 0) {
    o[0] = rank; o[1] = n; o[2] = id; o[3] = cta; o[4] = nid; o[5] = expl; o[6] = peer_rank;
    mbar_init(bar, 64);
    mbar_fence_init();
  }
  cluster_sync();                                            // the peer's barrier exists
  asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(peer_buf + 4 * t), "r"(1000 * (int)rank + t) : "memory");
  mbar_arrive_cluster(bar, rank ^ 1);                        // every thread arrives on the peer's barrier
  cluster_sync();                                            // the peer's writes are in
  o[8 + t] = reinterpret_cast<int*>(smem)[t];
  if (t == 0) { mbar_wait(bar, 0); o[72] = 1; }
  cluster_sync();                                            // nobody leaves while a peer may still use its memory
}
"""


def test_a_cluster_runs_its_blocks_together_with_distributed_shared_memory_and_remote_arrivals():
    for landing in ("lazy", "eager"):
        out = np.full(4 * 80, -7, np.int32)
        run(CLUSTER, 4, 64, [out.ctypes.data], [P], shared=1024, landing=landing)
        o = out.reshape(4, 80)
        for b in range(4):
            rank = b % 2
            assert list(o[b, :7]) == [rank, 2, b // 2, rank, 2, 1, rank ^ 1], (landing, b)
            assert list(o[b, 8:72]) == [1000 * (rank ^ 1) + t for t in range(64)], (landing, b)
            assert o[b, 72] == 1


def test_a_grid_that_is_not_a_multiple_of_the_cluster_is_refused():
    with pytest.raises(emulate.EmulationError, match="cannot be cut into clusters of"):
        run(CLUSTER, 3, 64, [np.zeros(3 * 80, np.int32).ctypes.data], [P], shared=1024)


def test_the_launch_may_name_the_cluster_and_must_agree_with_cluster_dims():
    src = CLUSTER.replace("__cluster_dims__(2, 1, 1) ", "")
    out = np.full(2 * 80, -7, np.int32)
    run(src, 2, 64, [out.ctypes.data], [P], shared=1024, cluster=(2, 1, 1))
    assert list(out.reshape(2, 80)[1, 8:12]) == [0, 1, 2, 3]
    with pytest.raises(emulate.EmulationError, match=r"declared with __cluster_dims__\(2, 1, 1\)"):
        run(CLUSTER, 4, 64, [np.zeros(4 * 80, np.int32).ctypes.data], [P], shared=1024, cluster=(4, 1, 1))


CLUSTER_ORDER = r"""#include "hopper.cuh"
// Block 1 (rank 1) writes into block 0's shared memory, then arrives at the cluster barrier; block 0 waits there,
// then reads. The scheduler runs block 0's threads first: the wait must hold them until block 1 has arrived.
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(int mode, int* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t buf = smem_u32(smem), bar = buf + 256;
  const uint32_t rank = cluster_ctarank();
  if (mode == 1) {                                           // a remote arrive with no cluster barrier after init
    if (threadIdx.x == 0) { mbar_init(bar, 1); mbar_fence_init(); }
    for (int i = 0; i < 3; ++i) __syncthreads();             // (block 1 runs meanwhile: its barrier exists)
    if (threadIdx.x == 0) mbar_arrive_cluster(bar, rank ^ 1);
  }
  if (mode == 4 && rank == 0 && threadIdx.x == 0) {          // the peer's barrier not even initialised
    mbar_init(bar, 1);
    mbar_arrive_cluster(bar, 1);
  }
  if (mode == 4) return;
  if (mode == 2) asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");   // no arrive before it
  if (mode == 3) {                                           // block 1 leaves; block 0 then arrives on its barrier
    if (threadIdx.x == 0) { mbar_init(bar, 1); mbar_fence_init(); }
    cluster_sync();
    if (rank == 1) return;
    for (int i = 0; i < 3; ++i) __syncthreads();             // (block 1 runs meanwhile, and ends)
    if (threadIdx.x == 0) mbar_arrive_cluster(bar, 1);
    return;
  }
  if (rank == 1) {
    uint32_t peer;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(peer) : "r"(buf), "r"(0));
    asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(peer + 4 * threadIdx.x), "r"(5 + (int)threadIdx.x)
                 : "memory");
  }
  cluster_sync();
  if (rank == 0) out[threadIdx.x] = reinterpret_cast<int*>(smem)[threadIdx.x];
  cluster_sync();
}
"""


def test_the_cluster_barrier_holds_a_block_until_the_other_has_arrived():
    for landing in ("lazy", "eager"):
        out = np.zeros(32, np.int32)
        run(CLUSTER_ORDER, 2, 32, [0, out.ctypes.data], [I, P], shared=512, landing=landing)
        assert list(out) == [5 + t for t in range(32)]


@pytest.mark.parametrize("mode, match", [
    (1, r"a remote mbarrier.arrive \(.shared::cluster\) \(thread 0 of block rank 0\) on the mbarrier at 0x500 of "
        r"block rank 1 of the cluster, with no cluster barrier between that barrier's mbarrier.init and this"),
    (4, r"mbarrier.arrive on the mbarrier at shared address 0x500 of block rank 1 of the cluster, which was never "
        r"initialised with mbarrier.init"),
    (2, "barrier.cluster.wait with no barrier.cluster.arrive before it"),
    (3, "of block rank 1 of the cluster, which has already ended"),
], ids=["init not published", "peer never initialised", "wait without arrive", "peer already ended"])
def test_what_the_ptx_isa_leaves_undefined_in_a_cluster_is_reported(mode, match):
    with pytest.raises(emulate.EmulationError, match=match):
        run(CLUSTER_ORDER, 2, 32, [mode, np.zeros(32, np.int32).ctypes.data], [I, P], shared=512)


MULTICAST = r"""#include "hopper.cuh"
// Clusters of `2` blocks: each block's thread 0 inits its barrier and announces the box's bytes; block rank 0
// multicasts one box (rows y.., columns x..) with `mask`; every block then copies what landed to out[rank].
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(const __grid_constant__ TmaDesc map, int x, int y, int mask,
                                                      int bytes, float* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t base = (smem_u32(smem) + 1023) & ~1023u, bar = base + 8192;
  const uint32_t rank = cluster_ctarank();
  if (threadIdx.x == 0) { mbar_init(bar, 1); mbar_fence_init(); }
  cluster_sync();
  if (threadIdx.x == 0) {
    mbar_expect_tx(bar, bytes);
    if (rank == 0) tma_load_2d_multicast(base, &map, bar, x, y, (uint16_t)mask);
  }
  mbar_wait(bar, 0);
  const float* tile = reinterpret_cast<const float*>(smem + (base - smem_u32(smem)));
  for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x) out[rank * 2048 + i] = tile[i];
  cluster_sync();
}
"""


def multicast(mask, landing="lazy"):
    tensor = np.arange(20 * 40, dtype=np.float32).reshape(20, 40)
    out = np.full(2 * 2048, -1.0, np.float32)
    with emulate.emulating(landing, timeout_s=10):
        tmap = tma.encode_tiled("float32", tensor.shape, tensor.strides, (16, 8), tensor.ctypes.data)
        kern = nvrtc.load(nvrtc.compile(MULTICAST, name="multicast.cu"), "k")
        kern.launch(2, 64, [tmap, 36, 12, mask, 16 * 8 * 4, out.ctypes.data], [None, I, I, I, I, P],
                    shared=1024 + 8192 + 64)
    return tensor, out.reshape(2, 2048)[:, :128].reshape(2, 16, 8)


def test_a_multicast_load_lands_the_box_in_every_block_of_the_mask():
    for landing in ("lazy", "eager"):
        tensor, got = multicast(0b11, landing)
        want = np.zeros((16, 8), np.float32)               # rows 12..27, columns 36..43: clipped to 12..19, 36..39
        want[:8, :4] = tensor[12:20, 36:40]
        assert np.array_equal(got[0], want) and np.array_equal(got[1], want), landing


def test_a_multicast_mask_that_leaves_a_block_out_is_a_deadlock_that_names_its_barrier():
    with pytest.raises(emulate.EmulationError, match=r"(?s)DEADLOCK in the cluster.*block 1 \(rank 1\).*the mbarrier "
                       r"at 0x[0-9a-f]+ would never complete: expect_tx says 512 bytes, the boxes deliver 0"):
        multicast(0b01)


def test_a_multicast_mask_past_the_cluster_is_refused():
    with pytest.raises(emulate.EmulationError, match="CTA mask 0x5: bit i is the block of rank i, and this cluster "
                       "has 2 blocks"):
        multicast(0b101)


# ------------------------------------------------------------------------------------------ GEMM 06 and 07 on a CPU
@pytest.fixture
def gemm_emulated():
    """GEMM 06 and 07 as the emulator runs them: marked EMULATED, with a grading case whose K turns the ring of
    stages (06: K = 600, ten k-tiles through four stages; 07: two tiles of five)."""
    from cudabook.gemm import checking
    from cudabook.gemm import s06_warp_specialized as s06, s07_clusters as s07
    assert s06.EMULATED and s07.EMULATED
    assert all(any("the TMA ring turns" in name for name, _, _, _ in checking.cases(simulator=True, stage_name=stage))
               for stage in ("06_warp_specialized", "07_clusters"))
    return {"06": s06, "07": s07}


def solution(stage):
    module = track.get("gemm").stage(stage)
    return notebooks.strip_markers(notebooks.region_source(str(module.SOURCE.relative_to(notebooks.PACKAGE))))


@pytest.mark.parametrize("stage", ["06_warp_specialized", "07_clusters"])
def test_gemm_06_and_07_solutions_pass_the_grader_in_the_emulator(stage, gemm_emulated, capsys):
    start = time.monotonic()
    assert labs.grade(stage, solution(stage), track="gemm"), capsys.readouterr().out
    took = time.monotonic() - start
    out = capsys.readouterr().out
    print(f"{stage} graded in {took:.1f} s")
    assert "PASS" in out and "run on the CPU by the emulator" in out and "the TMA ring turns" in out
    assert took < 60


WRONG = [
    ("06_warp_specialized", "the stage released before the wgmmas finished reading it",
     [("wgmma_wait<0>();                       // the wgmmas have read the stage\n"
       "        if (tid % 128 == 0) mbar_arrive(empty + 8 * s);",
       "if (tid % 128 == 0) mbar_arrive(empty + 8 * s);\n        wgmma_wait<0>();")],
     "nothing orders the load after that wgmma's completion"),
    ("06_warp_specialized", "the phase never flips", [("{ s = 0; phase ^= 1; }", "{ s = 0; }")],
     "the emulated kernel stopped"),
    ("07_clusters", "wgmma_wait<2>: stage prev released while its wgmmas may still run",
     [("wgmma_wait<1>();", "wgmma_wait<2>();")], "nothing orders the load after that wgmma's completion"),
    ("07_clusters", "the current stage released right after its wgmmas were issued",
     [("if (leader && prev >= 0) release(empty + 8 * prev);\n        prev = s;",
       "if (leader) release(empty + 8 * s);\n        prev = s;")], "nothing orders the load after that wgmma's"),
    ("07_clusters", "the phase never flips", [("{ s = 0; phase ^= 1; }", "{ s = 0; }")], "the emulated kernel stopped"),
]


@pytest.mark.parametrize("stage, what, edits, says", WRONG, ids=[f"{s[:2]}: {w}" for s, w, _, _ in WRONG])
def test_gemm_06_and_07_mistakes_fail_in_the_emulator_with_the_cause(stage, what, edits, says, gemm_emulated, capsys):
    region = solution(stage)
    for old, new in edits:
        assert old in region, old
        region = region.replace(old, new)
    start = time.monotonic()
    assert not labs.grade(stage, region, track="gemm")
    out = capsys.readouterr().out
    assert "run on the CPU by the emulator" in out.replace("Run on", "run on") and says in out, out
    assert time.monotonic() - start < labs.WATCHDOG_EMULATED_S


def test_gemm_07_a_slot_computed_from_kt_fails_by_running_too(gemm_emulated, monkeypatch, capsys):
    """The planted mistake prev = kt % STAGES, with the grader's text check (LAB_TEXT_MISTAKES) out of the way: the
    run fails it. In the second tile of the ring's case (five k-tiles a tile, so it starts at slot 1) the consumers
    release the wrong stage; run in step (landing lazy) every stage still gets its arrivals in time, but landing
    eager the first consumers run ahead, their extra arrival on a stage's "empty" barrier completes a phase without
    the last consumer's release, and the producer refills that stage while the last one's wgmmas still read it."""
    from cudabook.gemm import checking
    from cudabook.gemm.mistakes import MISTAKES
    monkeypatch.setattr(gemm_emulated["07"], "LAB_TEXT_MISTAKES", [])
    monkeypatch.setattr(checking, "_CASES_SIM", [])          # the ring's case alone (and its Stream-K variant)
    m = next(m for m in MISTAKES if m.stage == "07_clusters" and "kt % STAGES" in m.what)
    region = solution("07_clusters")
    for old, new in m.edits:
        assert old in region, old
        region = region.replace(old, new)
    start = time.monotonic()
    assert not labs.grade("07_clusters", region, track="gemm")
    out = capsys.readouterr().out
    assert "copies landing the moment they are issued" in out and "the TMA ring turns" in out, out
    for says in ("the stage was released too early", "(2 arrivals)", "the phase completed without its release",
                 "stands in for one that has not arrived yet", "computed, from a k-tile counter"):
        assert says in out, (says, out)
    assert time.monotonic() - start < labs.WATCHDOG_EMULATED_S


@pytest.mark.parametrize("stage", ["06_warp_specialized", "07_clusters"])
def test_gemm_06_and_07_full_barrier_waited_with_the_wrong_parity_fails_quickly(stage, gemm_emulated, capsys):
    """Waiting for parity phase ^ 1: the first lap reads stages before their boxes land (C is NaN in the lazy run)
    and the eager run ends in a deadlock the emulator names, long before the grader's watchdog: a FAIL, never an
    error that escapes the grader."""
    region = solution(stage).replace("mbar_wait(full + 8 * s, phase);", "mbar_wait(full + 8 * s, phase ^ 1);")
    start = time.monotonic()
    verdict = labs.grade(stage, region, track="gemm")
    assert verdict is False
    out = capsys.readouterr().out
    assert "FAIL" in out or "stopped" in out, out
    assert time.monotonic() - start < labs.WATCHDOG_EMULATED_S


def gemm07(text_edits, shape=(20, 300, 600), **params):
    """07's whole source with edits, on one case, both landings: the verdicts (or raises the emulator's error)."""
    from cudabook import gemm
    from cudabook.gemm import inputs, problem
    from cudabook.gemm import s07_clusters as s07
    text = s07.source()
    for old, new, *count in text_edits:
        assert old in text, old
        text = text.replace(old, new, *count)
    verdicts = []
    for landing in ("lazy", "eager"):
        a, b = inputs.random_problem(*shape)
        p = problem.upload(a, b)
        p.poison()
        with emulate.emulating(landing, timeout_s=30):
            s07.launch(p, kernel=text, **params)
        verdicts.append(gemm.judge(p.result(), a, b).ok)
    return verdicts


@pytest.mark.parametrize("params", [dict(), dict(cluster=1), dict(multicast=0), dict(multicast=2),
                                    dict(stmatrix=False), dict(tma_store=False), dict(mma_depth=0),
                                    dict(store_boxes=1, stages=2), dict(bn=128, consumers=1)],
                         ids=lambda p: ", ".join(f"{k}={v}" for k, v in p.items()) or "defaults")
def test_gemm_07_variants_are_right_both_ways(params, gemm_emulated):
    assert gemm07([], **params) == [True, True]


# Stream-K (stream_k=True) on a few clusters: 6 blocks are 3 clusters, so one unit of 10 k-tiles is cut in three
# pieces (two park, the last adds both); 4 blocks on 3 units run one whole wave and cut the last unit in two.
STREAM_K_CASES = [((20, 36, 600), dict(stream_k=True, blocks=6)), ((20, 600, 640), dict(stream_k=True, blocks=4)),
                  ((20, 300, 600), dict(stream_k=True, blocks=6, bn=128, consumers=1, cluster=1))]


@pytest.mark.parametrize("shape, params", STREAM_K_CASES, ids=["one unit in 3 pieces", "a whole wave, then 2 pieces",
                                                               "bn=128, one consumer, no cluster"])
def test_gemm_07_stream_k_is_right_both_ways(shape, params, gemm_emulated):
    assert gemm07([], shape=shape, **params) == [True, True]


@pytest.mark.parametrize("edits, fails", [
    ([("d[4 * i] += v.x;", "d[4 * i] = v.x;")], "wrong"),
    ([("if (leader) atomicExch(flags + slot, 1);", "")], "stopped"),
    ([("if (w.piece == 1) {", "if (w.piece == 3) {")], "stopped"),   # it stores; the last piece waits forever
], ids=["parked sums overwrite instead of adding", "the flag never raised", "a piece that should park stores instead"])
def test_gemm_07_stream_k_mistakes_fail(edits, fails, gemm_emulated):
    """The cases above run the fix-up: a wrong one fails (a deadlock the emulator stops, or wrong elements). A
    deadlock here is a spin on the flags, which only the kernel's watchdog ends: 3 s instead of 20 (tma.cuh)."""
    if fails == "stopped":
        edits = edits + [("#include", "#define WATCHDOG_NS 3000000000ull\n#include", 1)]
    for shape, params in STREAM_K_CASES[:2]:
        try:
            verdicts = gemm07(edits, shape=shape, **params)
        except emulate.EmulationError:
            assert fails == "stopped"
            continue
        assert fails == "wrong" and verdicts != [True, True], (shape, verdicts)


def test_gemm_08_stream_k_is_right_both_ways(gemm_emulated):
    """FP8 (rung 08) runs the same kernel: its k-tiles hold 128 of K, so K = 640 is 5 of them, cut in two."""
    from cudabook.gemm import inputs, problem, s08_fp8 as s08
    for landing in ("lazy", "eager"):
        a, b = inputs.random_problem(20, 600, 640)
        p = problem.upload(a, b)
        p.poison()
        with emulate.emulating(landing, timeout_s=30):
            s08.launch(p, stream_k=True, blocks=4)
        assert s08.judge(p.result(), a, b).ok, landing


def test_stream_k_pays_where_the_last_wave_is_emptier_than_the_fixup_costs():
    from cudabook.gemm import s07_clusters as s07
    assert not s07.stream_k_pays(256, 66)      # 4096^3 on an H100 / H200: 3 waves + 58/66
    assert s07.stream_k_pays(1024, 66)         # 8192^3: 15 waves + 34/66
    assert not s07.stream_k_pays(60, 66)       # less than a wave: no whole wave first
    assert not s07.stream_k_pays(132, 66)      # whole waves only
    assert s07.stream_k_pays(67, 66) and not s07.stream_k_pays(66 + 50, 66)
    with pytest.raises(ValueError, match="stream_k must be True, False or 'auto'"):
        s07.config(stream_k="yes")
    with pytest.raises(ValueError, match="stream_k=True adds the parked sums in the ring"):
        s07.config(stream_k=True, stages=2)
    assert s07.config(stream_k=True)["STREAM_K"] == 1 and s07.config()["STREAM_K"] == 0


@pytest.mark.parametrize("edits, match", [
    ([("(1 << CLUSTER) - 1);\n          }", "1 << rank);\n          }")],
     r"(?s)DEADLOCK in the cluster.*would never complete: expect_tx says 49152 bytes, the boxes deliver 32768"),
    ([("        fence_proxy_async();                   // these writes, before TMA's reads of them\n", "")],
     r"a TMA store .* wrote through the generic proxy \(st.shared / stmatrix; .* no fence.proxy.async between"),
    ([("          if (leader) bulk_wait_read<STORE_BOXES - 1>();\n", "")],
     "the shared memory a TMA store reads changed between the store"),
    ([("if (CLUSTER > 1) cluster_sync(); else __syncthreads();   // peers' barriers exist before anyone multicasts",
       "__syncthreads();")],
     "with no cluster barrier between that barrier's mbarrier.init and this"),
], ids=["multicast mask: own block only", "no fence.proxy.async", "no wait_group.read", "no cluster_sync after init"])
def test_gemm_07_mistakes_outside_the_lab_region_are_reported(edits, match, gemm_emulated):
    with pytest.raises(emulate.EmulationError, match=match):
        gemm07(edits, store_boxes=1)
