// How many SM cycles the TMA unit spends a box (tools/probe_tma_rate.py): one warp a block, ISSUERS of its lanes
// each keeping RING boxes in flight, every box a BOX_H x BOX_W tile of bf16 at a random place of a 2-D tensor
// [rows, cols] (x a multiple of BOX_W, so that a row of a box is one aligned piece, as a corner row is in the
// deformable-attention track's boxes: BOX_W = 32, BOX_H = 4 is shaped like its 256-byte box, four 64-byte
// pieces from four places).
// Nothing reads the boxes but the check at the end: the time is the TMA unit's and the memory's alone.
//
// Each issuing lane has RING slots of shared memory, each with an mbarrier; before it refills a slot it waits
// for that slot's previous box (the barrier's phase), so at most ISSUERS x RING boxes of a block are in flight.
// The block's clock64() from after the barriers' set-up to the last box landed goes to cycles[block]. The last
// box of every issuer is then checked against the tensor's pattern (element (y, x) holds (y * cols + x) mod
// 2^16): the mismatches are added to *wrong, so a probe that measured the wrong thing says so.
#include "hopper.cuh"

#ifndef BOX_W
#define BOX_W 32          // elements (bf16) a box row
#endif
#ifndef BOX_H
#define BOX_H 4           // rows a box
#endif
#ifndef ISSUERS
#define ISSUERS 1         // lanes that issue boxes, 1 to 32
#endif
#ifndef RING
#define RING 4            // boxes each issuing lane keeps in flight
#endif

constexpr int BOX_BYTES = BOX_W * BOX_H * 2;
constexpr int SLOT = (BOX_BYTES + 127) / 128 * 128;                 // each box lands 128-byte aligned
constexpr int OFF_BAR = ISSUERS * RING * SLOT;
constexpr int SMEM_BYTES = OFF_BAR + ISSUERS * RING * 8 + 128;     // + slack to align the base to 128 bytes
static_assert(ISSUERS >= 1 && ISSUERS <= 32 && RING >= 1, "1 to 32 issuing lanes, a ring of at least 1");
static_assert(BOX_W >= 8 && BOX_W <= 256 && BOX_H >= 1 && BOX_H <= 256, "a box is 8-256 elements by 1-256 rows");

extern "C" __global__ void __launch_bounds__(32)
tma_rate(const __grid_constant__ TmaDesc map, int boxes, int cols, int rows, unsigned seed,
         long long* __restrict__ cycles, unsigned* __restrict__ wrong) {
  extern __shared__ unsigned char smem_raw[];
  if (dynamic_smem_bytes() < SMEM_BYTES) asm volatile("trap;");      // the host's size disagrees with this one
  unsigned char* smem = smem_raw + ((128 - (smem_u32(smem_raw) & 127)) & 127);
  const int lane = threadIdx.x;
  const uint32_t bar0 = smem_u32(smem + OFF_BAR) + 8 * lane * RING;  // this lane's RING barriers
  if (lane < ISSUERS)
    for (int s = 0; s < RING; ++s) mbar_init(bar0 + 8 * s, 1);
  mbar_fence_init();
  __syncwarp();
  const long long t0 = clock64();
  uint32_t state = seed ^ (blockIdx.x * 0x9E3779B9u) ^ (lane * 0x85EBCA6Bu);
  const uint32_t spots_x = (uint32_t)(cols / BOX_W), spots_y = (uint32_t)(rows - BOX_H + 1);
  int last_x = 0, last_y = 0;
  if (lane < ISSUERS) {
    for (int k = 0; k < boxes; ++k) {
      const int s = k % RING;
      if (k >= RING) mbar_wait(bar0 + 8 * s, (uint32_t)((k / RING - 1) & 1));   // the slot's previous box landed
      state = state * 1664525u + 1013904223u;
      last_x = (int)((state >> 7) % spots_x) * BOX_W;
      state = state * 1664525u + 1013904223u;
      last_y = (int)((state >> 7) % spots_y);
      mbar_expect_tx(bar0 + 8 * s, BOX_BYTES);
      tma_load_2d(smem_u32(smem + (lane * RING + s) * SLOT), &map, bar0 + 8 * s, last_x, last_y);
    }
    for (int k = boxes > RING ? boxes - RING : 0; k < boxes; ++k)            // the last RING boxes land
      mbar_wait(bar0 + 8 * (k % RING), (uint32_t)((k / RING) & 1));
  }
  __syncwarp();
  const long long t1 = clock64();
  if (lane < ISSUERS && boxes > 0) {            // the last box, element by element, against the pattern
    const uint16_t* box = (const uint16_t*)(smem + (lane * RING + (boxes - 1) % RING) * SLOT);
    unsigned bad = 0;
    for (int r = 0; r < BOX_H; ++r)
      for (int c = 0; c < BOX_W; ++c)
        bad += box[r * BOX_W + c] != (uint16_t)((unsigned)(last_y + r) * (unsigned)cols + (unsigned)(last_x + c));
    if (bad) atomicAdd(wrong, bad);
  }
  if (lane == 0) cycles[blockIdx.x] = t1 - t0;
}
