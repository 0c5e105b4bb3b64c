"""msda 05 with each level's sampling locations and attention weights loaded 16 bytes at a time.

Rung 05 loads each sample's location (8 bytes) and weight (4 bytes) with a load of its own: 64 such loads a lane
an item beside its 128 corner loads. The G lanes of an item read the same address, and the warp's 8 items sit in
lines of their own (256 bytes of locations, 128 of weights an item), all at the same place of them, so each such
load costs the L1 a cycle a line (tools/probe_l1_gather.py: pieces at the same place of different lines share
the L1's banks, a line a cycle), as much as the corners cost in all (two a cycle: first and second halves). Here
each level's P locations arrive in P / 2 16-byte loads and its P weights in P / 4: 24 loads a lane an item in
place of 64, the same lines each, at the price of the level's values held in registers before its samples.

Adopted: rung 05 has loaded them this way (load_floats) since the commit after BASE, so the edit applies to the
kernel at BASE, and a probe taken again times the rung as it was against this edit.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "a1af15e"                               # the last commit whose rung 05 loads them one at a time


from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    text = _swap(text, "        const int H = __ldg(shapes + 2 * l), W = __ldg(shapes + 2 * l + 1), start = __ldg(starts + l);\n", """\
        const int H = __ldg(shapes + 2 * l), W = __ldg(shapes + 2 * l + 1), start = __ldg(starts + l);
        static_assert(PV % 4 == 0, "the level's locations two a load, its weights four");
        float2 lxy[PV];
        float law[PV];
#pragma unroll
        for (int i = 0; i < PV / 2; ++i) {
            const float4 v = __ldg((const float4*)(xy + l * PV) + i);
            lxy[2 * i] = make_float2(v.x, v.y);
            lxy[2 * i + 1] = make_float2(v.z, v.w);
        }
#pragma unroll
        for (int i = 0; i < PV / 4; ++i) {
            const float4 v = __ldg((const float4*)(aw + l * PV) + i);
            law[4 * i] = v.x;
            law[4 * i + 1] = v.y;
            law[4 * i + 2] = v.z;
            law[4 * i + 3] = v.w;
        }
""")
    text = _swap(text, "const float2 s = __ldg(xy + l * PV + p);", "const float2 s = lxy[p];")
    text = _swap(text, "const float a = __ldg(aw + l * PV + p);", "const float a = law[p];")
    return text
