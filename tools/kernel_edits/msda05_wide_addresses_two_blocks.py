"""msda 05 with msda05_wide_addresses (each corner's address one 32 x 32 -> 64-bit multiply-add) and its registers
held to 64 a thread (__launch_bounds__(NT, 1024 / NT): two blocks of 512 threads an SM, as the rung has).

The wide-addresses edit alone cut the lane's SASS from 4,475 to 3,957 instructions (NVRTC 13.5 here), yet ran
0.952x the rung's speed on `local` on the H200: profiled there (NVRTC 13.0, `python -m cudabook.profile --edit
msda05_wide_addresses msda 05`), it took 72 registers a thread, so an SM held one block of 512 threads, not
two (occupancy 24 % in place of 48 %). Here the compiler is asked to fit the rung's occupancy.

Adopted: rung 05 has had heads_outer_wide's three edits since the commit after BASE (its reading on the H200:
1.057x on `local` and 1.199x on `uniform` in 10 interleaved rounds, 1.075x and 1.152x back to back).
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "072c6ff"                              # adopted since: the last commit before (rung_text reads it)

from cudabook.edits import load as _load, swap as _swap  # noqa: E402


def two_blocks(text: str) -> str:
    """The kernel held to 64 registers a thread: 1024 / NT blocks an SM."""
    return _swap(text, "extern \"C\" __global__ void __launch_bounds__(NT)\nmsda_lane_groups(",
                 "extern \"C\" __global__ void __launch_bounds__(NT, 1024 / NT)\nmsda_lane_groups(")


def edit(text: str) -> str:
    return two_blocks(_load("msda05_wide_addresses").edit(text))
