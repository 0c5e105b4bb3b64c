"""msda 05 with each sample's position worked out by one lane of its group and handed to the others by shuffles.

Rung 05 sits against two limits at once (lesson 05, the head-pairs profiles): the L1's data pipe and the issue
slots. Every one of a group's G lanes repeats each sample's position, corner rows and weights (about 50 of its
some 120 instructions a sample); only the loads and the blend of its own 8 channels are its own. Here, level by
level and G samples at a time, lane g works out sample r G + g alone (loading its location and weight itself, a
group's lanes on neighbouring samples) and hands it over in six shuffles within the group (__shfl_sync of width
G): the corner row r00 of its top-left corner, clamped onto the map, one int packing the steps to the other three
(dx in 0 or 1, dy W in 0 or W), and the four weights (0 for a corner off the map, the attention weight folded in).
Every lane then forms the four rows (r00, r00 + dx, r00 + dyW, r00 + dyW + dx: an off-map corner, weight 0, reads
a pixel on the map), one multiply-add an address, and loads and blends as the rung does. About a fifth fewer
instructions a sample in each lane, and the integer pipe relieved most; the price is six shuffles a sample a warp.
The edit assumed that shuffles do not use the L1's data pipe, rung 05's tighter limit; its profile (below)
suggests they do. Unlike msda05_shared_positions, no shared memory and no __syncwarp a level: a warp's lanes run
in step, and nothing but the shuffles' latency stands between a sample's position and its loads. The shuffles need
the whole warp, so no lane returns early: a lane past the items works out its share and stores nothing, and a lane
past the row (G > D / 8) loads nothing (load_corner). Only the branch-free path (the default) is edited; an
off-map corner reads a clamped pixel in place of the level's first, with the same zero weight. Right on the
emulator cases of test_msda_s05 (D = 8 to 128), both paths; 3,312 SASS instructions a lane against the rung's
3,973 at D = 32 (NVRTC 13.5; 64 registers and one spilled once, 8 bytes of stack).

Measured on an H200 at 37a4cec (results/readings/H200_msda_05_lane_groups_edit_msda05_shuffled_positions.json and
..._profile_edit_...): rung / edited 0.941x on `local`, 0.976x on `uniform` (10 interleaved rounds; back to back,
2 s each, 0.987x and 1.002x). Nsight Compute: the issue slots fall from 73.5 % busy to 57.4 % and the ALU pipe
from 65 % to 49 %, as meant, but the L1's data pipe rises from 92.1 % to 96.6 % (91.4 % to 97.3 % on `uniform`)
while the global load requests fall by 5.9 M, and the LSU pipe's share doubles (12.7 % to 25.3 %; short_scoreboard
and mio_throttle stalls rise). One wavefront for each of the 142 M warp-wide shuffles, less what the fewer loads
saved, could explain the rise: an estimate (the profiles give no clock, and the pipe's counts are not split by
kind). tools/probe_l1_gather.py --shuffles then measured it on the H200 (8d2326f, reading l1_shuffles): a
warp-wide shuffle costs an SM one cycle of a unit the L1's and shared memory's loads need too, and loads and
shuffles together take the sum of each alone. So the shuffles are paid where rung 05 is shortest, and the warps
now wait on their loads and shuffles (long_scoreboard 35 %, short_scoreboard 20 %). Not adopted. With
msda05_head_pairs it says the same from the other side: the L1's data pipe is the harder of rung 05's two limits,
and an edit that frees issue slots by moving work onto that pipe (shuffles, shared memory) loses. With
msda05_head_pairs it pays: msda05_head_pairs_shuffled, 1.081x and 1.037x.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "8f88c1b"                              # the kernel it fits: the rung before it took head_pairs_packed32
ADOPTED = False                                # pinned, not adopted: it may still fit the rung's kernel

from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)

LEVEL_START = ("        float lxy[2 * PV], law[PV];        // the level's P locations (x, y, x, y, ...)"
               " and P attention weights\n")
LEVEL_END = "        // <<< lab\n"

SHUFFLED = """\
#if BRANCHLESS
        constexpr unsigned FULL = 0xFFFFFFFFu;
#pragma unroll
        for (int r = 0; r < (PV + G - 1) / G; ++r) {
            // this lane's sample of the round: sample r G + g (none past the level's P: weights 0)
            const int mine = r * G + g;
            const bool has = mine < PV;
            const float2 s = has ? __ldg(xy + l * PV + mine) : make_float2(0.f, 0.f);
            const float a = has ? __ldg(aw + l * PV + mine) : 0.f;
            const float x = s.x * W - 0.5f, y = s.y * H - 0.5f;
            const float fx0 = floorf(x), fy0 = floorf(y), fx = x - fx0, fy = y - fy0;
            const bool on = x > -1.0f && y > -1.0f && x < (float)W && y < (float)H;
            const int x0 = on ? (int)fx0 : 0, y0 = on ? (int)fy0 : 0;
            const bool left = on && x0 >= 0, right = on && x0 + 1 < W, top = on && y0 >= 0, bottom = on && y0 + 1 < H;
            const int xl = max(x0, 0), xr = min(x0 + 1, W - 1), yt = max(y0, 0), yb = min(y0 + 1, H - 1);
            const int my_r00 = start + yt * W + xl;                       // clamped onto the map
            const int my_step = (yb - yt) * W * 2 + (xr - xl);            // dyW * 2 + dx
            const float my_w00 = top && left ? a * (1.f - fy) * (1.f - fx) : 0.f;
            const float my_w01 = top && right ? a * (1.f - fy) * fx : 0.f;
            const float my_w10 = bottom && left ? a * fy * (1.f - fx) : 0.f;
            const float my_w11 = bottom && right ? a * fy * fx : 0.f;
#pragma unroll
            for (int j = 0; j < G; ++j) {
                if (r * G + j < PV) {                                     // compile-time: the round's samples
                    const int r00 = __shfl_sync(FULL, my_r00, j, G);
                    const int step = __shfl_sync(FULL, my_step, j, G);
                    const float w00 = __shfl_sync(FULL, my_w00, j, G), w01 = __shfl_sync(FULL, my_w01, j, G);
                    const float w10 = __shfl_sync(FULL, my_w10, j, G), w11 = __shfl_sync(FULL, my_w11, j, G);
                    const int dx = step & 1, dyW = step >> 1;
                    const Corner c00 = load_corner(base + r00 * pitch, g);
                    const Corner c01 = load_corner(base + (r00 + dx) * pitch, g);
                    const Corner c10 = load_corner(base + (r00 + dyW) * pitch, g);
                    const Corner c11 = load_corner(base + (r00 + dyW + dx) * pitch, g);
                    add_corner(acc, c00, w00);
                    add_corner(acc, c01, w01);
                    add_corner(acc, c10, w10);
                    add_corner(acc, c11, w11);
                }
            }
        }
#else
"""


def edit(text: str) -> str:
    text = _swap(text, """\
    const long long order = t / G;                     // (n, m, q) flattened, queries fastest: head by head
    const int g = (int)(t % G);
    if (order >= (long long)N * Lq * M || g >= VECS) return;   // (lanes past the row: when G > VECS)
""", """\
    const long long items = (long long)N * Lq * M;
    const int g = (int)(t % G);
    const bool live = t / G < items;                   // no lane returns: the shuffles need the whole warp
    const long long order = live ? t / G : items - 1;  // (n, m, q) flattened, queries fastest: head by head
""")
    start = text.index(LEVEL_START)
    end = text.index(LEVEL_END, start) + len(LEVEL_END)
    text = text[:start] + SHUFFLED + text[start:end] + "#endif\n" + text[end:]
    return _swap(text, """\
        if (g + i * G < VECS)
            out[""", """\
        if (live && g + i * G < VECS)
            out[""")
