"""kit.occupancy: blocks an SM by the occupancy rules (sm_90), on a CPU; on a Hopper GPU it agrees with the driver."""
import pytest

from cudabook import nvrtc
from cudabook.kit import occupancy


def test_each_limit_in_turn():
    o = occupancy.blocks_per_sm(registers=90, threads=256, shared_bytes=66576 + 1024)
    assert (o.by_shared, o.by_registers, o.blocks, o.limit) == (3, 2, 2, "registers")   # 12 units of 256 a warp
    o = occupancy.blocks_per_sm(registers=90, threads=256, shared_bytes=132128 + 1024)
    assert (o.blocks, o.limit) == (1, "shared memory")
    o = occupancy.blocks_per_sm(registers=168, threads=384, shared_bytes=0)             # GEMM 06's launch bounds
    assert (o.by_registers, o.blocks) == (1, 1)
    o = occupancy.blocks_per_sm(registers=32, threads=1024, shared_bytes=0)
    assert (o.blocks, o.limit) == (2, "registers") and o.by_threads == 2
    assert occupancy.blocks_per_sm(registers=16, threads=32, shared_bytes=0).blocks == 32       # the block limit
    assert occupancy.blocks_per_sm(registers=32, threads=128, shared_bytes=228 * 1024).blocks == 0


def test_impossible_launches_are_refused_with_the_rule():
    with pytest.raises(ValueError, match="1 <= threads <= 1024"):
        occupancy.blocks_per_sm(registers=32, threads=2048, shared_bytes=0)
    with pytest.raises(ValueError, match="registers=300"):
        occupancy.blocks_per_sm(registers=300, threads=128, shared_bytes=0)


@pytest.mark.hopper
@pytest.mark.parametrize("params", [{}, {"stages": 2}, {"stages": 3}, {"bn": 64}, {"bn": 256}])
def test_the_rules_agree_with_the_driver_on_a_hopper_gpu(params):
    from cudabook.gemm import s05_wgmma_tma as s05
    why = s05.unavailable()
    if why:
        pytest.skip(why)
    cfg = s05.config(**{**s05.PARAMS, **params})
    smem, threads = s05.smem_bytes(cfg), 128 * cfg["WGS"]
    prep = s05.RUNG.prepare(s05.source(), cfg, s05.KERNEL, smem=smem, threads=threads)
    usage = nvrtc.resource_usage(prep.cubin)[s05.KERNEL]
    model = occupancy.blocks_per_sm(usage["registers"], threads, smem + usage["shared"])
    assert model.blocks == prep.blocks_per_sm, (params, usage, smem, model)
