"""msda 05 with both msda05_head_pairs (a warp's items 4 queries of two neighbouring heads: its corner pieces in
both halves of their lines, the L1's spread case) and msda05_shuffled_positions (each sample worked out by one lane
of its group and handed on in six shuffles). Alone, the first relieves the L1's data pipe and leaves the issue
slots holding the rung; the second relieves the issue slots and pays its shuffles on the data pipe. Together both
limits may fall at once. Right on the emulator cases of test_msda_s05, both paths; 3,491 SASS instructions a lane
against the rung's 3,973 at D = 32 (NVRTC 13.5; 64 registers, 8 bytes of stack: one register spilled once).

Measured on an H200 at 04e1197 (results/readings/H200_msda_05_lane_groups_edit_msda05_head_pairs_shuffled.json and
..._profile_edit_...): rung / edited **1.081x on `local`, 1.037x on `uniform`** (10 interleaved rounds; back to
back, 2 s each, 1.080x and 1.054x). Nsight Compute, rung -> edited: `local` 3,739 -> 3,463 us, L1 data pipe
92.3 % -> 80.9 %, issue slots 73.5 % -> 66.5 %, ALU 65.4 % -> 55.6 %; `uniform` 3,882 -> 3,664 us, 91.5 % ->
84.9 %, 71.1 % -> 62.9 %, L1 hit 49.5 % -> 47.4 %. Both limits fall at once: the head pairs' spread pays for the
shuffles' wavefronts, and the shuffles take the repeated position work off the issue slots. The first edit to lower
both; not adopted yet (the rung's lab region, its planted mistakes, the lesson's account of rung 05 and the
records must change with it).
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "8f88c1b"                              # the kernel it fits: the rung before it took head_pairs_packed32
ADOPTED = False                                # pinned, not adopted: it may still fit the rung's kernel

from cudabook.edits import load as _load  # noqa: E402


def edit(text: str) -> str:
    return _load("msda05_shuffled_positions").edit(_load("msda05_head_pairs").edit(text))
