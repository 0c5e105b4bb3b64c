"""msda 05 with both msda05_shared_positions (each sample's position worked out once a group, handed on through
shared memory) and msda05_heads_outer (the items taken head by head, queries fastest): the first trims the
instructions every lane repeats, the second the L2 traffic of `uniform` locations. Only the branch-free path (the
default) is edited.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits

from cudabook.edits import load as _load  # noqa: E402


def edit(text: str) -> str:
    return _load("msda05_shared_positions").shared_positions(text, heads_outer=True)
