"""The Hopper rungs of the GEMM track: 05 TMA + WGMMA, 06 warp specialisation, 07 clusters.

CPU (no GPU needed): every rung compiles to an sm_90a cubin whose SASS has the instructions its lesson is about
(HGMMA reading B transposed, UTMALDG, the mbarrier SYNCS, USETMAXREG for 06/07, UTMALDG.MULTICAST and UTMASTG
for 07) and no register spills; the tensor maps each rung encodes pass cudabook.tma.check_tiled at the benchmark
sizes and at ragged ones, and the unpadded map of a K that is not a multiple of 8 is refused with the reason;
the WGMMA descriptor built in Python (cudabook.gemm.wgmma) has the values the PTX ISA's field layout gives;
each .cu has exactly one lab region; parameters are checked; a machine that cannot run sm_90a code says why.
GPU (hopper): every rung on the checker's cases and more ragged shapes (K = 7 takes the padded path), parameter
variants, a learner's kernel text, 4096^3 once against the float64 reference, and the C++ descriptor (hopper.cuh
smem_desc, run on the GPU) equal to the Python one.
"""
import ctypes

import numpy as np
import pytest

from cudabook import device, gemm, notebooks, nvrtc, tma
from cudabook.gemm import s05_wgmma_tma as s05, s06_warp_specialized as s06, s07_clusters as s07, wgmma
from helpers import sass_or_skip

RUNGS = [s05, s06, s07]
IDS = [m.NAME for m in RUNGS]
BENCH = [(4096, 4096, 4096), (8192, 8192, 8192)]
RAGGED = [(1000, 1000, 1000), (129, 257, 72), (8, 8, 8), (100, 64, 7), (333, 517, 200), (130, 250, 77),
          (1, 1, 1), (1000, 72, 1000), (300, 1, 300)]


# ------------------------------------------------------------------------------------------ CPU

def test_stages_are_listed():
    for m in RUNGS:
        assert m.NAME in gemm.STAGES
        assert gemm.stage(m.NAME) is m and gemm.stage(int(m.NAME[:2])) is m
        assert m.MIN_CC == (9, 0) and m.SOURCE.is_file() and set(m.PARAMS)


@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
def test_compiles_for_sm90a(mod):
    assert mod.compile_cubin("sm_90a")[:4] == b"\x7fELF"
    assert mod.compile_cubin(source_text=mod.source())[:4] == b"\x7fELF"


@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
def test_sass(mod):
    sass_or_skip()
    cubin = mod.compile_cubin()
    bn = mod.PARAMS["bn"]
    hgmma = nvrtc.sass_lines(cubin, rf"^HGMMA\.64x{bn}x16\.F32\.BF16", kernel=mod.KERNEL)
    assert len(hgmma) == 4, hgmma                         # four k16 steps a 64-wide k-tile
    assert all("tnspB" in line for line in hgmma)        # B is [K, N]: MN-major, read transposed
    assert nvrtc.sass_lines(cubin, r"^UTMALDG\.2D", kernel=mod.KERNEL)
    assert nvrtc.sass_lines(cubin, r"^SYNCS\.PHASECHK", kernel=mod.KERNEL)     # mbarrier try_wait
    assert nvrtc.sass_lines(cubin, r"^SYNCS\.ARRIVE", kernel=mod.KERNEL)       # arrive / expect_tx
    assert nvrtc.sass_lines(cubin, r"^WARPGROUP\.ARRIVE", kernel=mod.KERNEL)   # wgmma.fence
    assert nvrtc.sass_lines(cubin, r"^(@!?P\d )?F2FP\.BF16", kernel=mod.KERNEL)   # cvt.rn.bf16x2.f32
    specialised = bool(nvrtc.sass_lines(cubin, r"^USETMAXREG", kernel=mod.KERNEL))
    assert specialised == (mod is not s05)
    stores = nvrtc.sass_lines(cubin, r"^UTMASTG\.2D", kernel=mod.KERNEL)
    multicast = nvrtc.sass_lines(cubin, r"^UTMALDG\.2D\.MULTICAST", kernel=mod.KERNEL)
    assert bool(stores) == bool(multicast) == (mod is s07)
    if mod is s07:
        assert not nvrtc.sass_lines(s07.compile_cubin(tma_store=False), r"^UTMASTG", kernel=s07.KERNEL)
        assert not nvrtc.sass_lines(s07.compile_cubin(cluster=1), r"MULTICAST", kernel=s07.KERNEL)
        assert len(nvrtc.sass_lines(cubin, r"^STSM", kernel=s07.KERNEL)) == 16        # stmatrix x4: 64 x 256
        assert not nvrtc.sass_lines(s07.compile_cubin(stmatrix=False), r"^STSM", kernel=s07.KERNEL)


@pytest.mark.parametrize("mod,params", [(s05, {}), (s05, {"bn": 256}), (s06, {}), (s07, {}),
                                        (s07, {"stages": 3, "store_boxes": 0, "stmatrix": False}),
                                        (s07, {"stream_k": True})],
                         ids=["05", "05-bn256", "06", "07", "07-3stages", "07-stream-k"])
def test_no_register_spills(mod, params):
    try:
        usage = nvrtc.resource_usage(mod.compile_cubin(**params))[mod.KERNEL]
    except nvrtc.ToolMissing as e:
        pytest.skip(str(e))
    assert usage["local"] == 0 and usage["stack"] == 0, usage


@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
@pytest.mark.parametrize("M,N,K", BENCH + RAGGED)
def test_tensor_maps_pass_check_tiled(mod, M, N, K):
    maps = mod.tensor_maps(M, N, K)
    assert set(maps) == ({"A", "B", "C"} if mod is s07 else {"A", "B"})
    for args in maps.values():
        tma.check_tiled(**args)
        assert args["swizzle"] == "128B" and args["box"][-1] * 2 == 128   # inner box = the swizzle span
    Kp, Np = s05.padded(M, N, K)
    assert maps["A"]["shape"] == (M, Kp) and maps["B"]["shape"] == (Kp, Np)


@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
def test_unpadded_map_is_refused(mod):
    """K = 7: a row of A is 14 bytes; TMA needs 16-byte multiples, so the host pads (Problem.aligned)."""
    with pytest.raises(tma.TensorMapError) as e:
        tma.check_tiled(**mod.tensor_maps(100, 64, 7, padded_rows=False)["A"])
    assert e.value.rule == "stride_multiple_16" and "14 bytes" in str(e.value)
    with pytest.raises(tma.TensorMapError):
        tma.check_tiled(**mod.tensor_maps(64, 63, 64, padded_rows=False)["B"])     # N = 63: 126-byte rows


def test_descriptor_known_values():
    # PTX ISA matrix-descriptor layout: start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45,
    # swizzle in 62-63 (1 = 128B). tech-facts section 7: LBO 16, SBO 1024, 128B swizzle.
    assert wgmma.descriptor(0x400, 16, 1024) == 0x4000004000010040
    assert wgmma.descriptor(0, 16, 1024) == (1 << 16) | (64 << 32) | (1 << 62)
    assert wgmma.descriptor(0x1A3F0, 8192, 1024) == 0x1A3F >> 0 | 512 << 16 | 64 << 32 | 1 << 62
    assert wgmma.descriptor(0x40400, 16, 1024) == wgmma.descriptor(0x400, 16, 1024)   # addr & 0x3FFFF
    assert wgmma.descriptor(0x400, 16, 1024, swizzle="none") == 0x0000004000010040
    assert wgmma.descriptor(0x400, 16, 1024, swizzle="32B") >> 62 == 3
    f = wgmma.fields(wgmma.descriptor(0x2C00, 8192, 1024))
    assert f == dict(address=0x2C00, lbo=8192, sbo=1024, base_offset=0, swizzle="128B")
    text = wgmma.explain(0x4000004000010040)
    assert "0x4000004000010040" in text and "1024 bytes" in text and "128B" in text
    with pytest.raises(ValueError):
        wgmma.descriptor(0x408, 16, 1024)                 # not 16-byte aligned


def test_k_tile_descriptors():
    """A steps 32 bytes a k16 slice (inside the swizzled row), B steps 16 rows of 128 bytes; B's LBO is the
    distance between 64-wide N atoms (one 64 x 64 box, 8 KiB)."""
    pairs = wgmma.k_tile_descriptors(0x1000, 0x5000)
    assert len(pairs) == 4
    for kk, (a, b) in enumerate(pairs):
        fa, fb = wgmma.fields(a), wgmma.fields(b)
        assert fa["address"] == 0x1000 + 32 * kk and fa["sbo"] == 1024
        assert fb["address"] == 0x5000 + 2048 * kk and fb["sbo"] == 1024 and fb["lbo"] == 8192


@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
def test_one_lab_region(mod):
    region = notebooks.region_source(str(mod.SOURCE.relative_to(notebooks.PACKAGE)))
    assert region.lstrip().startswith("// >>> lab:") and region.rstrip().endswith("// <<< lab")
    text = mod.SOURCE.read_text()
    tagged = text.count("// >>> lab[")                  # clusters.cu also holds rung 08's lab, tagged with it
    assert text.count("// >>> lab:") == 1 and text.count("// <<< lab") == 1 + tagged
    assert tagged == (1 if mod is s07 else 0)


@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
def test_parameters_are_checked(mod):
    with pytest.raises(TypeError, match="bogus"):
        mod.launch(None, bogus=1)
    with pytest.raises(ValueError):
        mod.compile_cubin(bn=96)


def test_register_budget_is_checked():
    with pytest.raises(ValueError, match="register"):
        s06.compile_cubin(consumer_regs=256, producer_regs=56)
    # 512 registers fit the register file but not the block's pool (3 x 168): setmaxnreg.inc would wait for ever
    with pytest.raises(ValueError, match="64,512 .*pool.*producer_regs=32, consumer_regs=240"):
        s06.compile_cubin(consumer_regs=240, producer_regs=32)
    from cudabook.gemm import hopper
    assert hopper.launch_registers(384) == 168 and hopper.launch_registers(256) == 248
    hopper.check_registers("06", 2, 40, 232)                                      # 504: the defaults fit exactly
    with pytest.raises(ValueError, match="cluster"):
        s07.compile_cubin(cluster=3)


@pytest.mark.skipif(device.gpu() is not None, reason="this machine has a GPU")
@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
def test_without_gpu_says_why(mod):
    a, b = gemm.random_problem(8, 8, 8)
    with pytest.raises(gemm.StageUnavailable, match="9.0") as e:
        gemm.run(mod.NAME, a, b)
    assert "compiles" in str(e.value)
    with pytest.raises(gemm.StageUnavailable):
        mod.launch(None)


def test_blackwell_says_sm90a_only(monkeypatch):
    fake = device.GPU(name="NVIDIA B200", compute_capability=(10, 0), sms=148, memory_bytes=0, driver_version="13.0",
                      memory_clock_khz=0, memory_bus_bits=0, l2_bytes=0, smem_per_block_optin=232448)
    monkeypatch.setattr(device, "gpu", lambda: fake)
    why = s07.unavailable()
    assert why and "sm_90a" in why and "10.0" in why and "9.0" in why


# ------------------------------------------------------------------------------------------ GPU

GPU_SHAPES = [(name, M, N, K) for name, M, N, K in gemm.cases(simulator=False)] + [
    ("1000^3", 1000, 1000, 1000), ("129 x 257 x 72", 129, 257, 72), ("8 x 8 x 8", 8, 8, 8),
    ("K = 7 (padded)", 100, 64, 7), ("N = 1", 300, 1, 300), ("ragged, several tiles", 1037, 600, 520)]


@pytest.mark.hopper
@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
@pytest.mark.parametrize("name,M,N,K", GPU_SHAPES, ids=[s[0] for s in GPU_SHAPES])
def test_correct(mod, name, M, N, K, rng):
    a, b = gemm.random_problem(M, N, K, rng=rng)
    verdict = gemm.judge(gemm.run(mod.NAME, a, b), a, b)
    assert verdict.ok, f"{mod.NAME} {name}:\n{verdict}"


VARIANTS = [(s05, {"bn": 64}), (s05, {"bn": 256, "stages": 3}), (s05, {"warpgroups": 1, "stages": 2}),
            (s06, {"bn": 128, "stages": 6}), (s06, {"group_m": 1, "blocks": 7}), (s06, {"consumers": 1}),
            (s07, {"cluster": 1}), (s07, {"cluster": 4}), (s07, {"tma_store": False, "stages": 4}),
            (s07, {"multicast": 0}), (s07, {"multicast": 2}), (s07, {"mma_depth": 0}),
            (s07, {"stages": 4, "store_boxes": 1}), (s07, {"stages": 3, "store_boxes": 0}),
            (s07, {"stmatrix": False}), (s07, {"bn": 128, "stages": 5}), (s07, {"blocks": 4}),
            (s07, {"stream_k": True}), (s07, {"stream_k": True, "blocks": 6}),
            (s07, {"stream_k": True, "cluster": 4, "blocks": 8}), (s07, {"stream_k": True, "bn": 128, "consumers": 1})]


@pytest.mark.hopper
@pytest.mark.parametrize("mod,params", VARIANTS, ids=[f"{m.NAME[:2]}-{p}" for m, p in VARIANTS])
@pytest.mark.parametrize("M,N,K", [(333, 517, 200), (1037, 600, 520), (70, 1100, 9)])
def test_variants(mod, params, M, N, K, rng):
    a, b = gemm.random_problem(M, N, K, rng=rng)
    verdict = gemm.judge(gemm.run(mod.NAME, a, b, **params), a, b)
    assert verdict.ok, f"{mod.NAME} {params}:\n{verdict}"


@pytest.mark.hopper
@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
def test_learner_kernel_text(mod, rng):
    """launch(kernel=...) compiles a whole .cu text with the stage's constants (the lab grader's path)."""
    a, b = gemm.random_problem(200, 300, 136, rng=rng)
    p = gemm.upload(a, b)
    p.poison()
    mod.launch(p, kernel=mod.source() + "\n// a learner's copy\n")
    assert gemm.judge(p.result(), a, b).ok


@pytest.mark.hopper
def test_stream_k_auto_shares_a_nearly_empty_last_wave(rng):
    """One 256 x 256 unit more than the clusters that fit: "auto" turns Stream-K on, and the product is right; at
    4096^3 (the last wave 58/66 full on an H100 or H200) it stays off."""
    fit = s07.how_it_runs(4096, 4096, 4096)["clusters"]
    shape = (256 * (fit + 1), 256, 520)
    assert s07.how_it_runs(*shape) == dict(units=fit + 1, clusters=fit, whole_waves=1, last_wave=1, stream_k=True)
    if fit == 66:
        assert not s07.how_it_runs(4096, 4096, 4096)["stream_k"] and s07.how_it_runs(8192, 8192, 8192)["stream_k"]
    a, b = gemm.random_problem(*shape, rng=rng)
    verdict = gemm.judge(gemm.run(s07.NAME, a, b), a, b)
    assert verdict.ok, str(verdict)


@pytest.mark.hopper
def test_stream_k_refuses_more_clusters_than_fit(rng):
    """A Stream-K piece waits for pieces of other clusters, so they must all run at once: blocks beyond what fits
    are refused, naming the limit (the emulator runs clusters in order, where any number is safe)."""
    fit = s07.how_it_runs(4096, 4096, 4096)["clusters"]
    a, b = gemm.random_problem(300, 600, 640, rng=rng)
    with pytest.raises(ValueError, match=rf"stream_k=True with blocks={2 * fit + 2}: only {fit} clusters of 2 fit"):
        gemm.run(s07.NAME, a, b, stream_k=True, blocks=2 * fit + 2)


@pytest.fixture(scope="module")
def big_case():
    rng = np.random.default_rng(4096)
    a, b = gemm.random_problem(4096, 4096, 4096, rng=rng)
    return a, b, gemm.reference_with_bound(a, b)


@pytest.mark.hopper
@pytest.mark.parametrize("mod", RUNGS, ids=IDS)
def test_4096(mod, big_case):
    a, b, (ref, bound) = big_case
    verdict = gemm.compare(gemm.run(mod.NAME, a, b), ref, bound)
    assert verdict.ok, str(verdict)


PROBE = r"""
#include "hopper.cuh"
extern "C" __global__ void desc_probe(const uint32_t* addr, const uint32_t* lbo, const uint32_t* sbo,
                                      uint64_t* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = smem_desc(addr[i], lbo[i], sbo[i]);
}
"""


@pytest.mark.hopper
def test_descriptor_cuh_matches_python():
    """hopper.cuh's smem_desc, run on the GPU, gives the descriptors cudabook.gemm.wgmma builds."""
    from numba import cuda
    cases = [(0x400, 16, 1024), (0x0, 16, 1024), (0x2C00, 8192, 1024), (0x34000, 16384, 1024),
             (0x1A3F0, 8192, 2048), (0x40400, 16, 1024), (0x38FF0, 0x3FFF0, 0x3FFF0)]
    addr, lbo, sbo = (cuda.to_device(np.array(col, np.uint32)) for col in zip(*cases))
    out = cuda.device_array(len(cases), np.uint64)
    kern = nvrtc.load(nvrtc.compile(PROBE, name="desc_probe.cu"), "desc_probe")
    ptr = lambda x: x.device_ctypes_pointer.value  # noqa: E731
    kern.launch(1, 32, [ptr(addr), ptr(lbo), ptr(sbo), ptr(out), len(cases)], (ctypes.c_void_p,) * 4 + (ctypes.c_int,))
    got = [int(x) for x in out.copy_to_host()]
    assert got == [wgmma.descriptor(*c) for c in cases], [hex(g) for g in got]
