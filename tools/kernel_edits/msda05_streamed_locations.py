"""msda 05 with each sample's location and weight loaded past the L1 (ld.global.nc.L1::no_allocate): they are read
once, and at the benchmark's size a block's locations and weights are some 48 KB (128 items x 32 samples x 12
bytes), lines the L1 would otherwise keep in place of the corners that neighbouring queries share. The loads still
go through the L1's data pipe; only the lines they bring are not kept.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits

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
