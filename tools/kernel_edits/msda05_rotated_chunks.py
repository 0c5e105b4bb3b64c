"""msda 05 with each item of a warp loading its level's locations and weights in an order of its own.

A level's locations (P float2, 8 P bytes) and weights (P floats) are loaded by every lane of a group, the same
address (one wavefront a line), and a warp's 8 items are 8 lines, their pieces all at the same place of their lines
(an item's row is 8 L P bytes of locations, 4 L P of weights, and neighbouring items' rows start at the same place
of their 128-byte lines): the probe's one-line-a-cycle case, 8 cycles of the L1's data pipe a load instruction,
the pipe rung 05 is shortest of (lesson 05). Here, when P is even, item k of the warp loads the level's 16-byte
chunks of locations (two samples each) in the order (i + k) mod (P / 2), and each chunk's two weights as one 8-byte
piece beside it: at each load instruction the warp's pieces sit at up to P / 2 places of their lines, the probe's
spread case. The samples then come in that order too (the lab region's loop is unchanged: lxy and law hold them
rotated), so only the float32 sum's order changes. P / 2 weight loads of 8 bytes replace P / 4 of 16 bytes, and
each load's chunk costs an add and a mask. With P odd, the rung's loads. Right on the emulator cases of
test_msda_s05 (D = 8 to 128, P = 2 to 5), both paths; 4,079 SASS instructions a lane against the rung's 3,973 at
D = 32, P = 8 (NVRTC 13.5), 8 loads more, 64 registers, no stack.

Measured on an H200 at 3c448c0 (results/readings/H200_msda_05_lane_groups_edit_msda05_rotated_chunks.json and
..._profile_edit_...): rung / edited 0.990x on `local` and 0.993x on `uniform` (10 interleaved rounds; back to back,
2 s each, 0.990x and 0.992x). Nsight Compute: the L1's data pipe 92.0 % -> 86.8 % busy on `local`, 91.1 % -> 87.5 %
on `uniform` (about half the relief I had estimated from 8 cycles a load to about 2.6), the issue slots 73.3 % ->
74.6 % and 70.9 % -> 73.4 %, load requests 121.4 M -> 127.3 M. Not adopted: what the pipe gains, the issue slots
(and the ALU, 65.2 % -> 66.6 %) take back, as with msda05_head_pairs: rung 05 sits against both limits at once.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "8f88c1b"                              # the kernel it fits: the rung before it took head_pairs_packed32
ADOPTED = False                                # pinned, not adopted: it may still fit the rung's kernel

from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    text = _swap(text, """\
    const float* aw = attn + item * (LV * PV);
""", """\
    const float* aw = attn + item * (LV * PV);
    const unsigned turn = (threadIdx.x & 31) / G;     // this item's place in its warp: where its chunks start
""")
    return _swap(text, """\
        load_floats(lxy, (const float*)(xy + l * PV));
        load_floats(law, aw + l * PV);
""", """\
#if PV % 2 == 0
        {
            constexpr int C = PV / 2;                  // 16-byte chunks of the level's locations, two samples each
#pragma unroll
            for (int i = 0; i < C; ++i) {
                const unsigned j = (i + turn) % C;     // this item's i-th chunk
                const float4 v = __ldg((const float4*)(xy + l * PV) + j);
                const float2 w = __ldg((const float2*)(aw + l * PV) + j);
                lxy[4 * i] = v.x, lxy[4 * i + 1] = v.y, lxy[4 * i + 2] = v.z, lxy[4 * i + 3] = v.w;
                law[2 * i] = w.x, law[2 * i + 1] = w.y;
            }
        }
#else
        load_floats(lxy, (const float*)(xy + l * PV));
        load_floats(law, aw + l * PV);
#endif
""")
