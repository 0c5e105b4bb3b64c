"""msda 05 as msda05_head_pairs_shuffled, with each sample's top-left corner row and its steps to the other three
corners packed into one int (row * 4 + 2 dy + dx; dyW taken from the level's W), so five shuffles a sample hand a
sample to the group in place of six, and no register spills (msda05_head_pairs_shuffled keeps 8 bytes of stack at
64 registers with NVRTC 13.5; this edit none). Needs a level's rows below 2**29 (a pixel index times 4 in an int).
Right on the emulator cases of test_msda_s05, both paths; 3,589 SASS instructions a lane (160 of them shuffles)
against the rung's 3,973 at D = 32.

Measured on an H200 at 6f2a2fb (results/readings/H200_msda_05_lane_groups_edit_msda05_head_pairs_packed.json and
..._profile_edit_...): rung / edited **1.086x on `local`, 1.044x on `uniform`** (10 interleaved rounds; back to
back, 2 s each, 1.085x and 1.049x), about as msda05_head_pairs_shuffled. Nsight Compute on `local`: 3,746 -> 3,455
us, L1 data pipe 92.3 % -> 78.9 %, issue slots 73.4 % -> 69.1 %, ALU 65.4 % -> 58.9 %. The candidate for rung 05
(no spills; not adopted yet: the lab region, its planted mistakes, lesson 05's account of the rung and the records
change with it; the host must refuse a level of 2**29 pixels or more).
"""
TRACK, STAGE = "msda", "05_lane_groups"
BASE = "8f88c1b"                              # adopted since (with packed32's trims): the commit before
from cudabook.edits import load as _load  # noqa: E402


def edit(text: str) -> str:
    t = _load("msda05_shuffled_positions").edit(_load("msda05_head_pairs").edit(text))
    old1 = """            const int my_r00 = start + yt * W + xl;                       // clamped onto the map
            const int my_step = (yb - yt) * W * 2 + (xr - xl);            // dyW * 2 + dx
"""
    new1 = """            const int my_r00 = ((start + yt * W + xl) << 2) | ((yb - yt) << 1) | (xr - xl);
"""
    assert t.count(old1) == 1
    t = t.replace(old1, new1)
    old2 = """                    const int r00 = __shfl_sync(FULL, my_r00, j, G);
                    const int step = __shfl_sync(FULL, my_step, j, G);
"""
    new2 = """                    const int packed = __shfl_sync(FULL, my_r00, j, G);
                    const int r00 = packed >> 2;
"""
    assert t.count(old2) == 1
    t = t.replace(old2, new2)
    old3 = "                    const int dx = step & 1, dyW = step >> 1;\n"
    new3 = "                    const int dx = packed & 1, dyW = packed & 2 ? W : 0;\n"
    assert t.count(old3) == 1
    return t.replace(old3, new3)
