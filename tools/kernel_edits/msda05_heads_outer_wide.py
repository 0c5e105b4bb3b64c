"""msda 05 with three edits together: the items taken head by head (msda05_heads_outer: on `uniform` locations,
the blocks an SM holds read one head's map, and L1 serves 47 % of the corner sectors in place of 23 %), each
corner's address one multiply-add (msda05_wide_addresses) and the registers held to 64 a thread
(msda05_wide_addresses_two_blocks). With the items head by head, `uniform` too runs into the issue slots and
the ALU pipe (profiled on the H200: issue 78 %, ALU 71 %), which the wide addresses trim.

Adopted: rung 05 has had heads_outer_wide's three edits since the commit after BASE (the readings:
heads_outer_wide 1.044x on `local`, 1.201x on `uniform`, H200, interleaved rounds).
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "072c6ff"                              # adopted since: the last commit before (rung_text reads the kernel there)

from cudabook.edits import load as _load  # noqa: E402


def edit(text: str) -> str:
    return _load("msda05_heads_outer").edit(_load("msda05_wide_addresses_two_blocks").edit(text))
