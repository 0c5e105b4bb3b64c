"""msda 05 as msda05_head_pairs_packed, with two more trims: the items numbered in 32-bit arithmetic (the thread
index, the item count and the divisions that split an item into (n, m, q) are unsigned 32-bit, so the host must keep
N Lq M G below 2**31 threads; 64-bit divisions cost some 270 SASS instructions a thread at the benchmark's size),
and a lane without a sample in its round loading its level's last one (its weight zeroed) in place of a predicated
load, which took the register spill at D = 24, P = 5 away (at D = 40, P = 2 it keeps 8 bytes of stack). 3,314 SASS
instructions a lane against head_pairs_packed's 3,589 and the rung's 3,973 at D = 32 (NVRTC 13.5). Right on the
emulator cases of test_msda_s05, both paths.

Measured on an H200 at 5d32017 (results/readings/H200_msda_05_lane_groups_edit_msda05_head_pairs_packed32.json):
faster than the rung on both workloads, and faster than head_pairs_packed timed in the same session. Rung 05 has
taken it since (with head_pairs_packed, by hand).
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "8f88c1b"                              # adopted since: the last commit before (rung_text reads it)

from cudabook.edits import load as _load  # noqa: E402
from cudabook.edits import swap as _swap  # noqa: E402


def edit(text: str) -> str:
    text = _load("msda05_head_pairs_packed").edit(text)
    text = _swap(text, """\
            const float2 s = has ? __ldg(xy + l * PV + mine) : make_float2(0.f, 0.f);
            const float a = has ? __ldg(aw + l * PV + mine) : 0.f;
""", """\
            const int at = has ? mine : PV - 1;        // a lane without a sample loads the level's last one
            const float2 s = __ldg(xy + l * PV + at);
            const float a = has ? __ldg(aw + l * PV + at) : 0.f;
""")
    text = _swap(text, """\
    const long long t = (long long)blockIdx.x * NT + threadIdx.x;
    const long long items = (long long)N * Lq * M;
    const int g = (int)(t % G);
    const bool live = t / G < items;                   // no lane returns: the shuffles need the whole warp
    const long long order = live ? t / G : items - 1;  // (n, m, q) flattened, queries fastest: head by head
""", """\
    const unsigned t = blockIdx.x * NT + threadIdx.x;  // 32-bit: the host keeps N Lq M G below 2**31
    const unsigned items = (unsigned)N * Lq * M;
    const int g = (int)(t % G);
    const bool live = t / G < items;                   // no lane returns: the shuffles need the whole warp
    const unsigned order = live ? t / G : items - 1;
""")
    text = _swap(text, """\
        q = (int)((order >> 1) % Lq);
        const long long np = (order >> 1) / Lq;
""", """\
        q = (int)((order >> 1) % (unsigned)Lq);
        const unsigned np = (order >> 1) / (unsigned)Lq;
""")
    return _swap(text, """\
        q = (int)(order % Lq);
        const long long nm = order / Lq;
""", """\
        q = (int)(order % (unsigned)Lq);
        const unsigned nm = order / (unsigned)Lq;
""")
