from corpus.mutate import mutant
from cudabook.resample.s03_coalesced import launch as _launch

BUG = ("a packed pair unpacked big-endian: the high half of the uint32 taken as channel d, the low half as d + 1 "
       "(the GPU is little-endian: the lower address is the low half), so neighbouring channels swap")
SIZE = dict(B=1, S=9, T=3, D=6)
GPU_SIZE = dict(B=4, S=700, T=2000, D=66)

LO = "lo = f32_to_bf16(lerp(bf16_to_f32(a & np.uint32(0xFFFF)), bf16_to_f32(c & np.uint32(0xFFFF)), w))"
HI = "hi = f32_to_bf16(lerp(bf16_to_f32(a >> np.uint32(16)), bf16_to_f32(c >> np.uint32(16)), w))"
lerp_pair = mutant("cudabook.resample.s03_coalesced", "lerp_pair", [(LO, "lo = " + HI[5:]), (HI, "hi = " + LO[5:])])
kernel = mutant("cudabook.resample.s03_coalesced", "resample_vec4", lerp_pair=lerp_pair)


def launch(p):
    _launch(p, kernel=kernel, vec_bytes=4)
