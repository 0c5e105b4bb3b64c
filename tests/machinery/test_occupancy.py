"""kit.occupancy: blocks an SM by the occupancy rules (sm_90), on a CPU; on a Hopper GPU it agrees with the driver."""
import pytest

from cudabook import nvrtc
from cudabook.kit import occupancy


def test_each_limit_in_turn():
    o = occupancy.blocks_per_sm(registers=90, threads=256, shared_bytes=66576 + 1024)
    assert (o.by_shared, o.by_registers, o.blocks, o.limit) == (3, 2, 2, "registers")   # 12 units of 256 a warp
    o = occupancy.blocks_per_sm(registers=90, threads=256, shared_bytes=132128 + 1024)
    assert (o.blocks, o.limit) == (1, "shared memory")
    o = occupancy.blocks_per_sm(registers=90, threads=256, shared_bytes=99352 + 1024)
    assert (o.blocks, o.limit) == (2, "shared memory and registers")
    o = occupancy.blocks_per_sm(registers=168, threads=384, shared_bytes=0)             # GEMM 06's launch bounds
    assert (o.by_registers, o.blocks) == (1, 1)
    o = occupancy.blocks_per_sm(registers=32, threads=1024, shared_bytes=0)
    assert (o.blocks, o.limit) == (2, "registers and threads")
    o = occupancy.blocks_per_sm(registers=16, threads=32, shared_bytes=0)
    assert (o.blocks, o.limit) == (32, "blocks an SM")
    assert occupancy.blocks_per_sm(registers=0, threads=32, shared_bytes=0).limit == "blocks an SM"
    assert occupancy.blocks_per_sm(registers=32, threads=128, shared_bytes=228 * 1024).blocks == 0


def test_registers_are_counted_per_sub_partition():
    # a warp's registers come from one of the SM's four quarters: blocks whose warps are not a multiple of four
    # fit fewer than the whole file's count would say (cases checked against CUDA 13.0's cuda_occupancy.h)
    for registers, threads, blocks in ((90, 96, 6), (90, 32, 20), (40, 544, 2), (224, 288, 0), (90, 256, 2)):
        assert occupancy.blocks_per_sm(registers, threads, 0).blocks == blocks, (registers, threads)


def test_an_sm90_cubin_counts_the_reserved_kilobyte_itself():
    # a kernel that uses shared memory reports 1 KiB more for sm_90 than it declares (sm_80: what it declares):
    # the block's reservation, which for_kernel must not add again
    src = ('extern "C" __global__ void dyn(float* x) { extern __shared__ float s[]; s[threadIdx.x] = x[threadIdx.x];'
           ' __syncthreads(); x[threadIdx.x] = s[31 - threadIdx.x]; }\n'
           'extern "C" __global__ void stat(float* x) { __shared__ float s[64]; s[threadIdx.x] = x[threadIdx.x];'
           ' __syncthreads(); x[threadIdx.x] = s[31 - threadIdx.x]; }')
    try:
        hopper = nvrtc.resource_usage(nvrtc.compile(src, arch="sm_90a"))
        ampere = nvrtc.resource_usage(nvrtc.compile(src, arch="sm_80"))
    except nvrtc.ToolMissing as e:
        pytest.skip(str(e))
    reserved = occupancy.SMEM_RESERVED_PER_BLOCK
    assert [hopper[k]["shared"] for k in ("dyn", "stat")] == [reserved, 256 + reserved]
    assert [ampere[k]["shared"] for k in ("dyn", "stat")] == [0, 256]
    full = occupancy.SMEM_PER_SM
    assert occupancy.for_kernel(hopper["dyn"], 128, 8192).by_shared == full // (8192 + reserved)
    assert occupancy.for_kernel(hopper["stat"], 128, 8192).by_shared == full // (8192 + 256 + reserved)
    with pytest.raises(ValueError, match="not an sm_90 cubin"):
        occupancy.for_kernel(ampere["stat"], 128)


def test_impossible_launches_are_refused_with_the_rule():
    with pytest.raises(ValueError, match="1 <= threads <= 1024"):
        occupancy.blocks_per_sm(registers=32, threads=2048, shared_bytes=0)
    with pytest.raises(ValueError, match="registers=300"):
        occupancy.blocks_per_sm(registers=300, threads=128, shared_bytes=0)


@pytest.mark.hopper
@pytest.mark.parametrize("params", [{}, {"stages": 2}, {"stages": 3}, {"bn": 64}, {"bn": 256}])
def test_the_rules_agree_with_the_driver_on_a_hopper_gpu(params):   # (whole warpgroups: see the msda test below)
    from cudabook.gemm import s05_wgmma_tma as s05
    why = s05.unavailable()
    if why:
        pytest.skip(why)
    cfg = s05.config(**{**s05.PARAMS, **params})
    smem, threads = s05.smem_bytes(cfg), 128 * cfg["WGS"]
    prep = s05.RUNG.prepare(s05.source(), cfg, s05.KERNEL, smem=smem, threads=threads)
    usage = nvrtc.resource_usage(prep.cubin)[s05.KERNEL]
    model = occupancy.for_kernel(usage, threads, smem)
    assert model.blocks == prep.blocks_per_sm, (params, usage, smem, model)


@pytest.mark.hopper
@pytest.mark.parametrize("consumer_warps", [2, 4])     # blocks of 3 and 5 warps: the sub-partition rule matters
def test_the_rules_agree_with_the_driver_for_blocks_of_odd_warps(consumer_warps):
    from cudabook.msda import s04_tma_boxes as s04
    why = s04.unavailable()
    if why:
        pytest.skip(why)
    cfg = s04.config(32, 4, 8, consumer_warps=consumer_warps)
    smem, threads = s04.smem_bytes(cfg), (consumer_warps + 1) * 32
    prep = s04.RUNG.prepare(s04.source(), {**cfg, "EXPECT_SMEM": smem}, s04.KERNEL, smem=smem, threads=threads)
    usage = nvrtc.resource_usage(prep.cubin)[s04.KERNEL]
    model = occupancy.for_kernel(usage, threads, smem)
    assert model.blocks == prep.blocks_per_sm, (consumer_warps, usage, smem, model)
    if consumer_warps == 2:      # the case that decides it: 17,568 dynamic bytes, 12 blocks by the driver on an
        twice = occupancy.blocks_per_sm(usage["registers"], threads, smem + usage["shared"])    # H200; 11 if
        assert twice.blocks < model.blocks or smem != 17568, (twice, model)   # the 1 KiB were counted twice
