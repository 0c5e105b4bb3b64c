"""msda 05 with both msda05_shared_positions (each sample's position worked out once a group, handed on through
shared memory) and msda05_heads_outer (the items taken head by head, queries fastest): the first trims the
instructions every lane repeats, the second the L2 traffic of `uniform` locations. Only the branch-free path (the
default) is edited.

Not adopted; written for rung 05 as it was at BASE (before the rung took its items head by head, with one
multiply-add an address), and probed against that kernel.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "072c6ff"                              # the kernel it fits: the rung before its items went head by head
ADOPTED = False                                # pinned, not adopted

from cudabook.edits import load as _load  # noqa: E402


def edit(text: str) -> str:
    return _load("msda05_shared_positions").shared_positions(text, heads_outer=True)
