"""msda 05 with both msda05_head_pairs (a warp's items 4 queries of two neighbouring heads: its corner pieces in
both halves of their lines, the L1's spread case) and msda05_shuffled_positions (each sample worked out by one lane
of its group and handed on in six shuffles). Alone, the first relieves the L1's data pipe and leaves the issue
slots holding the rung; the second relieves the issue slots and pays its shuffles on the data pipe. Together both
limits may fall at once. Right on the emulator cases of test_msda_s05, both paths.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits

from cudabook.edits import load as _load  # noqa: E402


def edit(text: str) -> str:
    return _load("msda05_shuffled_positions").edit(_load("msda05_head_pairs").edit(text))
