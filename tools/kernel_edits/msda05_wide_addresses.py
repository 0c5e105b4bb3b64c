"""msda 05 with each corner's address one 32 x 32 -> 64-bit multiply-add.

Rung 05 at BASE formed a corner's address as base + row * pitch, base a Vec pointer: in its SASS that is six
instructions a corner (the select, the multiply, a 64-bit add of the lane's index and the shift by 16 to bytes,
each split in two), 24 a sample of its 140. Here base is the lane's byte address and the pitch is in bytes: the
compiler forms the address with one IMAD.WIDE (row times the byte pitch plus the 64-bit base) after the select.
Compiled here (NVRTC 13.5, sm_90a, the benchmark's D = 32, L = 4, P = 8): 3,957 instructions a lane in place of
4,475 (LEA 390 -> 8, IMAD 570 -> 339), 44 registers in place of 61; right on every grading case in the emulator,
both ways. Only the branch-free path (the default) is edited.

Adopted: rung 05 has had heads_outer_wide's three edits since the commit after BASE (its reading on the H200:
1.057x on `local` and 1.199x on `uniform` in 10 interleaved rounds, 1.075x and 1.152x back to back).
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "072c6ff"                              # adopted since: the last commit before (rung_text reads it)

from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    text = _swap(text, "extern \"C\" __global__ void __launch_bounds__(NT)\n", """\
// The vector at row `row` of pitch `pitch_bytes` from `base`: one 32 x 32 -> 64-bit multiply-add (IMAD.WIDE).
__device__ __forceinline__ const Vec* row_at(const char* base, int row, int pitch_bytes) {
    return (const Vec*)(base + (long long)row * pitch_bytes);
}

extern "C" __global__ void __launch_bounds__(NT)
""")
    text = _swap(text, "    const int pitch = M * VECS;", "    const char* lane_bytes = (const char*)base;\n"
                 "    const int pitch_bytes = M * VECS * 16;\n    const int pitch = M * VECS;")
    for old in ("(top && left ? row : start) * pitch", "(top && right ? row + 1 : start) * pitch",
                "(bottom && left ? row + W : start) * pitch", "(bottom && right ? row + W + 1 : start) * pitch"):
        text = _swap(text, f"load_corner(base + {old}, g)",
                     f"load_corner(row_at(lane_bytes, {old[:-len(' * pitch')]}, pitch_bytes), g)")
    return text
