"""msda 05 with each sample's location and weight loaded past the L1 (ld.global.nc.L1::no_allocate): they are read
once, and at the benchmark's size a block's locations and weights are some 48 KB (128 items x 32 samples x 12
bytes), lines the L1 would otherwise keep in place of the corners that neighbouring queries share. The loads still
go through the L1's data pipe; only the lines they bring are not kept. (The CPU emulator does not run this PTX;
the GPU probe checks the result.)

Measured on an H200 at ace1181 (results/readings/H200_msda_05_lane_groups_edit_msda05_streamed_locations.json):
slower, rung / edited 0.995x on `local` and 0.979x on `uniform` (10 interleaved rounds; back to back 0.981x and
0.967x). Most likely the lines the locations and weights leave in the L1 cost it little, and skipping the L1 costs
more (not profiled). Not adopted.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "b4a18e2"                              # the kernel it fits: the rung before it took msda05_sample_pairs
ADOPTED = False                                # pinned, not adopted: it may still fit the rung's kernel

from cudabook.edits import swap as _swap  # noqa: E402


def edit(text: str) -> str:
    text = _swap(text, """\
typedef uint4 Vec;""", """\
__device__ __forceinline__ float2 load_once(const float2* p) {     // read once: not kept in the L1
    float2 v;
    asm("ld.global.nc.L1::no_allocate.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p));
    return v;
}
__device__ __forceinline__ float load_once(const float* p) {
    float v;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

typedef uint4 Vec;""")
    return _swap(text, """\
            const float2 s = __ldg(xy + l * PV + at);
            const float a = has ? __ldg(aw + l * PV + at) : 0.f;
""", """\
            const float2 s = load_once(xy + l * PV + at);
            const float a = has ? load_once(aw + l * PV + at) : 0.f;
""")
