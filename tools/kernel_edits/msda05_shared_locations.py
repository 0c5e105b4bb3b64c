"""msda 05 with each block's sampling locations and attention weights read once, coalesced, into shared memory.

Rung 05, when this edit was timed (before load_floats), had every lane of a group load each sample's location (8
bytes) and weight (4 bytes) itself: the G lanes of an item read the same address, and a warp's 8 items are 256
bytes apart in the locations and 128 in the weights, so each such load touches a line per item, all at the same
place of their lines: the same banks of the L1, which serves such lines one a cycle (tools/probe_l1_gather.py,
measured after this edit was timed). Here the block first copies its items' locations and weights, contiguous in
global memory, into shared memory with consecutive threads on consecutive words, then each lane reads them from
there: 8 items' words in distinct banks (the column XOR-swizzled by the item), one wavefront. Shared memory: NT /
G items x LV * PV samples x 12 bytes (48 KiB at 512 threads, D = 32, L = 4, P = 8).

Measured (results/readings/H200_msda_05_lane_groups_edit_msda05_shared_locations.json, H200, interleaved rounds): right on both
workloads; 0.961x the speed of the rung before load_floats on `local`, 1.028x on `uniform`. Not adopted. (On
today's rung the edit still fits: the rung's own lxy, law loads go unused and the compiler drops them.)

Not adopted; written for rung 05 as it was at BASE (before the rung took its items head by head, with one
multiply-add an address), and probed against that kernel.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "072c6ff"                              # the kernel it fits: the rung before its items went head by head
ADOPTED = False                                # pinned, not adopted


from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    text = _swap(text, "    if (item >= (long long)N * Lq * M || g >= VECS) return;", """\
    constexpr int BI = NT / G, SAMPLES = LV * PV;             // items a block, samples an item
    static_assert(SAMPLES % 8 == 0, "the swizzle keeps a column inside its row when LV * PV is a multiple of 8");
    __shared__ float2 sxy[BI][SAMPLES];
    __shared__ float saw[BI][SAMPLES];
    {
        const long long first = (long long)blockIdx.x * BI, items = (long long)N * Lq * M;
        for (int i = threadIdx.x; i < BI * SAMPLES; i += NT) {
            const int r = i / SAMPLES, c = (i % SAMPLES) ^ (r & 7);
            if (first + r < items) {
                sxy[r][c] = __ldg(loc + first * SAMPLES + i);
                saw[r][c] = __ldg(attn + first * SAMPLES + i);
            }
        }
    }
    __syncthreads();
    const int li = threadIdx.x / G;                           // this lane's item in the block
    if (item >= (long long)N * Lq * M || g >= VECS) return;""")
    # (the rung's own loads of the level's locations and weights into lxy, law go unused, and the compiler drops them)
    text = _swap(text, "const float2 s = make_float2(lxy[2 * p], lxy[2 * p + 1]);",
                 "const float2 s = sxy[li][(l * PV + p) ^ (li & 7)];")
    text = _swap(text, "const float a = law[p];", "const float a = saw[li][(l * PV + p) ^ (li & 7)];")
    return text
