"""msda 05 with three edits together: the items taken head by head (msda05_heads_outer: the blocks an SM holds
read one or two heads' maps, not all eight), each corner's address one multiply-add (msda05_wide_addresses) and
the registers held to 64 a thread (msda05_wide_addresses_two_blocks). Profiled on the H200 against the rung at
BASE (results/readings/H200_msda_05_lane_groups_profile_edit_msda05_heads_outer_wide.json): L1 held 49.4 % of the
sectors the global loads asked for on `uniform` (22.5 % before) and 78.3 % on `local` (69.2 %); the issue slots
are then about three quarters busy on both, the ALU the busiest arithmetic pipe.

Adopted: rung 05 has had heads_outer_wide's three edits since the commit after BASE (its reading on the H200:
1.057x on `local` and 1.199x on `uniform` in 10 interleaved rounds, 1.075x and 1.152x back to back).
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "072c6ff"                              # adopted since: the last commit before (rung_text reads it)

from cudabook.edits import load as _load  # noqa: E402


def edit(text: str) -> str:
    return _load("msda05_heads_outer").edit(_load("msda05_wide_addresses_two_blocks").edit(text))
