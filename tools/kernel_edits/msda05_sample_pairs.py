"""msda 05 with each lane working out two samples at a time, where P is even: lane g of a group takes samples 2g
and 2g + 1 of a run of 2G, loading their two locations in one 16-byte load and their two weights in one 8-byte
load, so that a warp's location and weight loads (one line an item each, every line a wavefront of the L1's data
pipe) come once a run of 2G samples in place of once a round of G. The shuffles are as many (five a sample, now
from lane j / 2, its first or second sample); each lane holds two samples' five values until they are handed on.
At odd P the rung's rounds of G, unchanged. Right in the emulator on test_msda_s05's shapes, M = 3 and 4, both vector
widths; 3,288 SASS instructions a lane against the rung's 3,328 (8 location and weight loads an item against 16),
64 registers, no spill at D = 32 (16 bytes of stack at D = 40, P = 2).

Measured on an H200 at 60abbea (results/readings/H200_msda_05_lane_groups_edit_msda05_sample_pairs.json and
..._profile_edit_...): rung / edited 1.022x on `local`, 1.025x on `uniform` (10 interleaved rounds; back to back
1.024x and 1.029x). Nsight Compute: `local` L1 data pipe 80.1 -> 76.3 %, issue slots 69.0 -> 69.7 %, global load
requests 115.5 M -> 109.5 M; `uniform` pipe 83.6 -> 81.5 %. Rung 05 has taken it since, by hand (its
odd-P path loads the pair's two locations apart, where the edit keeps the rounds of G).
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "b4a18e2"                              # adopted since: the last commit before (rung_text reads it)

from cudabook.edits import swap as _swap  # noqa: E402

_WORK_OUT = """\
// One sample worked out by the lane that owns it: its top-left corner's row with the steps to the other corners
// packed in one int (row << 2 | dy << 1 | dx, a step of 0 where a column or row is clamped onto the map), and its
// four weights (zero for a corner off the map).
__device__ __forceinline__ void work_out(float2 s, float a, int W, int H, int start, int& packed, float (&w)[4]) {
    const float x = s.x * W - 0.5f, y = s.y * H - 0.5f;
    const float fx0 = floorf(x), fy0 = floorf(y), fx = x - fx0, fy = y - fy0;
    const bool on = x > -1.0f && y > -1.0f && x < (float)W && y < (float)H;
    const int x0 = on ? (int)fx0 : 0, y0 = on ? (int)fy0 : 0;
    const bool left = on && x0 >= 0, right = on && x0 + 1 < W, top = on && y0 >= 0, bottom = on && y0 + 1 < H;
    const int xl = max(x0, 0), xr = min(x0 + 1, W - 1), yt = max(y0, 0), yb = min(y0 + 1, H - 1);
    packed = ((start + yt * W + xl) << 2) | ((yb - yt) << 1) | (xr - xl);
    w[0] = top && left ? a * (1.f - fy) * (1.f - fx) : 0.f;
    w[1] = top && right ? a * (1.f - fy) * fx : 0.f;
    w[2] = bottom && left ? a * fy * (1.f - fx) : 0.f;
    w[3] = bottom && right ? a * fy * fx : 0.f;
}

"""

_PAIRS = """\
#if PV % 2 == 0
#pragma unroll
        for (int r = 0; r < (PV + 2 * G - 1) / (2 * G); ++r) {
            const int mine = 2 * (r * G + g);          // this lane's two samples, mine and mine + 1 (P even)
            const bool has = mine < PV;
            const int at = has ? mine : PV - 2;
            const float4 s2 = __ldg((const float4*)(xy + l * PV + at));
            const float2 a2 = has ? __ldg((const float2*)(aw + l * PV + at)) : make_float2(0.f, 0.f);
            int my_r0, my_r1;
            float my_w0[4], my_w1[4];
            work_out(make_float2(s2.x, s2.y), a2.x, W, H, start, my_r0, my_w0);
            work_out(make_float2(s2.z, s2.w), a2.y, W, H, start, my_r1, my_w1);
#pragma unroll
            for (int j = 0; j < 2 * G; ++j) {
                if (r * 2 * G + j < PV) {                                 // compile-time: the run's samples
                    const int packed = __shfl_sync(FULL, j & 1 ? my_r1 : my_r0, j >> 1, G);
                    const int r00 = packed >> 2;
                    float w[4];
#pragma unroll
                    for (int c = 0; c < 4; ++c) w[c] = __shfl_sync(FULL, j & 1 ? my_w1[c] : my_w0[c], j >> 1, G);
                    const int dx = packed & 1, dyW = packed & 2 ? W : 0;
                    const Corner c00 = load_corner(base + r00 * pitch, g);
                    const Corner c01 = load_corner(base + (r00 + dx) * pitch, g);
                    const Corner c10 = load_corner(base + (r00 + dyW) * pitch, g);
                    const Corner c11 = load_corner(base + (r00 + dyW + dx) * pitch, g);
                    add_corner(acc, c00, w[0]);
                    add_corner(acc, c01, w[1]);
                    add_corner(acc, c10, w[2]);
                    add_corner(acc, c11, w[3]);
                }
            }
        }
#else
"""


def edit(text: str) -> str:
    text = _swap(text, "typedef uint4 Vec;", "typedef uint4 Vec;\n\n" + _WORK_OUT.rstrip("\n"))
    start = "#pragma unroll\n        for (int r = 0; r < (PV + G - 1) / G; ++r) {\n"
    assert text.count(start) == 1, "the kernel no longer has exactly one round loop"
    i = text.index(start)
    j = text.index("#else\n", i)
    return text[:i] + _PAIRS + text[i:j] + "#endif\n" + text[j:]
