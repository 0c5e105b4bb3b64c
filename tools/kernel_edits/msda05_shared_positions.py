"""msda 05 with each sample's position worked out once a group, not once a lane: handed on through shared memory.

Rung 05's profile (H200) has its issue slots 80 % busy and the ALU pipe 73 %: every one of a group's G lanes
repeats each sample's position, corner rows and weights (about 70 of its some 140 instructions a sample), then
loads and blends its own 8 channels. Here, level by level, lane g of a group works out the samples g, g + G, ...
only (loading their locations and weights itself, 8 and 4 bytes, a group's lanes on neighbouring samples), and
writes each one's four corner rows (an off-map corner: the level's first pixel) and four weights (0 off the map,
the attention weight folded in) to shared memory, 32 bytes a sample. After a __syncwarp every lane reads all
the level's samples back (two 16-byte shared loads a sample; each item's row padded by 16 bytes so that a
warp's items fall in different banks), forms each corner's address with one 32 x 32 -> 64-bit multiply-add, and
loads and blends as the rung does. Shared memory: NT / G items x (PV + 1) x 32 bytes (36 KiB at 512 threads,
D = 32, P = 8). No lane returns early (a __syncwarp needs the whole warp): lanes past the items or past the row
still work out their share of samples, and only skip the loads (load_corner) and the store. Only the
branch-free path (the default) is edited.

Measured on the H200 (interleaved rounds, commit 29329dd; results/readings/): right on both workloads; 0.950x the
rung's speed on `local`, 1.021x on `uniform`; at 256 threads a block (rung and edit both), 1.029x and 0.979x.
Profiled on `local` (`python -m cudabook.profile --edit`, ncu 2025.3, printed then, before such profiles were
kept as readings): 4,105 µs against the rung's 3,899; issue slots 51 % busy against 80 %, the ALU pipe 44 %
against 73 %, 56 registers, and its warps waiting on their loads (long_scoreboard) 74 % of their cycles against
26 %: fewer instructions, and most likely fewer loads in flight (the __syncwarp of each level keeps one level's
loads from being issued before the last level's are used; the loads in flight were not counted).

Not adopted; written for rung 05 as it was at BASE (before the rung took its items head by head, with one
multiply-add an address), and probed against that kernel.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "072c6ff"                              # the kernel it fits: the rung before its items went head by head
ADOPTED = False                                # pinned, not adopted
BLOCK = """
    constexpr int BI = NT / G;                         // items a block
    __shared__ int4 srow[BI][PV + 1];                  // a sample's four corner rows (+1: a warp's items' banks)
    __shared__ float4 swt[BI][PV + 1];                 // and their four weights
    const int it = threadIdx.x / G;
"""

from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


ITEMS = """\
    const long long item = t / G;                      // (n, q, m) flattened, heads fastest
    const int g = (int)(t % G);
    if (item >= (long long)N * Lq * M || g >= VECS) return;    // (lanes past the row: when G > VECS)
"""
HEADS = """\
    const int m = (int)(item % M);
    const long long nq = item / M;
    const int n = (int)(nq / Lq);
"""


def edit(text: str) -> str:
    return shared_positions(text, heads_outer=False)


def shared_positions(text: str, heads_outer: bool) -> str:
    """The edit; with `heads_outer`, also the items taken head by head (msda05_heads_outer)."""
    if heads_outer:
        text = _swap(text, HEADS, "")
        text = _swap(text, ITEMS, """\
    const long long items = (long long)N * Lq * M;
    const bool valid = t / G < items;                  // (no early return: the group's lanes share the samples)
    const long long order = valid ? t / G : items - 1; // (n, m, q) flattened, queries fastest
    const int q = (int)(order % Lq);
    const long long nm = order / Lq;
    const int m = (int)(nm % M);
    const int n = (int)(nm / M);
    const long long item = ((long long)n * Lq + q) * M + m;   // the row it reads and writes: (n, q, m)
    const int g = (int)(t % G);""" + BLOCK)
    else:
        text = _swap(text, ITEMS, """\
    const long long items = (long long)N * Lq * M;
    const bool valid = t / G < items;                  // (no early return: the group's lanes share the samples)
    const long long item = valid ? t / G : items - 1;  // (n, q, m) flattened, heads fastest
    const int g = (int)(t % G);""" + BLOCK)
    text = _swap(text, "    const int pitch = M * VECS;", "    const char* lane_bytes = (const char*)base;\n"
                 "    const int pitch_bytes = M * VECS * 16;\n    const int pitch = M * VECS;")
    start = text.index("#if BRANCHLESS\n            // every corner is loaded")
    end = text.index("#else\n", start) + len("#else\n")
    old = text[start:end]
    # the rung's per-sample loop wraps the branch-free body; the edit puts its own loops around it instead
    loop_head = """\
#pragma unroll
        for (int p = 0; p < PV; ++p) {
            const float2 s = make_float2(lxy[2 * p], lxy[2 * p + 1]);
            const float a = law[p];
            const float x = s.x * W - 0.5f, y = s.y * H - 0.5f;
"""
    text = _swap(text, loop_head + old, """\
#if BRANCHLESS
        __syncwarp();                                  // the level before: every lane has read its samples
#pragma unroll
        for (int k = 0; k < (PV + G - 1) / G; ++k) {  // this lane's share of the level's samples
            const int p = g + k * G;
            if (p < PV) {
                const float2 s = __ldg(xy + l * PV + p);
                const float a = __ldg(aw + l * PV + p);
                const float x = s.x * W - 0.5f, y = s.y * H - 0.5f;
                const float fx0 = floorf(x), fy0 = floorf(y), fx = x - fx0, fy = y - fy0;
                const bool on = x > -1.0f && y > -1.0f && x < (float)W && y < (float)H;
                const int x0 = on ? (int)fx0 : 0, y0 = on ? (int)fy0 : 0;
                const bool left = on && x0 >= 0, right = on && x0 + 1 < W, top = on && y0 >= 0,
                           bottom = on && y0 + 1 < H;
                const int row = start + y0 * W + x0;
                srow[it][p] = make_int4(top && left ? row : start, top && right ? row + 1 : start,
                                        bottom && left ? row + W : start, bottom && right ? row + W + 1 : start);
                swt[it][p] = make_float4(top && left ? a * (1.f - fy) * (1.f - fx) : 0.f,
                                         top && right ? a * (1.f - fy) * fx : 0.f,
                                         bottom && left ? a * fy * (1.f - fx) : 0.f,
                                         bottom && right ? a * fy * fx : 0.f);
            }
        }
        __syncwarp();
#pragma unroll
        for (int p = 0; p < PV; ++p) {
            const int4 r = srow[it][p];
            const float4 w = swt[it][p];
            const Corner c00 = load_corner(row_at(lane_bytes, r.x, pitch_bytes), g);
            const Corner c01 = load_corner(row_at(lane_bytes, r.y, pitch_bytes), g);
            const Corner c10 = load_corner(row_at(lane_bytes, r.z, pitch_bytes), g);
            const Corner c11 = load_corner(row_at(lane_bytes, r.w, pitch_bytes), g);
            add_corner(acc, c00, w.x);
            add_corner(acc, c01, w.y);
            add_corner(acc, c10, w.z);
            add_corner(acc, c11, w.w);
        }
#else
#pragma unroll
        for (int p = 0; p < PV; ++p) {
            const float2 s = make_float2(lxy[2 * p], lxy[2 * p + 1]);
            const float a = law[p];
            const float x = s.x * W - 0.5f, y = s.y * H - 0.5f;
""")
    text = _swap(text, "            }\n#endif\n        }\n        // <<< lab",
                 "            }\n        }\n#endif\n        // <<< lab")
    text = _swap(text, "extern \"C\" __global__ void __launch_bounds__(NT)\n", """\
// The vector at row `row` of pitch `pitch_bytes` from `base`: one 32 x 32 -> 64-bit multiply-add (IMAD.WIDE).
__device__ __forceinline__ const Vec* row_at(const char* base, int row, int pitch_bytes) {
    return (const Vec*)(base + (long long)row * pitch_bytes);
}

extern "C" __global__ void __launch_bounds__(NT)
""")
    text = _swap(text, "        if (g + i * G < VECS)\n            out[",
                 "        if (valid && g + i * G < VECS)\n            out[")
    return text
